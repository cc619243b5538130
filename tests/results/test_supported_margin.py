"""An inconclusive reproduction says the narrowest margin its data supports, on the committed H200 A/A pair
(baseline vs EAGLE-3, 3 launches a side, `results/sglang-h200-noise/`): inconclusive at the default ±10%,
and the margin it names is the first whole percent at which the same rules say `reproduced`, for the run
and for each arm alone."""

from __future__ import annotations

from tests.conftest import ROOT
from toolkit.bench.reproduce import compare_runs, judge_replay, reproduce_text
from toolkit.results.archive import open_archive
from toolkit.results.diff import diff_runs
from toolkit.results.equivalence import DEFAULT_MARGIN_PCT, judge, supported_margin

RESULTS = ROOT / "results"
REF, REPLAY = "20261204T145230Z-150555", "20261204T150236Z-4a3036"


def test_the_narrowest_supported_margin_is_where_the_verdict_turns() -> None:
    rep = judge_replay(REF, REPLAY, root=RESULTS)
    j = rep.judged
    assert j.verdict == "inconclusive" and j.tolerance_pct == DEFAULT_MARGIN_PCT
    s = j.supported_pct
    assert s is not None and DEFAULT_MARGIN_PCT < s < 30
    original, new = rep.original, rep.new
    assert compare_runs(original, new, tolerance=s).verdict == "reproduced"
    assert compare_runs(original, new, tolerance=s - 1).verdict == "inconclusive"
    for arm, v in rep.arms.items():  # each arm alone: its own narrowest margin
        diff = diff_runs(original, new, arms=[arm])
        assert v.supported_pct is not None and judge(diff, [], v.supported_pct).verdict == "reproduced"
        assert judge(diff, [], v.supported_pct - 1).verdict != "reproduced"
    assert rep.arms["eagle3"].supported_pct > rep.arms["baseline"].supported_pct  # the noisier arm needs more
    text = reproduce_text(rep)
    assert f"the narrowest margin it supports: ±{s:g}% (--tolerance {s:g}: reproduced)" in text
    assert rep.to_dict()["supported_pct"] == s


def test_missing_cells_support_no_margin() -> None:
    a, b = open_archive(RESULTS / "sglang-h200-noise" / REF), open_archive(RESULTS / "sglang-h200-noise" / REPLAY)
    diff = diff_runs(a, b)
    assert supported_margin(diff, [{"cell": "baseline coding c=1 out=48", "why": "not in the reproduction"}], 5) is None
