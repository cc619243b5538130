"""Did a run reproduce? The question `results reproduce` answers, from the diff of the original (A) and
the replay (B), with a margin X (`--tolerance`, default from the launch noise):

    reproduced within +-X %   for every metric, the change of its geometric mean over the cells lies within
                              +-X with confidence (two one-sided tests on the log-ratio, TOST; the per-metric
                              tests are an intersection-union test: no multiplicity penalty), no cell differs,
                              every cell was tested with a known launch noise and no cell's change is beyond X
                              (a cell's own CI may straddle X: with a few launches it usually does)
    differs                   some cell changed beyond +-X with confidence (one-sided test of |change| > X,
                              Holm-adjusted over the cells and metrics; or, with one launch a side and no
                              calibration, the default floor rule called it beyond X), or a cell went missing,
                              failed or stopped being comparable
    inconclusive              anything else: a CI straddles the margin, or cells could not be tested (one
                              launch per side and no calibration: the launch noise is unknown)

The statistics are toolkit/results/launches.py's; docs/results.md#reproduce shows the rules with numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from toolkit.results.diff import DEFAULT_FLOOR, DiffResult, holm
from toolkit.results.launches import ALPHA, DEFAULT_FLOOR_PCT, Comparison, beyond_p, floor_pct, tost_p

MIN_TOLERANCE_PCT = 5.0
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


def _comparison(d_pct: float, se: float, df: float) -> Comparison:
    d = math.log1p(d_pct / 100.0)
    return Comparison(d=d, se=se, df=df if df is not None else math.inf, ratio=math.exp(d), low=0.0, high=0.0, p=1.0,
                      n_a=0, n_b=0, source="")


def default_tolerance(diff: DiffResult) -> tuple[float, str]:
    """The noise floor of the comparison: what two single launches stay within (95%) at the typical launch CV
    the verdicts used (the median over the tested cells and metrics: one chaotic arm or a stalled launch does
    not set everyone's margin), rounded up to a whole percent and at least 5%; the default floor when no
    launch noise is known."""
    cvs = sorted(m.launch_cv for c in diff.cells for m in c.metrics.values() if m.launch_cv is not None)
    if not cvs:
        return float(DEFAULT_FLOOR_PCT), "the default floor (launch noise unknown)"
    mid = len(cvs) // 2
    cv = cvs[mid] if len(cvs) % 2 else (cvs[mid - 1] + cvs[mid]) / 2
    sources = sorted({m.noise for c in diff.cells for m in c.metrics.values() if m.launch_cv is not None})
    return (max(MIN_TOLERANCE_PCT, float(math.ceil(floor_pct(cv)))),
            f"the noise floor at the median launch CV {cv:.1%} ({', '.join(sources)})")


def judge(diff: DiffResult, structural: list[dict], tolerance_pct: float | None = None,
          alpha: float = ALPHA) -> Verdict:
    """The verdict of a reproduction. `structural`: rows of cells that went missing, failed or stopped being
    comparable (toolkit.bench.reproduce.moved_cells without the metric rows)."""
    if tolerance_pct is None:
        tol, source = default_tolerance(diff)
    else:
        tol, source = float(tolerance_pct), "--tolerance"
    v = Verdict("inconclusive", tol, source, structural=len(structural))
    tested, floor_cells, wide = [], [], []
    for c in diff.cells:
        for m in c.metrics.values():
            if m.se is not None and m.delta_pct is not None:
                tested.append((c, m, beyond_p(_comparison(m.delta_pct, m.se, m.df), tol)))
            elif m.noise == DEFAULT_FLOOR:
                floor_cells.append((c, m))
            elif c.comparable and m.verdict in ("too-few", "no-samples"):
                v.reasons.append(f"{c.label} {m.metric}: not tested ({m.note or m.verdict})")
    for (c, m, _), pa in zip(tested, holm([p for _, _, p in tested])):
        row = {"cell": c.label, "metric": m.metric, "delta_pct": m.delta_pct, "low_pct": m.low_pct,
               "high_pct": m.high_pct, "p": pa}
        if pa < alpha:
            v.differs.append(row)
        elif abs(m.delta_pct) > tol:
            wide.append(row)
    for c, m in floor_cells:
        if m.significant and m.delta_pct is not None and abs(m.delta_pct) > tol:
            v.differs.append({"cell": c.label, "metric": m.metric, "delta_pct": m.delta_pct, "low_pct": None,
                              "high_pct": None, "p": m.p_adj})
    if v.differs or structural:
        v.verdict = "differs"
        return v
    if floor_cells:
        v.reasons.insert(0, f"one launch per side, launch noise unknown ({len(floor_cells)} metric-cell(s) compared "
                            "without it: `launches: 3`, or a calibration by `toolkit bench noise`, makes them testable)")
    for name, g in diff.geomean.items():
        if "se" not in g:
            continue
        p = tost_p(_comparison(g["launch_delta_pct"], g["se"], g.get("df")), tol)
        v.metrics[name] = {"delta_pct": g["launch_delta_pct"], "low_pct": g["low_pct"], "high_pct": g["high_pct"],
                           "cells": g["cells"], "tost_p": p, "within": p < alpha}
        if p >= alpha:
            v.reasons.append(f"{name}: the geometric mean's change {g['launch_delta_pct']:+.1f}% "
                             f"[{g['low_pct']:+.1f}%, {g['high_pct']:+.1f}%] is not shown within ±{tol:g}% "
                             f"(TOST p={p:.3g})")
    for row in wide:
        v.reasons.append(f"{row['cell']} {row['metric']}: moved {row['delta_pct']:+.1f}% [{row['low_pct']:+.1f}%, "
                         f"{row['high_pct']:+.1f}%], beyond ±{tol:g}% but not with confidence")
    if not tested and not floor_cells:
        v.reasons.append("no metric of any cell could be compared")
    if not v.reasons:
        v.verdict = "reproduced"
    return v


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


__all__ = ["EXIT", "Verdict", "default_tolerance", "judge", "supported_margin"]
