"""Verdicts that survive an auditor (issue 42): no `reproduced` without an equivalence test, a margin fixed
before the data, one (log) scale for every margin check. Fast and seeded."""

from __future__ import annotations

from pathlib import Path

from tests.synthetic import write_run
from toolkit.bench.reproduce import compare_runs, reproduce_text
from toolkit.results.archive import open_archive
from toolkit.results.diff import diff_runs
from toolkit.results.equivalence import DEFAULT_MARGIN_PCT, judge
from toolkit.results.launches import beyond_margin

SMALL = {"n": 60, "concurrency": (1,)}
SPEC = {"eagle3": ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"]}


# -- 1. no `reproduced` without a test

def test_a_calibration_without_an_arm_gives_no_equivalence_test_and_no_reproduced(tmp_path: Path) -> None:
    """Single-launch runs, a calibration of the eagle3 arm only: the baseline's cells borrow its noise, but its
    geometric mean has none, so no equivalence test ran for it: inconclusive (exit 3) at any margin, named."""
    kw = {**SMALL, "launch_cv": 0.03, "env_hash": "e" * 64}
    write_run(tmp_path, seed=60, launches=3, purpose="noise-calibration", arms=SPEC, **kw)
    a, b = (open_archive(write_run(tmp_path, seed=s, **kw)) for s in (61, 62))
    for tol in (None, 30.0):
        rep = compare_runs(a, b, tolerance=tol)
        assert rep.verdict == "inconclusive" and rep.exit_code == 3, rep.judged.reasons
        assert rep.judged.reasons[0].startswith("no equivalence test for arm baseline: calibration ")
        assert "has no arm baseline" in rep.judged.reasons[0] and "ttft_ms" in rep.judged.reasons[0]
    assert "inconclusive: no equivalence test for arm baseline" in reproduce_text(rep)


def test_judge_never_says_reproduced_with_zero_tests(tmp_path: Path) -> None:
    kw = {**SMALL, "launches": 3, "launch_cv": 0.02}
    diff = diff_runs(*(open_archive(write_run(tmp_path, seed=s, **kw)) for s in (63, 64)))
    assert judge(diff, [], 50.0).verdict == "reproduced"
    for g in diff.geomean.values():  # every geometric mean untested: no equivalence test ran
        g.pop("se")
    v = judge(diff, [], 50.0)
    assert v.verdict == "inconclusive" and v.exit_code == 3 and not v.metrics
    assert any(r.startswith("no equivalence test for any arm") for r in v.reasons)


# -- 2. margins fixed before the data, one scale

def test_the_default_margin_does_not_grow_with_the_noise_of_the_judged_runs(tmp_path: Path) -> None:
    """The margin is DEFAULT_MARGIN_PCT whatever the runs' launch CV (the old default, the noise floor at their
    median launch CV, was about ±60 % at 20 % CV: a +15 % change everywhere was `reproduced`)."""
    kw = {**SMALL, "launches": 3}
    quiet = compare_runs(*(open_archive(write_run(tmp_path, seed=s, launch_cv=0.02, **kw)) for s in (65, 66)))
    orig = open_archive(write_run(tmp_path, seed=67, launch_cv=0.2, **kw))
    moved = compare_runs(orig, open_archive(write_run(tmp_path, seed=68, launch_cv=0.2,
                                                      slowdown={"baseline": 1.15, "eagle3": 1.15}, **kw)))
    for rep in (quiet, moved):
        assert rep.judged.tolerance_pct == DEFAULT_MARGIN_PCT
        assert rep.judged.tolerance_source.startswith("the default margin, fixed before the data")
    assert quiet.verdict == "reproduced"
    assert moved.verdict != "reproduced"
    assert moved.judged.supported_pct is None or moved.judged.supported_pct > 15
    text = reproduce_text(moved)
    assert f"tolerance ±{DEFAULT_MARGIN_PCT:g}% from the default margin, fixed before the data" in text
    assert "a ratio B/A within 0.909..1.100" in text


def test_moved_beyond_is_checked_on_the_log_scale_like_the_tests() -> None:
    # -21 % is a ratio of 1/1.27: beyond ±21 % on the log scale, where TOST and the beyond-test live
    assert beyond_margin(-21.0, 21.0) and not beyond_margin(21.0, 21.0) and not beyond_margin(-17.0, 21.0)
    assert beyond_margin(-100.0, 50.0) and beyond_margin(10.5, 10.0) and not beyond_margin(-9.0, 10.0)


def test_a_cell_moved_beyond_the_margin_on_the_log_scale_is_a_reason(tmp_path: Path) -> None:
    kw = {**SMALL, "launches": 3, "launch_cv": 0.02}
    diff = diff_runs(*(open_archive(write_run(tmp_path, seed=s, **kw)) for s in (69, 70)))
    m = diff.cells[0].metrics["ttft_ms"]
    m.delta_pct, m.low_pct, m.high_pct, m.se = -20.0, -60.0, +90.0, 1.0  # -20 %: 1/1.25, not with confidence
    v = judge(diff, [], 21.0)
    assert v.verdict == "inconclusive"
    assert any("ttft_ms: moved -20.0%" in r and "beyond ±21% but not with confidence" in r for r in v.reasons)
