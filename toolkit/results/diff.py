"""Compare two runs cell by cell, benchstat style, with the environment diff beside it.

Cells match on (arm, domain, concurrency, output_len); repeats are pooled. For each metric of the
registry (toolkit/schema/metrics.py) the A and B figures as `results show` reads them (toolkit/results/
cells.py), the change in percent and, for request metrics, a Mann-Whitney U p-value over the
per-request samples. A change is called only when p < ALPHA and both sides have MIN_SAMPLES requests;
otherwise `~`. Chunk and cell metrics are shown without a test (the registry says why).

Under service-level objectives (A's own, else B's, else `--slo`) the cells also carry goodput_req_s,
goodput_tok_s and slo_attainment, both runs judged by the *same* objectives; attainment, a share, is
tested with Fisher's exact test on the two counts (met of measured requests).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.results.archive import Archive
from toolkit.results.cells import CellReader, Group
from toolkit.results.envdiff import env_diff
from toolkit.results.stats import ALPHA, MIN_SAMPLES, delta_pct, geomean, mann_whitney
from toolkit.schema.metrics import METRICS, NAMES, SLO_METRICS
from toolkit.schema.records import Stat
from toolkit.schema.slo import Objectives

IGNORED_SAMPLING = {"warmup", "workers"}  # warmup count and client processes do not change what a request is
UNTESTED = {"chunk": "pooled over chunks: not tested (the chunks of one request are not independent)",
            "cell": "one figure per cell: not tested"}


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
    verdict: str  # better | worse | ~ | too-few | not-tested | no-samples
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
    excluded: list[str] = field(default_factory=list)  # why no verdict (the regression gate) may use the cell
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
    slo: dict | None = None  # the objectives goodput and attainment are judged by (the slo block's shape)
    slo_note: str = ""

    def regressions(self, pct: float, gated: bool = True) -> list[tuple[CellDiff, MetricDiff]]:
        """Significant changes in the worse direction by more than pct percent, in the cells a verdict may use
        (gated=False: those in the cells it may not, which the gate names but does not count)."""
        out = []
        for c in self.cells:
            if bool(c.excluded) == gated:
                continue
            for m in c.metrics.values():
                if m.verdict == "worse" and m.delta_pct is not None and abs(m.delta_pct) > pct:
                    out.append((c, m))
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        for c, cd in zip(self.cells, d["cells"]):
            cd["label"] = c.label
        return d


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


def _qualify(cells: list[CellDiff], a: Archive, b: Archive) -> None:
    """Each cell's flags under the rule of what a verdict may use (toolkit/schema/eligibility.py), per side:
    notes name them; an excluded cell's changes are shown but never gate (--fail-on-regression)."""
    from toolkit.results.verdicts import judged_cells
    from toolkit.schema.eligibility import Eligibility

    eligs = [(side, Eligibility(judged_cells(x), {arm: s.model_dump(mode="json") for arm, s in x.derived.arm_info.items()}))
             for side, x in (("A", a), ("B", b))]
    for c in cells:
        for side, elig in eligs:
            flags = [f for f in elig.flags(c.arm, c.domain, c.concurrency) if f.code != "failed"]  # failed: noted
            c.excluded += [f"{side}: {f.text()}" for f in flags if f.excludes]
            c.notes += [f"{side}: {'no verdict uses it' if f.excludes else 'verdicts name it'}: {f.text()}"
                        for f in flags]


def _verdict(metric: str, d: float | None, p: float | None, na: int, nb: int) -> str:
    if p is None:
        return "too-few" if min(na, nb) < MIN_SAMPLES else "no-samples"
    if p >= ALPHA or d is None or d == 0:
        return "~"
    better = (d > 0) == METRICS[metric].higher_is_better
    return "better" if better else "worse"


def compare_metric(metric: str, sa: Stat, sb: Stat, xa: np.ndarray | None, xb: np.ndarray | None) -> MetricDiff:
    """A and B as read by `results show` (sa, sb); a test on the per-request samples when both exist."""
    kind = METRICS[metric].kind
    d = delta_pct(sa.p50, sb.p50)
    p, note = None, ""
    if kind == "share":
        p = fisher(sa, sb)
        if p is None:
            note = f"too few requests to call significance (need {MIN_SAMPLES} per side)"
        verdict = _verdict(metric, d, p, sa.n, sb.n)
    elif kind != "request":
        verdict, note = "not-tested", UNTESTED[kind]
    elif xa is None or xb is None:
        verdict, note = "no-samples", "no per-request samples (summary-only import): not tested"
    else:
        p = mann_whitney(xa, xb)
        if p is None:
            note = f"too few samples to call significance (need {MIN_SAMPLES} per side)"
        verdict = _verdict(metric, d, p, len(xa), len(xb))
    return MetricDiff(metric, sa.p50, sa.ci_low, sa.ci_high, sa.n, sb.p50, sb.ci_low, sb.ci_high, sb.n, d, p,
                      verdict, note)


def fisher(sa: Stat, sb: Stat) -> float | None:
    """Two-sided Fisher exact p-value of two shares (k of n on each side); None below MIN_SAMPLES."""
    from scipy.stats import fisher_exact

    if sa.n < MIN_SAMPLES or sb.n < MIN_SAMPLES or sa.p50 is None or sb.p50 is None:
        return None
    ka, kb = round(sa.p50 * sa.n), round(sb.p50 * sb.n)
    return float(fisher_exact([[ka, sa.n - ka], [kb, sb.n - kb]]).pvalue)


def run_objectives(a: Archive, b: Archive, given: Objectives | None) -> tuple[Objectives | None, str]:
    """The objectives both runs are judged by: the given ones, else A's, else B's; a note when A and B
    carry different ones."""
    from toolkit.results.slo import objectives_for

    oa, ob = objectives_for(a.manifest, a.derived), objectives_for(b.manifest, b.derived)
    if given is not None:
        return given, "objectives given on the command line"
    if oa is not None and ob is not None and oa.block() != ob.block():
        return oa, f"A and B carry different objectives; both are judged by A's ({oa.text()}); B's: {ob.text()}"
    return (oa, "A's objectives") if oa is not None else (ob, "B's objectives") if ob is not None else (None, "")


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


def _cell_diff(g: Group, ra: CellReader, ka: list[str], rb: CellReader, kb: list[str], metrics: list[str]) -> CellDiff:
    ok, reason, notes = _comparable(ra.archive, ka, rb.archive, kb)
    cd = CellDiff(*g, comparable=ok, reason=reason, notes=notes)
    if not ok:
        return cd
    xa, xb = ra.samples(ka), rb.samples(kb)
    sa, sb = ra.stats(ka, xa), rb.stats(kb, xb)
    for m in metrics:
        if m in sa and m in sb:
            cd.metrics[m] = compare_metric(m, sa[m], sb[m], xa.get(m), xb.get(m))
    return cd


def diff_runs(a: Archive, b: Archive, metrics: list[str] | None = None, correction: str = "holm",
              objectives: Objectives | None = None) -> DiffResult:
    obj, slo_note = run_objectives(a, b, objectives)
    asked = list(metrics or [])
    metrics = asked or [m for m in NAMES if obj is not None or m not in SLO_METRICS]
    if obj is None and any(m in SLO_METRICS for m in asked):
        raise ToolkitError(f"{', '.join(m for m in asked if m in SLO_METRICS)} exist only under service-level "
                           "objectives, and neither run has any", hint="give some: --slo tpot_ms.p90=30 (docs/slo.md)")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ToolkitError(f"unknown metric {', '.join(unknown)}", hint=f"choose from {', '.join(NAMES)} "
                           "(docs/results.md defines each)")
    if correction not in ("holm", "none"):
        raise ToolkitError(f"unknown correction {correction!r}", hint="holm or none")
    ra, rb = CellReader(a, obj), CellReader(b, obj)
    ga, gb = ra.groups(), rb.groups()
    cells = [_cell_diff(g, ra, ga[g], rb, gb[g], metrics) for g in sorted(set(ga) & set(gb))]
    _qualify(cells, a, b)
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
                      geomean=gm, env=env_diff(a.manifest, b.manifest),
                      slo=obj.block() if obj is not None else None, slo_note=slo_note)
