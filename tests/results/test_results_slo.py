"""`toolkit results slo` and objectives in show, diff and report: recomputed from the per-request
records of an archive that is only read (byte-identical afterwards), capacities that move the right way
as an objective tightens or loosens, and one number per cell in every command."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.synthetic import manifest_for, write_run

RUN = "results/sglang-h200/20261202T190515Z-52c8f2"  # committed: 4 arms x 2 domains x c = 1, 4, 16, 64


def tree_digest(run: Path) -> dict[str, str]:
    return {p.relative_to(run).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def slo_json(run: str, *slo: str) -> dict:
    res = run_cli("results", "slo", run, *[a for s in slo for a in ("--slo", s)], "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def capacities(doc: dict) -> dict[tuple[str, str], tuple[int, float]]:
    """(arm, domain) -> (capacity, first failure): no capacity is 0, no failure is infinity."""
    return {(c["arm"], c["domain"]): (c["capacity"] or 0, c["first_failure"] or float("inf")) for c in doc["capacity"]}


def test_capacity_moves_with_the_objective_and_the_archive_is_untouched() -> None:
    run = ROOT / RUN
    before = tree_digest(run)
    sums = (run / "SHA256SUMS").read_text()
    limits = [2, 5, 10, 20, 40]  # tpot_ms p90, tight to loose
    caps = [capacities(slo_json(RUN, f"tpot_ms.p90={ms}")) for ms in limits]
    for tight, loose in zip(caps, caps[1:]):  # loosening never lowers a capacity nor an earlier failure
        assert tight.keys() == loose.keys() and len(tight) == 8
        for key in tight:
            assert tight[key][0] <= loose[key][0] and tight[key][1] <= loose[key][1], (key, tight[key], loose[key])
    assert sum(c[0] for c in caps[0].values()) < sum(c[0] for c in caps[-1].values())  # and it does move
    assert caps[0][("eagle3", "agentic")] == (0, 1)  # p90 TPOT 6.4 ms already at c=1
    assert caps[-1][("baseline", "coding")] == (64, float("inf"))  # holds at every tested level
    # a per-request objective tightened: the share of requests within it can only fall
    ttft = [slo_json(RUN, f"ttft_ms.per_request={ms}") for ms in (50, 100, 400)]
    for tight, loose in zip(ttft, ttft[1:]):
        for ct, cl in zip(tight["cells"], loose["cells"]):
            assert ct["met"] <= cl["met"] and ct["goodput_tok_s"] <= cl["goodput_tok_s"] + 1e-9
        for key, (cap, fail) in capacities(tight).items():
            assert cap <= capacities(loose)[key][0] and fail <= capacities(loose)[key][1]
    assert tree_digest(run) == before and (run / "SHA256SUMS").read_text() == sums
    assert run_cli("results", "verify", RUN).returncode == 0


def test_text_output_names_capacity_and_both_advices() -> None:
    res = run_cli("results", "slo", RUN, "--slo", "tpot_ms.p90=10")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Objectives: tpot_ms p90 <= 10 ms; attainment >= 90% of the requests." in out
    assert "goodput tok/s" in out and "tpot_ms.p90 [95% CI]" in out
    cap = out.split("Capacity per arm and domain")[1]
    # ngram coding c=16 stalled (16 requests in flight together took 5x the median) and c=64 queued behind
    # SGLang's cap of 48: neither is judged, so the capacity stops at c=4 (docs/slo.md)
    assert "ngram             coding        c=4" in cap and "c=16 not judged" in cap and "c=16, c=64" in cap
    assert "eagle3            agentic       c=4" in cap and "c=16  tpot_ms.p90 13.27 > 10" in cap
    assert ("ngram / agentic: within the objectives speculation is the choice through c=16: no threshold needed "
            "up to the highest level a verdict may use; left out (no verdict may use them): c=4, c=64") in out
    assert "ngram / coding: by raw throughput: not significantly slower through concurrency 4" in out


@pytest.mark.parametrize("args, message, hint", [
    ([], "this run has no service-level objectives", "--slo tpot_ms.p90=30"),
    (["--slo", "tpot.p90=30"], "'tpot' is not a metric objectives can bound", "did you mean 'tpot_ms'?"),
    (["--slo", "itl_req_mean_ms.p90=30"], "not a metric", "write itl_ms"),
    (["--slo", "tpot_ms.P90=30"], "'P90' is not a bound", "did you mean 'p90'?"),
    (["--slo", "tpot_ms.p90=fast"], "'fast' is not a number", None),
    (["--slo", "tpot_ms.p90=-1"], "greater than 0", None),
    (["--slo", "tpot_ms.p90=30", "--attainment", "1.5"], "attainment", None),
    (["--slo", "tpot_ms=30"], "expected METRIC.BOUND=MS", None),
])
def test_bad_objectives_exit_2_with_a_hint(args: list[str], message: str, hint: str | None) -> None:
    res = run_cli("results", "slo", RUN, *args)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr
    if hint:
        assert hint in res.stderr, res.stderr


def synthetic_with_slo(tmp: Path, seed: int, slo: dict) -> Path:
    m = manifest_for({"baseline": ["python", "-m", "sglang.launch_server"],
                      "eagle3": ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"]})
    m["matrix"]["resolved"].update(baseline="baseline", slo=slo)
    return write_run(tmp, seed=seed, n=60, manifest=m, domains=("chat",), concurrency=(1, 8))


SLO = {"ttft_ms": {"per_request": 60.0}, "tpot_ms": {"p90": 5.0}, "attainment": 0.8}


def test_a_run_with_objectives_reads_one_number_in_show_diff_and_slo(tmp_path: Path) -> None:
    run = str(synthetic_with_slo(tmp_path, 1, SLO))
    text = run_cli("results", "show", run)
    assert text.returncode == 0, text.stderr
    assert "Service-level objectives" in text.stdout and "Capacity per arm and domain" in text.stdout
    show = json.loads(run_cli("results", "show", run, "--json").stdout)
    diff = json.loads(run_cli("results", "diff", run, run, "--json").stdout)
    slo = slo_json(run)  # no --slo: the run's own objectives
    assert diff["slo"] == SLO and slo["objectives"]["attainment"] == 0.8
    assert show["derived"]["slo"]["capacity"] == slo["capacity"]
    by = {(c["arm"], c["domain"], c["concurrency"]): c for c in slo["cells"]}
    for key, c in show["cells"].items():
        m, s = c["metrics"], by[(c["arm"], c["domain"], c["concurrency"])]
        assert m["goodput_tok_s"]["p50"] == s["goodput_tok_s"] and m["goodput_req_s"]["p50"] == s["goodput_req_s"]
        assert (m["slo_attainment"]["p50"], m["slo_attainment"]["ci_low"]) == (s["attainment"], s["attainment_low"])
        (d,) = [x for x in diff["cells"] if (x["arm"], x["domain"], x["concurrency"]) == (c["arm"], c["domain"],
                                                                                           c["concurrency"])]
        for name in ("goodput_tok_s", "goodput_req_s", "slo_attainment"):
            assert d["metrics"][name]["a"] == d["metrics"][name]["b"] == m[name]["p50"], (key, name)
        assert d["metrics"]["slo_attainment"]["verdict"] == "inconclusive"  # a run against itself, one launch


def test_diff_judges_both_runs_by_the_same_objectives(tmp_path: Path) -> None:
    a = str(synthetic_with_slo(tmp_path, 1, SLO))
    b = str(synthetic_with_slo(tmp_path, 2, {"ttft_ms": {"per_request": 30.0}}))
    res = run_cli("results", "diff", a, b, "-m", "goodput_tok_s", "-m", "slo_attainment")
    assert res.returncode == 0, res.stderr
    assert "both are judged by A's (ttft_ms <= 60 ms per request; tpot_ms p90 <= 5 ms" in res.stdout
    assert "slo_attainment: attainment, share, higher is better" in res.stdout
    given = json.loads(run_cli("results", "diff", a, b, "--slo", "e2e_ms.per_request=400", "--json").stdout)
    assert given["slo"] == {"e2e_ms": {"per_request": 400.0}, "attainment": 0.9}
    plain = run_cli("results", "diff", RUN, RUN, "-m", "goodput_tok_s")
    assert plain.returncode == 2 and "exist only under service-level objectives" in plain.stderr


def test_report_has_the_goodput_plot(tmp_path: Path) -> None:
    run = str(synthetic_with_slo(tmp_path, 3, SLO))
    res = run_cli("results", "report", run, "-o", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr
    png = tmp_path / "rep" / "plots" / "slo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "](plots/slo.png)" in md and "## Service-level objectives" in md
    assert "src='plots/slo.png'" in (tmp_path / "rep" / "report.html").read_text()
