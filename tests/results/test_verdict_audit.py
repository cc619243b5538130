"""Verdicts that survive an auditor (issue 42): no `reproduced` without an equivalence test, a margin fixed
before the data, one (log) scale for every margin check, a regression gate that tests "worse by more than
N %" one-sided, and a Holm family without derived duplicates. Fast and seeded; the rates over many replays
are benchmarks/verdict_sim.py's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.synthetic import write_run
from toolkit.bench.reproduce import compare_runs, reproduce_text
from toolkit.errors import ToolkitError
from toolkit.results.archive import open_archive
from toolkit.results.diff import CellDiff, DiffResult, MetricDiff, diff_runs, family, holm
from toolkit.results.equivalence import DEFAULT_MARGIN_PCT, judge
from toolkit.stats import beyond_margin
from toolkit.results.report.compare import metric_table
from toolkit.schema.metrics import METRICS

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


# -- 3. --fail-on-regression N: worse by more than N % with confidence

def _diff(*metrics: MetricDiff, correction: str = "holm") -> DiffResult:
    cell = CellDiff("baseline", "chat", 1, 32, metrics={m.metric: m for m in metrics})
    return DiffResult(a="a", b="b", metrics=[m.metric for m in metrics], cells=[cell], correction=correction,
                      only_a=[], only_b=[], geomean={}, env=[])


def _md(metric: str, delta_pct: float, se: float, verdict: str = "worse") -> MetricDiff:
    return MetricDiff(metric, 1.0, None, None, 3, 1.0, None, None, 3, delta_pct, 0.001, verdict, p_adj=0.001,
                      noise="runs", se=se, df=math.inf, launches_a=3, launches_b=3)


def test_the_gate_is_a_one_sided_test_beyond_the_margin() -> None:
    # +6 %, se 0.02: significant against 0 (z 2.9) and beyond 5 % as a point estimate, but not beyond 5 % with
    # confidence (z 0.5): no regression. +12 %, se 0.02: beyond 5 % with confidence (z 3.2).
    assert _diff(_md("ttft_ms", 6.0, 0.02)).regressions(5) == []
    (c, m, p), = _diff(_md("ttft_ms", 12.0, 0.02)).regressions(5)
    assert m.metric == "ttft_ms" and p == pytest.approx(0.0007, abs=3e-4)
    # higher is better: tok/s down 12 % is worse; up 12 % is not; a latency down 12 % is not
    assert len(_diff(_md("output_tok_s", -12.0, 0.02)).regressions(5)) == 1
    assert _diff(_md("output_tok_s", 12.0, 0.02, "better"), _md("e2e_ms", -12.0, 0.02, "better")).regressions(5) == []
    # the one-sided tests are Holm-adjusted over the family; --correction none does not
    many = [_md(name, 9.0, 0.02) for name in ("ttft_ms", "tpot_ms", "e2e_ms", "req_output_tok_s")]
    many[3].delta_pct = -9.0 / 1.09  # the same 9 % slower, as a rate
    assert _diff(*many).regressions(5) == [] and len(_diff(*many, correction="none").regressions(5)) == 4


def test_the_gate_refuses_a_negative_margin_and_runs_with_no_cell_in_common(tmp_path: Path, cli) -> None:
    with pytest.raises(ToolkitError, match="cannot be negative"):
        _diff(_md("ttft_ms", 12.0, 0.02)).regressions(-5)
    kw = {"n": 12, "concurrency": (1,)}
    a = write_run(tmp_path, seed=71, domains=("chat",), **kw)
    b = write_run(tmp_path, seed=72, domains=("math",), **kw)
    res = cli("results", "diff", str(a), str(b), "--fail-on-regression", "5")
    # refused before any test (results/commands.py: no cell in common); DiffResult.gate refuses the same on its own
    assert res.returncode == 2 and "have no cell in common: nothing to compare" in res.stderr \
        and "no significant regression" not in res.stderr
    res = cli("results", "diff", str(a), str(a), "--fail-on-regression", "-5")
    assert res.returncode == 2 and "-5 is out of range (allowed: a finite number >= 0)" in res.stderr  # the option parser


def test_the_gate_says_what_it_tested(tmp_path: Path, cli) -> None:
    kw = {**SMALL, "launches": 3, "launch_cv": 0.02}
    a, b = (write_run(tmp_path, seed=s, **kw) for s in (73, 74))
    res = cli("results", "diff", str(a), str(b), "--fail-on-regression", "5", "--json")
    assert res.returncode == 0, res.stderr
    size = json.loads(res.stdout)["family_size"]  # every test has a launch noise here: the gate's family is the diff's
    assert f"no regression worse than 5% with confidence (one-sided tests at 0.05, Holm-adjusted over {size})" \
        in res.stderr


# -- 4. the Holm family: one member per independent metric

def test_holm_places_a_duplicate_in_its_members_place() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # the second test repeats the first: a family of two, the repeat adjusted as if it were the first
    assert holm([0.01, 0.011, 0.04], [None, 0, None]) == pytest.approx([0.02, 0.022, 0.04])
    assert holm([0.04, 0.01, 0.011], [None, None, 1]) == pytest.approx([0.04, 0.02, 0.022])


def test_tracked_metrics_are_independent_members() -> None:
    tracked = {m.name: m.tracks for m in METRICS.values() if m.tracks}
    assert tracked["request_s"] == "output_tok_s" and tracked["itl_req_mean_ms"] == "tpot_ms"
    assert all(METRICS[t].tracks is None for t in tracked.values())  # no chains: a member stands for itself


def test_the_family_does_not_count_derived_duplicates(tmp_path: Path) -> None:
    kw = {**SMALL, "launches": 3, "launch_cv": 0.02}
    r = diff_runs(*(open_archive(write_run(tmp_path, seed=s, **kw)) for s in (75, 76)))
    tests = [(c, m) for c in r.cells for m in c.metrics.values() if m.p is not None]
    dup = [(c.label, m.metric) for (c, m), j in zip(tests, family(tests)) if j is not None]
    assert {x for _, x in dup} == {"request_s", "itl_req_mean_ms", "itl_ms", "accept_length"}
    assert r.family_size == len(tests) - len(dup) and r.to_dict()["family_size"] == r.family_size
    members = [m for (c, m), j in zip(tests, family(tests)) if j is None]
    assert [m.p_adj for m in members] == pytest.approx(holm([m.p for m in members]))


def test_a_ci_that_excludes_zero_beside_tilde_says_why() -> None:
    m = _md("ttft_ms", 4.0, 0.015, verdict="~")
    m.p, m.p_adj, m.low_pct, m.high_pct = 0.008, 1.0, 1.1, 7.0
    r = _diff(m)
    r.family_size = 44
    row = metric_table(r, "ttft_ms").rows[0]
    assert row[3] == "~" and "p=1.000" in row[4] and "unadjusted p=0.008, Holm-adjusted over 44 tests" in row[4]
    m.low_pct = -1.0  # a CI across zero: nothing to explain
    assert "unadjusted" not in metric_table(r, "ttft_ms").rows[0][4]


# -- a verdict names the metrics it could not test

def test_a_metric_left_out_of_every_cell_is_named_beside_the_verdict() -> None:
    """TTFT of answers that arrived bundled in every cell (a busy CI box once did it): the verdict is about the
    throughput it tested, and says that TTFT was not tested and why; a metric with one usable cell is not named."""
    from toolkit.results.equivalence import left_out

    ttft = _md("ttft_ms", 1.0, 0.01, verdict="~")
    ttft.excluded = ["B: bundled: 8 of 8 answers arrived at once"]
    tok = _md("output_tok_s", 1.0, 0.01, verdict="~")
    v = judge(_diff(tok, ttft), [], tolerance_pct=10)
    assert v.left_out == {"ttft_ms": "left out of every cell (B: bundled: 8 of 8 answers arrived at once)"}
    ttft.excluded = []  # control: usable in its one cell, so tested and not named
    assert left_out(_diff(tok, ttft)) == {}


def test_a_metric_a_flag_leaves_out_of_a_cell_never_makes_the_replay_differ() -> None:
    """TTFT of a cell whose answers arrived bundled in one run (the embedded engine on a busy box: TTFT the whole
    generation) moved by half against the other run, which streamed: no TTFT verdict uses the cell, so the replay
    does not `differ` for it (the diff's gate and geometric mean leave it out too; the throughput still decides).
    Seen with the real engine: `differs: 4 change(s)`, every one TTFT or TPOT of a bundled cell. With the launch
    noise known and by the default floor rule (one launch a side); the control, a usable TTFT, differs."""
    from toolkit.results.diff import DEFAULT_FLOOR

    for floor in (False, True):
        ttft, tok = _md("ttft_ms", -45.0, 0.02, verdict="better"), _md("output_tok_s", 1.0, 0.01, verdict="~")
        if floor:
            for m in (ttft, tok):
                m.noise, m.se, m.df = DEFAULT_FLOOR, None, None
        v = judge(_diff(tok, ttft), [], tolerance_pct=10)
        assert v.verdict == "differs" and [d["metric"] for d in v.differs] == ["ttft_ms"], (floor, v)  # control
        ttft.excluded = ["A: bundled (10 of 10 answers arrived at once, ...)"]
        v = judge(_diff(tok, ttft), [], tolerance_pct=10)
        assert v.verdict == "inconclusive" and v.differs == [], (floor, v)
        assert v.left_out == {"ttft_ms": "left out of every cell (A: bundled (10 of 10 answers arrived at once, ...))"}
