"""A speed-up is a ratio of rates of the same work: where an arm's answers are more than WORK_TOLERANCE longer
or shorter than the baseline's at a level, no verdict and no prediction uses the comparison (`unequal-work`,
toolkit/schema/eligibility.py). Found on the H100 (results/pair-surface-kept): synthetic-acceptance arms ran
every agentic answer to output_len (128 tokens) where the target stopped at ~41, and their speed-ups read
1.9-3.7x at c=16 and 64 where coding, whose answers run to output_len on both sides, read 0.7-1.4x."""

from __future__ import annotations

from toolkit.results import surface
from toolkit.results.verdicts import crossovers, mark
from toolkit.schema.eligibility import WORK_TOLERANCE, Eligibility, tokens_per_request
from toolkit.schema.manifest import Speedup
from toolkit.schema.records import CellSummary, Stat


def cell(arm: str, domain: str, tokens: float, *, conc: int = 16, synthetic: float | None = None,
         n: int = 200, launch: int = 0) -> CellSummary:
    req_s = 20.0
    return CellSummary(arm=arm, domain=domain, concurrency=conc, output_len=128, workload_hash="h", n_requests=n,
                       duration_s=20.0, launch=launch, synthetic_acceptance=synthetic,
                       metrics={"output_tok_s": Stat(mean=tokens * req_s, n=n), "request_s": Stat(mean=req_s, n=n)})


def row(arm: str, domain: str, ratio: float, *, synthetic: float | None = None, conc: int = 16) -> Speedup:
    return Speedup(arm=arm, baseline="base", domain=domain, concurrency=conc, throughput_ratio=ratio,
                   paired_ratio=ratio, ci_low=ratio * 0.9, ci_high=ratio * 1.1, n_pairs=100,
                   **({"synthetic_acceptance": synthetic} if synthetic is not None else {}))


def test_tokens_per_request_is_the_cells_throughput_over_its_request_rate() -> None:
    assert tokens_per_request(cell("a", "coding", 41.0)) == 41.0
    failed = cell("a", "coding", 41.0).model_copy(update={"status": "failed"})
    assert tokens_per_request(failed) is None
    assert tokens_per_request(cell("a", "coding", 41.0).model_copy(update={"metrics": {}})) is None


def test_the_flag_follows_the_tolerance_both_ways() -> None:
    within = 41.0 * (1 + WORK_TOLERANCE * 0.9)
    cells = [cell("base", "agentic", 41.0), cell("spec", "agentic", within), cell("short", "agentic", 30.0),
             cell("long", "agentic", 60.0)]
    e = Eligibility(cells)
    assert e.work_flag("spec", "base", "agentic", 16) is None
    for arm, want in (("short", "30"), ("long", "60")):
        f = e.work_flag(arm, "base", "agentic", 16)
        assert f is not None and f.code == "unequal-work" and f.excludes
        assert f"{arm} answered {want} output tokens a request, base 41" in f.why
        assert "synthetic" not in f.why
    assert e.work_flag("spec", "base", "coding", 16) is None  # nothing measured there: nothing to say


def test_launches_pool_by_requests() -> None:
    e = Eligibility([cell("a", "coding", 40.0, n=300, launch=0), cell("a", "coding", 80.0, n=100, launch=1)])
    assert e.work("a", "coding", 16) == 50.0


def test_a_synthetic_arm_that_ran_past_the_targets_end_is_left_out_of_verdicts_and_the_surface() -> None:
    cells = [cell("base", d, t) for d, t in (("agentic", 41.0), ("coding", 128.0))]
    rows = []
    for acc in (2.0, 3.0, 4.0):
        arm = f"spec-synacc{acc:g}"
        cells += [cell(arm, "agentic", 128.0, synthetic=acc), cell(arm, "coding", 128.0, synthetic=acc)]
        rows += [row(arm, "agentic", acc * 0.8, synthetic=acc), row(arm, "coding", acc * 0.4, synthetic=acc)]
    marked = mark(rows, Eligibility(cells))
    agentic = [r for r in marked if r.domain == "agentic"]
    assert all(r.excluded and "unequal-work" in r.excluded[0] and "synthetic acceptance" in r.excluded[0]
               for r in agentic)
    assert not any(r.excluded for r in marked if r.domain == "coding")
    built = surface.build(marked, None, cells=[(None, c, c.metrics) for c in []])
    assert {r["domain"]: r["excluded"] for r in built["rows"] if r["domain"] == "agentic"} == {"agentic": True}
    pred = surface.predict(built["rows"], {("spec", "agentic"): 2.9, ("spec", "coding"): 3.6})
    by = {p["domain"]: p for p in pred}
    assert "ratio" in by["coding"] and "unequal-work" in by["agentic"]["refused"]
    assert by["agentic"]["refused"].startswith("the agentic surface at this level is left out (spec-synacc")
    assert abs(by["coding"]["ratio"] - 3.6 * 0.4) < 1e-9


def test_a_real_arm_of_equal_work_keeps_its_verdicts() -> None:
    cells = [cell("base", "coding", 128.0, conc=c) for c in (1, 16)] + [
        cell("spec", "coding", 127.0, conc=c) for c in (1, 16)]
    marked = mark([row("spec", "coding", 1.4, conc=1), row("spec", "coding", 0.5, conc=16)], Eligibility(cells))
    assert not any(r.excluded for r in marked)
    assert crossovers(marked)[0].crossover_concurrency == 16


def test_the_check_compares_like_with_like() -> None:
    """A measured speed-up no verdict may use, or one whose baseline answered another length than the surface's,
    gets no verdict and no place in the summary's error (toolkit/results/surface.py check)."""
    rows = [row(f"spec-synacc{a:g}", d, a * 0.4, synthetic=a) for a in (2.0, 4.0) for d in ("coding", "math")]
    built = surface.build(rows, None)
    pred = surface.predict(built["rows"], {("spec", "coding"): 3.0, ("spec", "agentic"): 3.0})
    assert {p["domain"]: p["surface"] for p in pred} == {"agentic": "pooled", "coding": "coding"}
    assert next(p for p in pred if p["domain"] == "agentic")["domains"] == ["coding", "math"]
    measured = [row("spec", "coding", 1.2), row("spec", "agentic", 1.2)]
    long_answers = (lambda d, lvl: 128.0, lambda d, lvl: {"coding": 128.0, "agentic": 41.0}[d])
    got = {c["domain"]: c for c in surface.check(pred, measured, work=long_answers)}
    assert got["coding"]["verdict"] == "inconclusive" and "left_out" not in got["coding"]
    assert got["agentic"]["verdict"] == "left out"
    assert got["agentic"]["left_out"] == ("other work: the surface's baseline answered 128 output tokens a request, "
                                          "the measured run's 41")
    same = surface.check(pred, measured, work=(lambda d, lvl: 128.0, lambda d, lvl: 120.0))
    assert [c["verdict"] for c in same] == ["inconclusive", "inconclusive"]
    stalled = row("spec", "coding", 1.2).model_copy(update={"excluded": ["spec: stall (one request 5x)"]})
    left = surface.check(pred, [stalled])
    assert left[0]["verdict"] == "left out" and "stall" in left[0]["left_out"]
    summary = surface.check_summary(surface.check(pred, measured, work=long_answers))
    assert (summary["inconclusive"], summary["left out"]) == (1, 1) and abs(summary["median_abs_error_pct"]) < 1e-9
