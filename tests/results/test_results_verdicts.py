"""One rule for what a verdict may use (toolkit/schema/eligibility.py), at every verdict site: crossovers and
the threshold advice (toolkit/results/verdicts.py), SLO capacity and advice (toolkit/results/slo.py), `results
slo` on the committed H200 run, the heatmap's box on every committed archive, tune's verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_cli
from toolkit.results.archive import open_archive
from toolkit.results.compact import exists
from toolkit.results.verdicts import advice_text, crossovers, current, mark
from toolkit.schema.records import HostLoadRecord
from toolkit.schema.eligibility import (MIN_CELL_S, MIN_SAMPLES, Eligibility, busy_check, cell_flags, short_why,
                                        stall_check)
from toolkit.schema.records import CellSummary, RequestRecord, Stat
from toolkit.schema.slo import CellSlo
from toolkit.schema.manifest import ArmState, Speedup

H200 = "results/sglang-h200/20261202T190515Z-52c8f2"  # committed: NGRAM capped at 48 by SGLang, c=64 queued
TUNE = ROOT / "results/quickstart-tune/20261203T083318Z-598b59"  # committed: three confirmation cells DRIFT


def cell(arm: str, conc: int, *, n: int = 512, seconds: float = 20.0, status: str = "ok") -> CellSummary:
    return CellSummary(arm=arm, domain="coding", concurrency=conc, output_len=64, workload_hash="h", status=status,
                       n_requests=n, duration_s=seconds, metrics={"output_tok_s": Stat(p50=100.0, n=n)})


# -- the rule

def test_each_reason_a_verdict_may_not_use_a_cell() -> None:
    capped = ArmState(max_running_requests=48, max_running_requests_implicit=True)
    assert [f.code for f in cell_flags(cell("s", 64), capped)] == ["capped"]
    assert "48" in cell_flags(cell("s", 64), capped)[0].why and cell_flags(cell("s", 48), capped) == []
    implicit_only = ArmState(max_running_requests=None, max_running_requests_implicit=True)  # SGLang's own 48
    assert [f.code for f in cell_flags(cell("s", 64), implicit_only)] == ["capped"]
    assert [f.code for f in cell_flags(cell("s", 1, status="failed"))] == ["failed"]
    assert [f.code for f in cell_flags(cell("s", 1, n=MIN_SAMPLES - 1))] == ["few-samples"]
    assert [f.code for f in cell_flags(cell("s", 1), drift="A/A 0.6x")] == ["drift"]
    short = cell_flags(cell("s", 16, seconds=0.4))
    assert [(f.code, f.excludes) for f in short] == [("short", False)] and "0.4 s" in short[0].why
    assert short_why(cell("s", 16, n=32, seconds=MIN_CELL_S * 2)) == "2 requests per slot < 4"
    assert cell_flags(cell("s", 64), capped)[0].excludes and cell_flags(cell("s", 1, status="failed"))[0].excludes


def stream(i: int, send: float, e2e: float, conc: int = 8) -> RequestRecord:
    return RequestRecord(arm="a", domain="coding", concurrency=conc, prompt_id=f"p{i}", send_s=send, ttft_ms=5,
                         e2e_ms=e2e, output_tokens=32)


def test_a_stall_is_a_few_slow_requests_in_flight_together() -> None:
    rng = np.random.default_rng(0)
    base = [stream(i, i * 0.1, float(rng.uniform(90, 110))) for i in range(60)]
    assert stall_check(base) is None
    # the 8 requests in flight at 2.0 s all wait 2 s: one stall (the H200's ngram c=16 cell looked like this)
    stalled = base + [stream(100 + i, 2.0 + i * 0.001, 2100.0) for i in range(8)]
    chk = stall_check(stalled)
    assert chk is not None and chk.excludes and "8 of 68 requests" in chk.message
    # as many slow requests, one at a time over the cell, each beside fast ones: a long prompt, not a stall
    scattered = base + [stream(100 + i, 0.5 + i * 3.0, 2100.0) for i in range(8)]
    assert stall_check(scattered) is None
    # most requests slow: that is the cell's distribution, not a stall
    assert stall_check([stream(i, 0.0, 2000.0) for i in range(20)] + base[:10]) is None


def test_busy_host_threshold() -> None:
    assert busy_check(HostLoadRecord(**{"cpus": 16, "own_cores": 2.0, "foreign_cores": 1.0, "steal": 0.0})) is None
    assert busy_check(HostLoadRecord(**{"cpus": 2, "own_cores": 1.5, "foreign_cores": 4.0, "steal": 0.0})) is not None
    assert "steal" in busy_check(HostLoadRecord(**{"cpus": 16, "own_cores": 1.0, "foreign_cores": 0.0, "steal": 0.3})).message
    other = busy_check(HostLoadRecord(**{"cpus": 16, "own_cores": 1.0, "foreign_cores": 0.0, "other_runs": [{"pid": 7, "matrix": "m"}]}))
    assert other is not None and "m (pid 7)" in other.message and not other.excludes


# -- crossovers and advice

def rows(ratios: dict[int, tuple[float, float]]) -> list[Speedup]:
    return [Speedup(arm="spec", baseline="base", domain="coding", concurrency=c, throughput_ratio=r, ci_high=hi)
            for c, (r, hi) in ratios.items()]


def test_a_capped_level_never_makes_a_crossover() -> None:
    """The only slowdown is at c=64, where the arm queued behind its cap of 48: no crossover, no threshold."""
    rs = rows({1: (1.5, 1.6), 16: (1.1, 1.2), 64: (0.6, 0.7)})
    cells = [cell(a, c) for a in ("spec", "base") for c in (1, 16, 64)]
    elig = Eligibility(cells, {"spec": ArmState(max_running_requests=48, max_running_requests_implicit=True)})
    (x,) = crossovers(mark(rs, elig), {"spec"})
    assert x.crossover_concurrency is None and x.excluded == [64] and "left out: c=64 capped" in x.note
    assert (x.crossover_concurrency, x.recommended_disable_batch_threshold) == (None, None)
    (unruled,) = crossovers(rs, {"spec"})  # the same rows without the rule: the queue made a crossover
    assert unruled.crossover_concurrency == 64


def test_no_eligible_level_no_advice_at_all() -> None:
    rs = mark(rows({1: (0.5, 0.6), 4: (0.5, 0.6)}), Eligibility([cell("spec", 1, n=3), cell("spec", 4, n=3)]))
    (x,) = crossovers(rs, {"spec"})
    assert x.no_advice and not x.never_pays_off and x.recommended_disable_batch_threshold is None
    text = advice_text([x], "spec")
    assert text.startswith("no advice") and "threshold" not in text and "pays off" not in text


def test_never_pays_off_is_never_beside_no_threshold_needed() -> None:
    never = {"arm": "spec", "domain": "coding", "crossover_concurrency": 1, "never_pays_off": True}
    fine = {"arm": "spec", "domain": "chat", "crossover_concurrency": None, "never_pays_off": False}
    text = advice_text([never, fine], "spec")
    assert "never pays off in coding" in text and "no threshold needed" not in text


def rate_rows(ratios: dict[float, tuple[float, float]]) -> list[Speedup]:
    return [Speedup(arm="spec", baseline="base", domain="coding", concurrency=4096, rate=q, throughput_ratio=r,
                    ci_high=hi) for q, (r, hi) in ratios.items()]


def rate_cell(arm: str, rate: float, in_flight: float, repeat: int = 0) -> CellSummary:
    c = cell(arm, 4096).model_copy(update={"rate": rate, "repeat": repeat, "effective_concurrency": in_flight})
    return c


def test_a_rate_crossover_advises_the_running_batch_the_server_saw_there() -> None:
    """Significantly slower from r=4/s on: the threshold is the speculative arm's mean requests in flight at
    4 req/s (5.6 and 6.2 over two repeats: 5.9, rounded down), not the rate; capped by max_running_requests."""
    rs = rate_rows({1.0: (1.4, 1.6), 4.0: (0.8, 0.9), 8.0: (0.6, 0.7)})
    cells = [rate_cell("spec", q, f, i) for q, fs in ((1.0, [1.1]), (4.0, [5.6, 6.2]), (8.0, [30.0]))
             for i, f in enumerate(fs)] + [rate_cell("base", 4.0, 3.0)]
    info = {"spec": ArmState(max_running_requests=48)}
    (x,) = crossovers(rs, {"spec"}, cells, info)
    assert (x.crossover_rate, x.recommended_disable_batch_threshold, x.running_batch) == (4.0, 5, 5.9)
    assert "r=4/s on, where spec's server ran 5.9 requests at once (mean requests in flight over 2 cell(s), under " \
           "the server's cap of 48): set speculative-disable-batch-threshold: 5" in x.note
    assert advice_text([x], "spec") == "set speculative-disable-batch-threshold: 5"
    (capped,) = crossovers(rs, {"spec"}, cells, {"spec": ArmState(max_running_requests=4)})
    assert capped.recommended_disable_batch_threshold == 4 and "max_running_requests (4)" in capped.note
    (blind,) = crossovers(rs, {"spec"})  # no cells: the rate, and no number
    assert blind.recommended_disable_batch_threshold is None and "which no cell recorded" in blind.note
    (never,) = crossovers(rate_rows({1.0: (0.8, 0.9), 4.0: (0.7, 0.8)}), {"spec"}, cells, info)
    assert never.never_pays_off and never.recommended_disable_batch_threshold is None


# -- SLO: capacity and advice

def slo(arm: str, conc: int, holds: bool, excluded: list[str] | None = None) -> CellSlo:
    return CellSlo(arm=arm, domain="coding", concurrency=conc, output_len=64, holds=holds, goodput_tok_s=100.0,
                   why="" if holds else "tpot_ms.p90 31 > 30", excluded=excluded or [])


def test_a_capped_cell_never_defines_capacity_or_advice() -> None:
    from toolkit.results.slo import advise, capacities
    from toolkit.schema.manifest import Derived

    capped = ["capped (c=64 above the 48 requests the server runs at once)"]
    cells = [slo("spec", c, True) for c in (1, 16)] + [slo("spec", 64, True, capped)]
    cells += [slo("base", c, True) for c in (1, 16, 64)]
    cap = {x.arm: x for x in capacities(cells)}
    assert (cap["spec"].capacity, cap["spec"].not_judged, cap["spec"].first_failure) == (16, [64], None)
    assert "test higher levels" not in cap["spec"].note and "c=64 is not judged (capped" in cap["spec"].note
    assert cap["base"].capacity == 64 and "test higher levels" in cap["base"].note
    derived = Derived.model_validate({"baseline": "base", "speculative_arms": ["spec"], "speedups": [
        {"arm": "spec", "domain": "coding", "concurrency": c, "throughput_ratio": r, "ci_high": r + 0.05}
        for c, r in ((1, 1.5), (16, 1.2), (64, 0.5))]})
    (adv,) = advise(cells, derived, "base")
    assert [x.choice for x in adv.levels] == ["speculative", "speculative", "excluded"]
    assert adv.crossover_concurrency is None and "left out (no verdict may use them): c=64" in adv.note
    (none,) = advise([slo("spec", 64, True, capped), slo("base", 64, True)], derived, "base")
    assert none.no_advice and none.crossover_concurrency is None and none.note.startswith("no advice")


def test_results_slo_on_the_h200_run_names_the_cap_and_no_capacity_above_it() -> None:
    """Objectives every cell meets: before the rule NGRAM read 'capacity at least 64, test higher levels',
    from the c=64 cell that queued behind SGLang's implicit cap of 48."""
    res = run_cli("results", "slo", H200, "--slo", "tpot_ms.p90=100")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    table = out.split("Capacity per arm and domain")[1].split("\n\n")[0]
    caps = {tuple(line.split()[:2]): line for line in table.splitlines() if line.startswith("ngram ")}
    # c=4 stalled (4 requests in flight together took 5x the median) and c=64 queued: neither is judged
    assert caps[("ngram", "agentic")].split()[2] == "c=1" and caps[("ngram", "agentic")].endswith("c=4, c=64")
    assert caps[("ngram", "coding")].split()[2] == "c=4" and caps[("ngram", "coding")].endswith("c=16, c=64")
    notes = [line for line in out.splitlines() if line.strip().startswith("- ngram / ")]
    assert not any("at least 64" in n or "test higher levels" in n for n in notes), notes
    assert any(n.strip().startswith("- ngram / agentic: holds up to c=1; c=4 is not judged (stall") and
               "not judged: c=64 (capped)" in n for n in notes), notes
    assert "Methodology checks" in out and "concurrency-above-max-running-requests" in out
    assert "Cells no verdict uses" in out and "ngram agentic c=64: capped" in out
    doc = json.loads(run_cli("results", "slo", H200, "--slo", "tpot_ms.p90=100", "--json").stdout)
    (agentic,) = [c for c in doc["capacity"] if (c["arm"], c["domain"]) == ("ngram", "agentic")]
    assert (agentic["capacity"], agentic["not_judged"]) == (1, [4, 64])
    assert any("capped" in line for line in doc["excluded_cells"]) and doc["methodology"]


# -- the heatmap's box

def committed_archives() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "results").rglob("manifest.json")
                  if exists(p.parent / "summary.json"))  # summary.json.gz once compacted


def test_the_heatmap_box_is_derived_crossovers_on_every_committed_archive() -> None:
    import matplotlib.pyplot as plt

    from toolkit.results.plots import heatmap_figure, speedup_table

    checked = 0
    for path in committed_archives():
        a = open_archive(path)
        fig = heatmap_figure([("", a)])
        if fig is None:
            continue
        want = {(c.arm, c.domain, c.crossover_concurrency) for c in current(a).crossovers
                if c.crossover_concurrency is not None}
        drawn = set()
        panels = [(arm, table) for arm, table in sorted(speedup_table(a).items())]
        for ax, (arm, table) in zip(fig.axes, panels):
            domains, concs = sorted({d for d, _ in table}), sorted({c for _, c in table})
            for p in ax.patches:
                if p.get_gid() == "crossover":
                    x, y = p.get_x() + 0.5, p.get_y() + 0.5
                    drawn.add((arm, domains[round(y)], concs[round(x)]))
        plt.close(fig)
        assert drawn == want, path
        checked += 1
    assert checked >= 5
    # the committed H200 report boxed c=4 for ngram/agentic (its first ratio below 1); the rule says none
    assert ("ngram", "agentic", 4) not in {(c.arm, c.domain, c.crossover_concurrency)
                                          for c in current(open_archive(ROOT / H200)).crossovers}


# -- tune

def test_tune_verdicts_never_cite_drift_cells() -> None:
    from toolkit.tune.report import build_tune_report, result
    from toolkit.results.report import render_text

    res = result(json.loads((TUNE / "tune.json").read_text()), TUNE)
    conf = res.confirmation
    drift = [f"{c.domain} c={c.concurrency}" for c in conf.cells if c.drift]
    assert len(drift) == 3
    claims = conf.verdict.split("; no claim at ")[0]
    assert not any(d in claims for d in drift), conf.verdict
    assert all(f"{d} (DRIFT)" in conf.verdict for d in drift)
    assert not ("no threshold needed" in conf.advice and "never pays off" in conf.advice), conf.advice
    for x in conf.crossovers:  # no crossover rests on a DRIFT level
        assert x.crossover_concurrency not in [c.concurrency for c in conf.cells
                                               if c.drift and c.domain == x.domain]
    text = render_text(build_tune_report(res))
    assert "significantly faster than ngram as it was at coding c=4" not in text


@pytest.mark.parametrize("cells, expect", [
    ([("coding", 1, 1.5, 1.8, True), ("coding", 4, 0.5, 0.8, False)], "significantly slower at coding c=4; "
                                                                      "no claim at coding c=1 (DRIFT)"),
    ([("coding", 1, 1.5, 1.8, True)], "no claim: no held-out cell is one a verdict may use; no claim at coding c=1 "
                                      "(DRIFT)"),
])
def test_tune_verdict_text(cells, expect) -> None:
    from toolkit.schema.tune import ConfirmedCell
    from toolkit.tune.verdict import verdict

    cs = [ConfirmedCell(domain=d, concurrency=c, vs_incumbent={"ci_low": lo, "ci_high": hi}, drift=drift,
                        excluded=["baseline: drift (A/A)"] if drift else []) for d, c, lo, hi, drift in cells]
    assert verdict(cs, "t05", "ngram").endswith(expect)
