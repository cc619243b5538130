"""Did a run reproduce? The question `results reproduce` answers, from the diff of the original (A) and
the replay (B), with a margin X fixed before the data (`--tolerance`, else DEFAULT_MARGIN_PCT; never derived
from the runs being judged). "Within ±X" is on the log scale, as every test: a ratio B/A between 1 / (1 + X)
and 1 + X (±10 %: -9.1 % to +10 %).

    reproduced within +-X %   for every metric, the change of its geometric mean over the cells lies within
                              +-X with confidence (two one-sided tests on the log-ratio, TOST; the per-metric
                              tests are an intersection-union test: no multiplicity penalty), every arm's
                              geometric mean was tested, no cell differs, every cell was tested with a known
                              launch noise and no cell's change is beyond X (a cell's own CI may straddle X:
                              with a few launches it usually does)
    differs                   some cell changed beyond +-X with confidence (one-sided test of |change| > X,
                              Holm-adjusted over the cells and metrics; or, with one launch a side and no
                              calibration, the default floor rule called it beyond X), or a cell went missing,
                              failed or stopped being comparable
    inconclusive              anything else: a CI straddles the margin, cells could not be tested (one launch
                              per side and no calibration: the launch noise is unknown), or an equivalence test
                              could not run (an arm a calibration lacks: "no equivalence test for arm X: ...")

The statistics are toolkit/stats/'s (compare.py: tost_p, beyond_p; multiple.py: holm); docs/results.md#reproduce shows the rules with numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from toolkit.results.diff import DEFAULT_FLOOR, TOO_FEW_LAUNCHES, DiffResult, family
from toolkit.stats import ALPHA, beyond_margin, beyond_p, from_delta, holm, tost_p

# The margin of `reproduced within ±X %` when none is given (--tolerance): declared before any data. 10 %: a
# replay that moved a metric by more than a tenth did not reproduce it, whatever the noise; a noisier replay
# cannot show equivalence within it and stays `inconclusive` (with the narrowest margin its data support).
DEFAULT_MARGIN_PCT = 10.0
EXIT = {"reproduced": 0, "differs": 1, "inconclusive": 3}


@dataclass
class Verdict:
    verdict: str  # reproduced | differs | inconclusive
    tolerance_pct: float
    tolerance_source: str
    differs: list[dict] = field(default_factory=list)  # {cell, metric, delta_pct, low_pct, high_pct, p}
    reasons: list[str] = field(default_factory=list)  # why not reproduced (inconclusive)
    metrics: dict[str, dict] = field(default_factory=dict)  # metric -> its geomean change, CI and TOST p
    structural: int = 0  # cells missing, failed or not comparable
    supported_pct: float | None = None  # inconclusive: the narrowest margin at which it would be `reproduced`
    left_out: dict[str, str] = field(default_factory=dict)  # metric -> why no cell could test it (said, not hidden)

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    @property
    def headline(self) -> str:
        if self.verdict == "reproduced":
            return f"reproduced within ±{self.tolerance_pct:g}%"
        if self.verdict == "differs":
            parts = ([f"{len(self.differs)} change(s) beyond ±{self.tolerance_pct:g}% with confidence"]
                     if self.differs else []) + \
                ([f"{self.structural} cell(s) missing, failed or not comparable"] if self.structural else [])
            return "differs: " + "; ".join(parts)
        return "inconclusive: " + (self.reasons[0] if self.reasons else "nothing could be tested")


def default_margin() -> tuple[float, str]:
    """The margin when none is given: DEFAULT_MARGIN_PCT, fixed before the data (never from the judged runs'
    own spread: noisier runs would make their own `reproduced` easier)."""
    return DEFAULT_MARGIN_PCT, (f"the default margin, fixed before the data ({DEFAULT_MARGIN_PCT:g}%, "
                                "toolkit.results.equivalence.DEFAULT_MARGIN_PCT; --tolerance sets another)")


def judge(diff: DiffResult, structural: list[dict], tolerance_pct: float | None = None,
          alpha: float = ALPHA, source: str = "--tolerance") -> Verdict:
    """The verdict of a reproduction. `structural`: rows of cells that went missing, failed or stopped being
    comparable (toolkit.bench.reproduce.moved_cells without the metric rows). `source`: where a given
    tolerance came from (printed with the verdict)."""
    tol, source = default_margin() if tolerance_pct is None else (float(tolerance_pct), source)
    v = Verdict("inconclusive", tol, source, structural=len(structural))
    tested, floor_cells = _cells(diff, v)
    wide = _beyond(tested, tol, alpha, v)
    for c, m in floor_cells:
        if m.significant and m.delta_pct is not None and beyond_margin(m.delta_pct, tol):
            v.differs.append({"cell": c.label, "metric": m.metric, "delta_pct": m.delta_pct, "low_pct": None,
                              "high_pct": None, "p": m.p_adj})
    if v.differs or structural:
        v.verdict = "differs"
        return v
    if floor_cells:
        v.reasons.insert(0, f"one launch per side, launch noise unknown ({len(floor_cells)} metric-cell(s) compared "
                            "without it: `launches: 3`, or a calibration by `toolkit bench noise`, makes them testable)")
    _equivalence(diff, {m.metric for _, m in tested}, tol, alpha, v)
    v.left_out = left_out(diff)
    for row in wide:
        v.reasons.append(f"{row['cell']} {row['metric']}: moved {row['delta_pct']:+.1f}% [{row['low_pct']:+.1f}%, "
                         f"{row['high_pct']:+.1f}%], beyond ±{tol:g}% but not with confidence")
    if not tested and not floor_cells:
        v.reasons.append("no metric of any cell could be compared")
    elif not v.metrics and not v.reasons:
        v.reasons.append("no equivalence test ran")  # never `reproduced` without one
    if not v.reasons:
        v.verdict = "reproduced"
    return v


def left_out(diff: DiffResult) -> dict[str, str]:  # data-keyed: metric
    """Metrics compared in some cell but left out of every one (e.g. TTFT where every cell's answers arrived
    bundled): a verdict is about the metrics it tested, so those it could not are named beside it."""
    out = {}
    for name in diff.metrics:
        ms = [c.metrics[name] for c in diff.cells if name in c.metrics]
        if ms and all(m.excluded for m in ms):
            out[name] = f"left out of every cell ({ms[0].excluded[0]})"
    return out


def _cells(diff: DiffResult, v: Verdict) -> tuple[list, list]:
    """The metric-cells tested with a known launch noise, and those compared by the default floor rule; the
    rest that could not be tested are reasons. A metric-cell a flag leaves out (MetricDiff.excluded: `bundled`
    TTFT/ITL/TPOT, toolkit/schema/eligibility.py) is none of them: no verdict on that metric uses the cell, as
    the geometric mean and the diff's gate leave it out (a metric left out of every cell is named: left_out)."""
    tested, floor_cells, few = [], [], 0
    for c in diff.cells:
        for m in c.metrics.values():
            if m.excluded:
                continue
            if m.se is not None and m.delta_pct is not None and not m.claims:
                few += 1
            elif m.se is not None and m.delta_pct is not None:
                tested.append((c, m))
            elif m.noise == DEFAULT_FLOOR:
                floor_cells.append((c, m))
            elif c.comparable and m.verdict in ("too-few", "no-samples"):
                v.reasons.append(f"{c.label} {m.metric}: not tested ({m.note or m.verdict})")
    if few:
        v.reasons.append(f"{few} metric-cell(s) with {TOO_FEW_LAUNCHES}")
    return tested, floor_cells


def _beyond(tested: list, tol: float, alpha: float, v: Verdict) -> list[dict]:
    """Cells whose change is beyond the margin with confidence (Holm over the family) go to v.differs; those
    beyond it without confidence (on the same log scale) are returned."""
    ps = [beyond_p(from_delta(m.delta_pct, m.se, m.df), tol) for _, m in tested]
    wide = []
    for (c, m), pa in zip(tested, holm(ps, family(tested))):
        row = {"cell": c.label, "metric": m.metric, "delta_pct": m.delta_pct, "low_pct": m.low_pct,
               "high_pct": m.high_pct, "p": pa}
        if pa < alpha:
            v.differs.append(row)
        elif beyond_margin(m.delta_pct, tol):
            wide.append(row)
    return wide


def _equivalence(diff: DiffResult, names: set[str], tol: float, alpha: float, v: Verdict) -> None:
    """Per metric the TOST of its geometric mean over the cells (log scale); every metric a cell was tested
    on must have one: a metric whose geometric mean could not be tested (an arm without launch noise at the
    arm level, e.g. one a calibration lacks) is a reason, naming the arm."""
    untested: dict[tuple[str, str], list[str]] = {}
    for name in sorted(names | {n for n, g in diff.geomean.items() if "se" in g}, key=diff.metrics.index):
        g = diff.geomean.get(name, {})
        if "se" not in g:
            for arm, why in (g.get("untested") or {"": "no geometric mean over the cells"}).items():
                untested.setdefault((arm, why), []).append(name)
            continue
        p = tost_p(from_delta(g["launch_delta_pct"], g["se"], g.get("df")), tol)
        v.metrics[name] = {"delta_pct": g["launch_delta_pct"], "low_pct": g["low_pct"], "high_pct": g["high_pct"],
                           "cells": g["cells"], "tost_p": p, "within": p < alpha}
        if p >= alpha:
            v.reasons.append(f"{name}: the geometric mean's change {g['launch_delta_pct']:+.1f}% "
                             f"[{g['low_pct']:+.1f}%, {g['high_pct']:+.1f}%] is not shown within ±{tol:g}% "
                             f"(TOST p={p:.3g})")
    for (arm, why), metrics in untested.items():
        v.reasons.append(f"no equivalence test for {f'arm {arm}' if arm else 'any arm'}: {why} ({', '.join(metrics)})")


def supported_margin(diff: DiffResult, structural: list[dict], start: float, limit: int = 100) -> float | None:
    """The narrowest whole-percent margin, from `start` up to `limit`, at which the comparison is `reproduced`:
    what the data can show (equivalence reporting: the margin the confidence intervals fit inside), for an
    inconclusive verdict whose default margin was too tight. None when no margin up to `limit` does (cells
    that went missing or could not be tested stay inconclusive at any margin). A wider margin only makes the
    verdict easier (TOST passes sooner, "beyond X" calls fewer), so the first one found is the narrowest."""
    if structural:
        return None
    for x in range(max(1, math.ceil(start)), limit + 1):
        if judge(diff, structural, float(x)).verdict == "reproduced":
            return float(x)
    return None


__all__ = ["DEFAULT_MARGIN_PCT", "EXIT", "Verdict", "default_margin", "judge", "supported_margin"]
