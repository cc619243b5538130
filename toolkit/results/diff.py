"""Compare two runs cell by cell, benchstat style, with the environment diff beside it.

Cells match on (arm, domain, concurrency, output_len); repeats are pooled. For each metric the A and
B medians (95% CI), the change in percent, and a Mann-Whitney U p-value over the per-request samples.
A change is called only when p < ALPHA and both sides have MIN_SAMPLES requests; otherwise `~`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from toolkit.schema.records import METRICS
from toolkit.errors import ToolkitError
from toolkit.results.archive import Archive
from toolkit.results.envdiff import env_diff
from toolkit.results.stats import ALPHA, MIN_SAMPLES, Centre, clean, delta_pct, geomean, mann_whitney, median_ci

HIGHER_IS_BETTER = {"output_tok_s", "request_s", "accept_length"}
SAMPLED = {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tok_s", "accept_length"}  # per-request columns
IGNORED_SAMPLING = {"warmup"}  # how many warmup requests ran does not change what a request is


@dataclass
class MetricDiff:
    metric: str
    a: float | None
    a_low: float | None
    a_high: float | None
    a_n: int
    b: float | None
    b_low: float | None
    b_high: float | None
    b_n: int
    delta_pct: float | None
    p: float | None
    verdict: str  # better | worse | ~ | too-few | no-samples | no-data
    note: str = ""
    p_adj: float | None = None  # Holm-adjusted over every test of the diff (the one the verdict uses)

    @property
    def significant(self) -> bool:
        return self.verdict in ("better", "worse")


@dataclass
class CellDiff:
    arm: str
    domain: str
    concurrency: int
    output_len: int
    comparable: bool = True
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    metrics: dict[str, MetricDiff] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.arm} {self.domain} c={self.concurrency} out={self.output_len}"


@dataclass
class DiffResult:
    a: str
    b: str
    metrics: list[str]
    cells: list[CellDiff]
    correction: str
    only_a: list[str]
    only_b: list[str]
    geomean: dict[str, dict]
    env: list[dict]
    alpha: float = ALPHA
    min_samples: int = MIN_SAMPLES

    def regressions(self, pct: float) -> list[tuple[CellDiff, MetricDiff]]:
        """Significant changes in the worse direction by more than pct percent."""
        out = []
        for c in self.cells:
            for m in c.metrics.values():
                if m.verdict == "worse" and m.delta_pct is not None and abs(m.delta_pct) > pct:
                    out.append((c, m))
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        for c, cd in zip(self.cells, d["cells"]):
            cd["label"] = c.label
        return d


Group = tuple[str, str, int, int]


def _groups(a: Archive) -> dict[Group, list[str]]:
    by: dict[Group, list[str]] = defaultdict(list)
    for key, c in a.cell_map.items():
        by[(c.arm, c.domain, c.concurrency, c.output_len)].append(key)
    return by


def _label(g: Group) -> str:
    return f"{g[0]} {g[1]} c={g[2]} out={g[3]}"


def _comparable(a: Archive, ka: list[str], b: Archive, kb: list[str]) -> tuple[bool, str, list[str]]:
    notes = []
    ha = {a.cell_map[k].workload_hash for k in ka} - {""}
    hb = {b.cell_map[k].workload_hash for k in kb} - {""}
    if ha and hb and ha != hb:
        return False, f"workload hash differs ({', '.join(sorted(h[:12] for h in ha))} vs " \
                      f"{', '.join(sorted(h[:12] for h in hb))})", notes
    if not ha or not hb:
        notes.append("workload identity unknown on one side (imported run): prompts may differ")
    sa, sb = a.cell_map[ka[0]].sampling, b.cell_map[kb[0]].sampling
    diffs = [k for k in sorted(set(sa) & set(sb) - IGNORED_SAMPLING) if sa[k] != sb[k]]
    if diffs:
        return False, "sampling differs: " + ", ".join(f"{k} {sa[k]!r} vs {sb[k]!r}" for k in diffs), notes
    for side, arch, keys in (("A", a, ka), ("B", b, kb)):
        failed = [k for k in keys if arch.cell_map[k].status != "ok"]
        if failed:
            notes.append(f"{side}: {len(failed)} of {len(keys)} repeats failed ({arch.cell_map[failed[0]].reason})")
    return True, "", notes


def _pooled(arch: Archive, keys: list[str], cache: dict) -> dict[str, np.ndarray]:
    cols: dict[str, list] = defaultdict(list)
    for k in keys:
        if arch.cell_map[k].status != "ok":
            continue
        ck = (id(arch), k)
        if ck not in cache:
            cache[ck] = arch.columns(k)
        for name, v in cache[ck].items():
            cols[name].append(v)
    return {n: np.concatenate(v) if v else np.empty(0) for n, v in cols.items()}


def _summary_centre(arch: Archive, keys: list[str], metric: str) -> Centre:
    """Without per-request samples: the p50 of each repeat's Stat (pooled: their median), n = requests."""
    stats = [arch.cell_map[k].metrics[metric] for k in keys
             if arch.cell_map[k].status == "ok" and metric in arch.cell_map[k].metrics]
    vals = [s.p50 if s.p50 is not None else s.mean for s in stats]
    vals = [v for v in vals if v is not None]
    if not vals:
        return Centre(None, None, None, 0)
    if len(stats) == 1:
        return Centre(vals[0], stats[0].ci_low, stats[0].ci_high, stats[0].n)
    return Centre(float(np.median(vals)), min(vals), max(vals), len(vals))


def _verdict(metric: str, d: float | None, p: float | None, na: int, nb: int) -> str:
    if p is None:
        return "too-few" if min(na, nb) < MIN_SAMPLES else "no-samples"
    if p >= ALPHA or d is None or d == 0:
        return "~"
    better = (d > 0) == (metric in HIGHER_IS_BETTER)
    return "better" if better else "worse"


def compare_metric(metric: str, xa: np.ndarray | None, xb: np.ndarray | None,
                   ca: Centre | None = None, cb: Centre | None = None) -> MetricDiff:
    """From per-request samples (xa, xb) when both are given, else from summary centres (no test)."""
    p, note = None, ""
    sampled = xa is not None and xb is not None
    if sampled:
        ca, cb = median_ci(xa), median_ci(xb)
        p = mann_whitney(xa, xb)
        if p is None:
            note = f"too few samples to call significance (need {MIN_SAMPLES} per side)"
    else:
        ca, cb = ca or Centre(None, None, None, 0), cb or Centre(None, None, None, 0)
        note = "no per-request samples: no test"
    d = delta_pct(ca.median, cb.median)
    if ca.median is None or cb.median is None:
        verdict = "no-data"
    elif not sampled:
        verdict = "no-samples"
    else:
        verdict = _verdict(metric, d, p, ca.n, cb.n)
    return MetricDiff(metric, ca.median, ca.ci_low, ca.ci_high, ca.n, cb.median, cb.ci_low, cb.ci_high, cb.n,
                      d, p, verdict, note)


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (controls the chance of any false alarm across all tests)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


def _apply_correction(cells: list[CellDiff], correction: str) -> None:
    tested = [m for c in cells for m in c.metrics.values() if m.p is not None]
    adjusted = holm([m.p for m in tested]) if correction == "holm" else [m.p for m in tested]
    for m, pa in zip(tested, adjusted):
        m.p_adj = pa
        m.verdict = _verdict(m.metric, m.delta_pct, pa, m.a_n, m.b_n)


def diff_runs(a: Archive, b: Archive, metrics: list[str] | None = None, correction: str = "holm") -> DiffResult:
    metrics = list(metrics or METRICS)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ToolkitError(f"unknown metric {', '.join(unknown)}", hint=f"choose from {', '.join(METRICS)}")
    if correction not in ("holm", "none"):
        raise ToolkitError(f"unknown correction {correction!r}", hint="holm or none")
    ga, gb = _groups(a), _groups(b)
    cache: dict = {}
    cells = []
    for g in sorted(set(ga) & set(gb)):
        ok, reason, notes = _comparable(a, ga[g], b, gb[g])
        cd = CellDiff(*g, comparable=ok, reason=reason, notes=notes)
        if ok:
            pa, pb = _pooled(a, ga[g], cache), _pooled(b, gb[g], cache)
            for m in metrics:
                xa = clean(pa[m]) if m in SAMPLED and m in pa else np.empty(0)
                xb = clean(pb[m]) if m in SAMPLED and m in pb else np.empty(0)
                if len(xa) and len(xb):
                    md = compare_metric(m, xa, xb)
                else:  # a figure kept once per cell, or a side without per-request samples
                    md = compare_metric(m, None, None, _summary_centre(a, ga[g], m), _summary_centre(b, gb[g], m))
                if md.verdict != "no-data":
                    cd.metrics[m] = md
        cells.append(cd)
    _apply_correction(cells, correction)
    gm = {}
    for m in metrics:
        pairs = [(c.metrics[m].a, c.metrics[m].b) for c in cells if m in c.metrics
                 and c.metrics[m].a and c.metrics[m].b and c.metrics[m].a > 0 and c.metrics[m].b > 0]
        if pairs:
            ga_, gb_ = geomean([p[0] for p in pairs]), geomean([p[1] for p in pairs])
            gm[m] = {"a": ga_, "b": gb_, "delta_pct": delta_pct(ga_, gb_), "cells": len(pairs)}
    return DiffResult(a=str(a.path), b=str(b.path), metrics=metrics, cells=cells, correction=correction,
                      only_a=[_label(g) for g in sorted(set(ga) - set(gb))],
                      only_b=[_label(g) for g in sorted(set(gb) - set(ga))],
                      geomean=gm, env=env_diff(a.manifest, b.manifest))


def fmt_num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    av = abs(v)
    if av >= 1000:
        return f"{v:,.0f}"
    if av >= 100:
        return f"{v:.1f}"
    if av >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"
