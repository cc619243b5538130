"""Derived results: paired speedups, sustained/significant crossovers, methodology checks."""

from __future__ import annotations

import numpy as np

from toolkit.bench import derive
from toolkit.schema.manifest import ArmState, Check
from toolkit.schema.records import CellSummary, RequestRecord, Stat
from toolkit.schema.slo import CellSlo
from toolkit.specs.matrix import Matrix


def recs(arm: str, conc: int, rate: float, n: int = 40, seed: int = 0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        tokens = 64
        e2e = tokens / rate * 1000 * float(rng.uniform(0.95, 1.05))
        out.append(RequestRecord(arm=arm, domain="coding", concurrency=conc, prompt_id=f"p{i}", send_s=0.0,
                                 ttft_ms=10, e2e_ms=e2e, output_tokens=tokens))
    return out


def cell(arm: str, conc: int, tput: float) -> CellSummary:
    return CellSummary(arm=arm, domain="coding", concurrency=conc, output_len=64, workload_hash="h",
                       metrics={"output_tok_s": Stat(mean=tput, p50=tput, n=40)})


def test_paired_ratio_recovers_a_known_speedup() -> None:
    pr = derive.paired_ratio(recs("spec", 1, 150, seed=1), recs("base", 1, 100, seed=2))
    assert 1.45 < pr.ratio < 1.55 and pr.ci_low < pr.ratio < pr.ci_high and pr.n_pairs == 40


def test_crossover_is_the_start_of_a_sustained_significant_slowdown() -> None:
    rates = {1: (150, 100), 4: (90, 100), 16: (110, 100), 32: (70, 100), 64: (60, 100)}
    cells, records = [], {}
    for c, (s, b) in rates.items():
        cells += [cell("spec", c, s), cell("base", c, b)]
        records[("spec", "coding", c)] = recs("spec", c, s, seed=c)
        records[("base", "coding", c)] = recs("base", c, b, seed=c + 100)
    rows = derive.speedups(cells, records, "base")
    cross = derive.crossovers(rows, {"spec"})
    # the dip at 4 recovers at 16, so the crossover is 32, not 4
    assert cross[0].crossover_concurrency == 32
    assert "4" in cross[0].note
    assert derive.recommended_threshold(cross, "spec") == 32


def test_no_crossover_when_never_slower() -> None:
    cells = [cell("spec", 1, 150), cell("base", 1, 100)]
    records = {("spec", "coding", 1): recs("spec", 1, 150), ("base", "coding", 1): recs("base", 1, 100)}
    cross = derive.crossovers(derive.speedups(cells, records, "base"), {"spec"})
    assert cross[0].crossover_concurrency is None and "no threshold" in cross[0].note


def test_methodology_checks() -> None:
    m = Matrix(kind="Matrix", name="m", environment="e.yaml", arms=["base", "spec"], workloads=["coding"],
               concurrency=[1, 64], requests=10, warmup=0)
    cells = [cell("base", 1, 100), cell("spec", 1, 120)]
    cells[0].metrics["e2e_ms"] = Stat(p50=1, p99=2, n=10, unreliable=["p99"])
    records = {("base", "coding", 1): recs("base", 1, 100, n=3), ("spec", "coding", 1): recs("spec", 1, 120, n=2)}
    checks = derive.methodology_checks(
        matrix=m, cells=cells, records=records,
        arm_info={"spec": ArmState(max_running_requests=48, max_running_requests_implicit=True),
                  "base": ArmState(max_running_requests=128)},
        flushed={"spec": False},
        representativeness=[{"workload": "encyclopedic", "verdict": "far", "divergence": 0.9, "reason": "r"}])
    by = {c.check: c for c in checks}
    assert by["concurrency-above-max-running-requests"].severity == "error"
    assert "48" in by["concurrency-above-max-running-requests"].message
    assert {"no-warmup", "percentile-from-few-samples", "arms-saw-different-prompts",
            "acceptance-counters-not-reset", "workload-far-from-training-data"} <= set(by)



def _timed_recs(arm: str, order: list[str], launch: int = 0) -> list[RequestRecord]:
    return [RequestRecord(arm=arm, domain="coding", concurrency=1, prompt_id=p, send_s=0.1 * i, launch=launch,
                          ttft_ms=10, e2e_ms=90, output_tokens=64) for i, p in enumerate(order)]


def _prompt_check(matrix: Matrix, base: list[RequestRecord], spec: list[RequestRecord]) -> list[Check]:
    checks = derive.methodology_checks(matrix=matrix, cells=[cell("base", 1, 100), cell("spec", 1, 120)],
                                       records={("base", "coding", 1): base, ("spec", "coding", 1): spec},
                                       arm_info={})
    return [c for c in checks if c.check == "arms-saw-different-prompts"]


def test_time_sized_cells_pair_on_the_requests_both_arms_sent() -> None:
    """With `duration_s` a faster arm sends more of the same sequence: not a broken pairing (the GPU run
    pair-seed/20261206T211431Z-9daae2 was flagged in every cell before this); a different order still is, and
    so is a different count when cells are sized by requests."""
    timed = Matrix(kind="Matrix", name="m", environment="e.yaml", arms=["base", "spec"], workloads=["coding"],
                   concurrency=[1], duration_s=3, warmup=1)
    seq = [f"p{i}" for i in range(30)]
    base = _timed_recs("base", seq[:18]) + _timed_recs("base", seq[:19], launch=1)
    spec = _timed_recs("spec", seq[:24]) + _timed_recs("spec", seq[:17], launch=1)
    assert _prompt_check(timed, base, spec) == []
    other = seq[:5] + ["q5"] + seq[6:18]
    assert _prompt_check(timed, _timed_recs("base", other), _timed_recs("spec", seq[:24]))
    counted = Matrix(kind="Matrix", name="m", environment="e.yaml", arms=["base", "spec"], workloads=["coding"],
                     concurrency=[1], requests=24, warmup=1)
    assert _prompt_check(counted, _timed_recs("base", seq[:18]), _timed_recs("spec", seq[:24]))


# -- within service-level objectives (toolkit/results/slo.py): capacity and the advice

def slo_cell(arm: str, conc: int, holds: bool, goodput: float = 100.0) -> CellSlo:
    return CellSlo(arm=arm, domain="coding", concurrency=conc, output_len=64, holds=holds, goodput_tok_s=goodput,
                   why="" if holds else "tpot_ms.p90 31 > 30")


def test_capacity_is_the_last_level_before_the_first_failure() -> None:
    from toolkit.results.slo import capacities

    cells = [slo_cell("a", c, h) for c, h in ((1, True), (4, True), (16, False), (64, True))]
    cells += [slo_cell("b", c, False) for c in (1, 4)] + [slo_cell("c", c, True) for c in (1, 4)]
    cap = {x.arm: x for x in capacities(cells)}
    assert (cap["a"].capacity, cap["a"].first_failure, cap["a"].holds_again) == (4, 16, [64])
    assert "tpot_ms.p90 31 > 30" in cap["a"].note and "holds again at c=64" in cap["a"].note
    assert (cap["b"].capacity, cap["b"].first_failure) == (None, 1) and "lowest tested" in cap["b"].note
    assert (cap["c"].capacity, cap["c"].first_failure) == (4, None) and "at least 4" in cap["c"].note


def _advice(arm_holds: dict, base_holds: dict, ratios: dict):
    """The advice for one speculative arm, `ratios`: concurrency -> (throughput ratio, paired CI high)."""
    from toolkit.results.slo import advise
    from toolkit.schema.manifest import Derived

    cells = [slo_cell("spec", c, h) for c, h in arm_holds.items()]
    cells += [slo_cell("base", c, h) for c, h in base_holds.items()]
    derived = Derived.model_validate({
        "baseline": "base", "speculative_arms": ["spec"],
        "speedups": [{"arm": "spec", "domain": "coding", "concurrency": c, "throughput_ratio": r, "ci_high": hi}
                     for c, (r, hi) in ratios.items()]})
    (adv,) = advise(cells, derived, "base")
    return adv


def test_within_the_objectives_speculation_can_be_the_only_arm_on_target() -> None:
    """Speculation significantly slower at 16 and 32 (raw crossover 16), yet at 32 it is the only arm that
    keeps its objectives: within them no threshold may switch it off there."""
    ratios = {1: (1.5, 1.7), 4: (1.2, 1.3), 16: (0.8, 0.9), 32: (0.7, 0.8)}
    adv = _advice({1: True, 4: True, 16: True, 32: True}, {1: True, 4: True, 16: True, 32: False}, ratios)
    assert [x.choice for x in adv.levels] == ["speculative", "speculative", "baseline", "speculative"]
    assert adv.crossover_concurrency is None and "only spec meets them at c=32" in adv.note
    assert "a threshold cannot switch speculation back on" in adv.note


def test_within_the_objectives_the_baseline_takes_over_where_speculation_misses_them() -> None:
    """Not significantly slower anywhere (no raw crossover), but speculation misses the objectives from 16."""
    ratios = {1: (1.5, 1.7), 4: (1.1, 1.3), 16: (0.98, 1.05), 32: (0.97, 1.02)}
    adv = _advice({1: True, 4: True, 16: False, 32: False}, {1: True, 4: True, 16: True, 32: False}, ratios)
    assert [x.choice for x in adv.levels] == ["speculative", "speculative", "baseline", "neither"]
    assert adv.crossover_concurrency == 16 and "set speculative-disable-batch-threshold: 16" in adv.note
    from toolkit.results.slo import threshold

    assert threshold([adv], "spec") == 16


def test_within_the_objectives_never_pays_off_and_no_arm_on_target() -> None:
    slower = {1: (0.5, 0.6), 4: (0.5, 0.6)}
    never = _advice({1: True, 4: False}, {1: True, 4: True}, slower)
    assert never.never_pays_off and never.crossover_concurrency == 1 and "serve the baseline" in never.note
    from toolkit.results.slo import never_pays_off, threshold

    assert never_pays_off([never], "spec") and threshold([never], "spec") is None
    none = _advice({1: False, 4: False}, {1: False, 4: False}, slower)
    assert [x.choice for x in none.levels] == ["neither", "neither"] and "neither arm meets" in none.note
