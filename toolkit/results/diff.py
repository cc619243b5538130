"""Compare two runs cell by cell, benchstat style, with the environment diff beside it.

Cells match on (arm, domain, concurrency, output_len); repeats and launches are pooled for the figures
shown. For each metric of the registry (toolkit/schema/metrics.py) the A and B figures as `results show`
reads them (toolkit/results/cells.py), the change in percent, and a verdict whose unit of replication is
the server launch (toolkit/stats/launches.py, docs/results.md#launch-noise):

- launch noise known (a side with two or more launches, or a calibration run of this GPU and
  environment): a t-test of the log-ratio of the per-launch figures, with the cell's own launch variance
  (both runs' launches pooled, `toolkit.stats.cell_noise`; a cell of one launch a side: the calibration's pool
  over the arm's cells); every metric kind is tested this way, cell and chunk figures included;
- one launch a side and no calibration: request metrics keep the per-request test (Mann-Whitney U;
  shares: Fisher), but a change is called only beyond the default floor (DEFAULT_FLOOR_PCT) in the cell
  and arm-wide (the arm's geometric mean over its cells beyond it too, same direction): anything less is
  `inconclusive` (one launch a side, launch noise unknown). Chunk and cell metrics stay untested.
p-values are Holm-adjusted over the diff's family of tests (one per independent metric and cell: a metric that
tracks another, toolkit/schema/metrics.py `Metric.tracks`, adds none); `~` when not significant.

Under service-level objectives (A's own, else B's, else `--slo`) the cells also carry goodput_req_s,
goodput_tok_s and slo_attainment, both runs judged by the *same* objectives; attainment, a share, is
tested with Fisher's exact test on the two counts (met of measured requests).
"""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Collection
from dataclasses import asdict, dataclass, field

import numpy as np

from toolkit.schema.keys import level_label, synthetic_label
from toolkit.errors import ToolkitError
from toolkit.loadgen.load import CellLoad
from toolkit.results.archive import Archive
from toolkit.results.cells import CellReader, Group
from toolkit.results.envdiff import env_diff
from toolkit.results.machines import CrossMachines
from toolkit.results.noise import LaunchView, NoiseModel, calibration_view, refusal
from toolkit.stats import (ALPHA, DEFAULT, DEFAULT_FLOOR_PCT, MIN_SAMPLES, Comparison, MachineVar, beyond_margin,
                           cell_noise, combine, compare, cv_of_var, delta_pct, exceeds_p, fisher_p, floor_pct, from_delta,
                           geomean, holm, log_of_pct, logs, mann_whitney, pct_of_log)
from toolkit.schema.metrics import METRICS, NAMES, SLO_METRICS
from toolkit.schema.records import Stat
from toolkit.schema.slo import Objectives

# what a cell sends is compared field by field, but for the fields CellLoad declares uncompared (warmup, workers)
IGNORED_SAMPLING = CellLoad.not_compared()
UNTESTED = {"chunk": "pooled over chunks: not tested (the chunks of one request are not independent)",
            "cell": "one figure per cell: not tested"}
DEFAULT_FLOOR = "default floor"  # MetricDiff.noise of a verdict made without any launch noise
CLAIM_DF = 3  # the df of a cell's own launch variance a claim needs (2 launches a side give 2)
TOO_FEW_LAUNCHES = ("too few launches for a claim at the family's (Holm) level: the cell's own launch variance has "
                    "under 3 df (2 launches a side, or 3 against 1); `launches: 3` or a calibration (`toolkit bench "
                    "noise`) makes it testable")


def own_df(launches_a: int, launches_b: int) -> int:
    """The df of a cell's own launch variance (toolkit.stats.cell_noise) from its launches on each side."""
    return max(launches_a - 1, 0) + max(launches_b - 1, 0)


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
    verdict: str  # better | worse | ~ | inconclusive | too-few | not-tested | no-samples
    note: str = ""
    p_adj: float | None = None  # Holm-adjusted over the diff's family (`family`; the one the verdict uses)
    launches_a: int = 1
    launches_b: int = 1
    noise: str = ""  # where the launch noise came from: runs | calibration <id> | default floor | "" (untested)
    low_pct: float | None = None  # the change's 95% CI (launch-aware), when the launch noise is known
    high_pct: float | None = None
    df: float | None = None
    se: float | None = None  # of the log-ratio, when the launch noise is known
    launch_cv: float | None = None  # the launch CV the comparison assumed (both sides' variances averaged)
    excluded: list[str] = field(default_factory=list)  # why no verdict on this metric may use the cell (`bundled`)

    @property
    def significant(self) -> bool:
        return self.verdict in ("better", "worse")

    @property
    def claims(self) -> bool:
        """May this test support a claim (a verdict, the gate, `differs`)? Not from the cell's own variance of
        under CLAIM_DF df (TOO_FEW_LAUNCHES: 2 launches a side); a calibration's variance does."""
        return (self.se is None or self.noise.startswith("calibration")
                or own_df(self.launches_a, self.launches_b) >= CLAIM_DF)


@dataclass
class CellDiff:
    arm: str
    domain: str
    concurrency: int | float  # the group's level: a float is an open-loop cell's rate, req/s (CellSummary.level)
    output_len: int
    comparable: bool = True
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # why no verdict (the regression gate) may use the cell
    metrics: dict[str, MetricDiff] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return _label((self.arm, self.domain, self.concurrency, self.output_len))


@dataclass(frozen=True)
class ArmNoise:
    """Which launch noise an arm's verdicts used: its launches in each run and the noise's source (measured in the
    runs, a calibration, or the default floor)."""

    launches_a: int
    launches_b: int
    source: str


@dataclass(frozen=True)
class MachineLevel:
    """Whether the two runs ran on one machine and, across machines, the between-machine variance (by metric)
    that every launch test and geometric mean added (toolkit/results/machines.py)."""

    cross: CrossMachines
    variance: dict[str, MachineVar] = field(default_factory=dict)


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
    floor_pct: float = DEFAULT_FLOOR_PCT
    noise: dict[str, ArmNoise] = field(default_factory=dict)  # by arm
    calibration: str | None = None  # run id of the calibration used, if any
    calibration_refused: list[str] = field(default_factory=list)  # calibrations not used, and why (a busy host)
    family_size: int = 0  # the tests of the Holm family (derived duplicates not counted: `family`)
    machines: MachineLevel | None = None

    @property
    def cross_machine(self) -> bool:
        return self.machines is not None and self.machines.cross.different

    def regressions(self, pct: float, gated: bool = True) -> list[tuple[CellDiff, MetricDiff, float | None]]:
        """The changes worse by more than pct percent with confidence (`gate`), in the cells a verdict may use
        (gated=False: those in the cells it may not, which the gate names but does not count), each with its p."""
        return [(c, m, p) for c, m, p in self.gate(pct) if bool(c.excluded or m.excluded) != gated]

    def gate(self, pct: float) -> list[tuple[CellDiff, MetricDiff, float | None]]:
        """`--fail-on-regression pct`: where the launch noise is known, a one-sided test of the log ratio beyond
        log(1 + pct / 100) in the worse direction, Holm-adjusted over the family (`--correction none`: not);
        where it is not (one launch a side, no calibration), the default floor rule's `worse` beyond pct on the
        same scale. Bad input (exit 2): a negative pct, or no cell the two runs can compare (nothing tested)."""
        if pct < 0:
            raise ToolkitError(f"--fail-on-regression {pct:g}: a regression margin cannot be negative",
                               hint="give the percent a metric may get worse by, e.g. --fail-on-regression 5")
        if not any(c.comparable for c in self.cells):
            raise ToolkitError(f"--fail-on-regression: runs A and B have no cell they can compare ({len(self.cells)} "
                               f"in common, none comparable; {len(self.only_a)} only in A, {len(self.only_b)} only "
                               "in B): nothing was tested, so no regression can be ruled out",
                               hint="compare runs of the same matrix: cells match on arm, domain, concurrency and "
                                    "output length, with the same workload and sampling")
        tests = self.gate_tests()
        if not tests and self.unclaimed() and not any(m.noise == DEFAULT_FLOOR for c in self.cells
                                                      for m in c.metrics.values()):
            raise ToolkitError(f"--fail-on-regression: every tested metric-cell has {TOO_FEW_LAUNCHES}",
                               hint="run 3 launches a side (`launches: 3`), or calibrate this GPU and environment "
                                    "with `toolkit bench noise`")
        ps = [exceeds_p(from_delta(m.delta_pct, m.se, m.df), pct, -1 if METRICS[m.metric].higher_is_better else 1)
              for _, m in tests]
        adjusted = holm(ps, family(tests)) if self.correction == "holm" else ps
        rows = [(c, m, pa) for (c, m), pa in zip(tests, adjusted) if pa < self.alpha]
        return rows + [(c, m, m.p_adj) for c in self.cells for m in c.metrics.values()
                       if m.noise == DEFAULT_FLOOR and m.verdict == "worse" and beyond_margin(m.delta_pct, pct)]

    def gate_tests(self) -> list[tuple[CellDiff, MetricDiff]]:
        """The metric-cells the gate tests one-sided (the launch noise known); `family` of them is its family."""
        return [(c, m) for c in self.cells for m in c.metrics.values()
                if m.se is not None and m.delta_pct is not None and m.claims]

    def unclaimed(self) -> list[tuple[CellDiff, MetricDiff]]:
        """The tested metric-cells that can support no claim (MetricDiff.claims: 2 launches a side)."""
        return [(c, m) for c in self.cells for m in c.metrics.values() if m.se is not None and not m.claims]

    def to_dict(self) -> dict:  # json-edge: results diff --json
        d = asdict(self)
        for c, cd in zip(self.cells, d["cells"]):
            cd["label"] = c.label
        m = self.machines
        d["machines"] = {} if m is None else {
            **m.cross.to_dict(),
            **({"variance": {k: {"cv": v.cv, "df": None if math.isinf(v.df) else v.df, "source": v.source}
                             for k, v in m.variance.items()}} if m.cross.different else {}),
            "text": m.cross.text()}
        return d


def _label(g: Group) -> str:
    """`arm domain c=16 out=N`, or `r=2/s` for an open-loop group (its level a float rate, CellSummary.level)."""
    return f"{g[0]} {g[1]} {level_label(int(g[2]), g[2] if isinstance(g[2], float) else None)} out={g[3]}"


def _comparable(a: Archive, ka: list[str], b: Archive, kb: list[str]) -> tuple[bool, str, list[str]]:
    notes = []
    ha = {a.cell_map[k].workload_hash for k in ka} - {""}
    hb = {b.cell_map[k].workload_hash for k in kb} - {""}
    if ha and hb and ha != hb:
        return False, f"workload hash differs ({', '.join(sorted(h[:12] for h in ha))} vs " \
                      f"{', '.join(sorted(h[:12] for h in hb))})", notes
    if not ha or not hb:
        notes.append("workload identity unknown on one side (imported run): prompts may differ")
    # synthetic acceptance (SGLANG_SIMULATE_ACC_LEN) is a setting, not a result: a forced cell is compared only
    # with one forced to the same length, never with real acceptance (docs/bench.md#synthetic-acceptance)
    fa, fb = ({x.cell_map[k].synthetic_acceptance for k in keys} for x, keys in ((a, ka), (b, kb)))
    if fa != fb:
        return False, f"acceptance differs: {_forced(fa)} vs {_forced(fb)}; a forced acceptance is never " \
                      "compared with another acceptance", notes
    sa, sb = (CellLoad.complete(x.cell_map[keys[0]].sampling) for x, keys in ((a, ka), (b, kb)))
    diffs = [k for k in sorted(set(sa) & set(sb) - IGNORED_SAMPLING) if sa[k] != sb[k]]
    if diffs:
        return False, "sampling differs: " + ", ".join(f"{k} {sa[k]!r} vs {sb[k]!r}" for k in diffs), notes
    for side, arch, keys in (("A", a, ka), ("B", b, kb)):
        failed = [k for k in keys if arch.cell_map[k].status != "ok"]
        if failed:
            notes.append(f"{side}: {len(failed)} of {len(keys)} repeats failed ({arch.cell_map[failed[0]].reason})")
    return True, "", notes


def _forced(levels: set) -> str:
    return " / ".join("real" if v is None else synthetic_label(v) for v in sorted(levels, key=lambda v: (v is not None, v or 0)))


def _qualify(cells: list[CellDiff], a: Archive, b: Archive) -> None:
    """Each cell's flags under the rule of what a verdict may use (toolkit/schema/eligibility.py), per side:
    notes name them; an excluded cell's changes are shown but never gate (--fail-on-regression), nor do those of
    a metric a flag leaves out (MetricDiff.excluded: `bundled` for TTFT/ITL/TPOT; the throughput still gates)."""
    from toolkit.results.verdicts import judged_cells
    from toolkit.schema.eligibility import Eligibility

    eligs = [(side, Eligibility(judged_cells(x), x.derived.arm_info))
             for side, x in (("A", a), ("B", b))]
    for c in cells:
        for side, elig in eligs:
            flags = [f for f in elig.flags(c.arm, c.domain, c.concurrency) if f.code != "failed"]  # failed: noted
            c.excluded += [f"{side}: {f.text()}" for f in flags if f.excludes]
            for m in c.metrics.values():  # flags that leave some metrics out (bundled: TTFT/ITL/TPOT)
                m.excluded += [f"{side}: {f.text()}" for f in flags if not f.excludes and m.metric in f.metrics]
            c.notes += [f"{side}: {_use(f)}: {f.text()}" for f in flags]


def _use(f) -> str:
    """What a flag means for the verdicts: none uses the cell, none on some metrics does, or they name it."""
    if f.excludes:
        return "no verdict uses it"
    if f.metrics:
        return "no " + "/".join(METRICS[m].label for m in f.metrics if m in METRICS) + " verdict uses it"
    return "verdicts name it"


def _verdict(metric: str, d: float | None, p: float | None, na: int, nb: int) -> str:
    if p is None:
        return "too-few" if min(na, nb) < MIN_SAMPLES else "no-samples"
    if p >= ALPHA or d is None or d == 0:
        return "~"
    better = (d > 0) == METRICS[metric].higher_is_better
    return "better" if better else "worse"


def _floor_verdict(m: MetricDiff, arm_log: float | None, floor_pct: float) -> tuple[str, str]:
    """One launch a side, launch noise unknown: a change is called only beyond the floor, arm-wide (the
    arm's geometric mean over its cells beyond it in the same direction: a relaunch moves single cells far
    more than whole arms) and with the per-request test agreeing."""
    fl = log_of_pct(floor_pct)
    x = log_of_pct(m.delta_pct) if m.delta_pct is not None and m.delta_pct > -100 else None
    if x is None or abs(x) <= fl:
        return "inconclusive", f"one launch per side, launch noise unknown: within the default floor ±{floor_pct:g}%"
    if arm_log is None or abs(arm_log) <= fl or (arm_log > 0) != (x > 0):
        arm = "-" if arm_log is None else f"{pct_of_log(arm_log):+.1f}%"
        return "inconclusive", (f"one launch per side, launch noise unknown: beyond the ±{floor_pct:g}% floor in this "
                                f"cell, not arm-wide (the arm over its cells: {arm})")
    return _verdict(m.metric, m.delta_pct, m.p_adj, m.a_n, m.b_n), ""


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
    if sa.n < MIN_SAMPLES or sb.n < MIN_SAMPLES or sa.p50 is None or sb.p50 is None:
        return None
    ka, kb = round(sa.p50 * sa.n), round(sb.p50 * sb.n)
    return fisher_p(ka, sa.n, kb, sb.n)


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


def family(tests: list[tuple[CellDiff, MetricDiff]]) -> list[int | None]:
    """The Holm family, one member per independent metric and cell: for each test None (a member), or the index
    of the test it repeats, where its metric tracks another (`Metric.tracks` in toolkit/schema/metrics.py, the
    one place that says so: request_s is output_tok_s over the output length) tested in the same cell."""
    index = {(c.label, m.metric): i for i, (c, m) in enumerate(tests)}
    return [index.get((c.label, METRICS[m.metric].tracks)) for c, m in tests]


def _arm_changes(cells: list[CellDiff]) -> dict[tuple[str, str], float]:  # data-keyed: (arm, metric)
    """(arm, metric) -> the mean log change over the arm's comparable cells (its geometric mean)."""
    acc: dict[tuple[str, str], list[float]] = {}
    for c in cells:
        for m in c.metrics.values():
            if c.comparable and m.delta_pct is not None and m.delta_pct > -100:
                acc.setdefault((c.arm, m.metric), []).append(log_of_pct(m.delta_pct))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _apply_correction(cells: list[CellDiff], correction: str, floor_pct: float = DEFAULT_FLOOR_PCT) -> int:
    """Adjust every test's p over the family and set the verdicts; returns the family's size."""
    tested = [(c, m) for c in cells for m in c.metrics.values() if m.p is not None]
    members = family(tested)
    ps = [m.p for _, m in tested]
    for (_, m), pa in zip(tested, holm(ps, members) if correction == "holm" else ps):
        m.p_adj = pa
    arm = _arm_changes(cells)
    for c in cells:
        for m in c.metrics.values():
            if m.p is None:
                continue
            if m.noise == DEFAULT_FLOOR:
                m.verdict, note = _floor_verdict(m, arm.get((c.arm, m.metric)), floor_pct)
                m.note = note or m.note
            else:
                m.verdict = _verdict(m.metric, m.delta_pct, m.p_adj, m.a_n, m.b_n)
                if m.significant and not m.claims:
                    m.verdict, m.note = "inconclusive", TOO_FEW_LAUNCHES
    return members.count(None)


def _launch_test(md: MetricDiff, g: Group, va: LaunchView, vb: LaunchView, model: NoiseModel) -> None:
    """The launch as the unit: a t-test of the per-launch figures where the launch noise is known; else the
    default floor rule for request metrics (decided in _apply_correction, after the p-value adjustment)."""
    md.launches_a, md.launches_b = va.launches(g), vb.launches(g)
    fa, fb = va.figures(g, md.metric), vb.figures(g, md.metric)
    own = cell_noise(fa, fb)  # the cell's own launch variance (toolkit/stats/launches.py says why not the arm's pool)
    cal = model.calibrated(g[0], md.metric) if own is None or own.df < CLAIM_DF else None
    sides = (cal, cal) if cal is not None else (own, own) if own is not None else model.sides(g[0], md.metric)
    comp = compare(fa, fb, *sides, machine=model.machine_var(md.metric)) if sides is not None else None
    if comp is not None:
        md.p, md.delta_pct, md.df, md.noise, md.se = comp.p, comp.delta_pct, comp.df, comp.source, comp.se
        md.launch_cv = cv_of_var((sides[0].var + sides[1].var) / 2)
        md.low_pct, md.high_pct = comp.low_pct, comp.high_pct
        md.note = ""
        md.verdict = "~"  # until the adjustment decides
    elif md.p is not None:
        md.noise = DEFAULT_FLOOR
    if comp is None and any(len(logs(view.figures(g, md.metric))) < view.launches(g) for view in (va, vb)):
        md.note = ("a launch's figure is 0 or missing (e.g. ITL where most chunks arrived in one read): no test on "
                   "the log scale for it" + (f"; {md.note}" if md.note else ""))


def _cell_diff(g: Group, ra: CellReader, ka: list[str], rb: CellReader, kb: list[str], metrics: list[str],
               views: tuple[LaunchView, LaunchView, NoiseModel] | None = None) -> CellDiff:
    ok, reason, notes = _comparable(ra.archive, ka, rb.archive, kb)
    cd = CellDiff(*g, comparable=ok, reason=reason, notes=notes)
    if not ok:
        return cd
    xa, xb = ra.samples(ka), rb.samples(kb)
    sa, sb = ra.stats(ka, xa), rb.stats(kb, xb)
    for m in metrics:
        if m in sa and m in sb:
            cd.metrics[m] = compare_metric(m, sa[m], sb[m], xa.get(m), xb.get(m))
            if views is not None:
                _launch_test(cd.metrics[m], g, *views)
    return cd


def geomean_comparison(cells: list[CellDiff], metric: str, va: LaunchView, vb: LaunchView,
                       model: NoiseModel) -> tuple[Comparison | None, dict[str, str]]:
    """The change of a metric's geometric mean over the comparable cells, with a launch-aware CI: per arm the
    per-launch geometric means over its cells compared (their noise is what a launch moves the whole arm
    by; a metric-cell a flag leaves out, `bundled` TTFT/ITL/TPOT, is no part of it), then the arms combined
    (separate launches: independent). (None, {arm: why}) when an arm's noise is
    unknown: no test of the geometric mean is made without every arm's."""
    by_arm: dict[str, list[Group]] = {}
    for c in cells:
        if (c.comparable and metric in c.metrics and c.metrics[metric].a and c.metrics[metric].b
                and not c.metrics[metric].excluded):
            by_arm.setdefault(c.arm, []).append((c.arm, c.domain, c.concurrency, c.output_len))
    parts, missing = [], {}
    for arm, groups in sorted(by_arm.items()):
        sides = model.sides(arm, metric, level="arm")
        comp = compare(va.arm_figures(arm, metric, groups), vb.arm_figures(arm, metric, groups), *sides,
                       machine=model.machine_var(metric)) if sides is not None else None
        if comp is None:
            missing[arm] = model.arm_unknown(arm, metric) if sides is None else "no launch has every cell of the arm"
        parts.append((comp, len(groups)))
    return (None, missing) if missing else (combine(parts), {})


def _noise_model(ra: CellReader, rb: CellReader, calibration, objectives,
                 refused: list[str] | None = None) -> tuple[LaunchView, LaunchView, NoiseModel]:
    """The two runs launch by launch, and a calibration where some arm has one launch on both sides
    (`calibration`: "auto" looks under A's and B's results roots, an Archive is used as given, None: none).
    A calibration made on a busy host, or for another environment hash than both runs', is never used, given or
    found: its reason goes to `refused` (toolkit.results.noise.refusal)."""
    va, vb = LaunchView(ra), LaunchView(rb)
    cal = None
    arms = {g[0] for g in va.groups} & {g[0] for g in vb.groups}
    if calibration is not None and any(own_df(va.arm_launches(x), vb.arm_launches(x)) < CLAIM_DF for x in arms):
        if isinstance(calibration, Archive):
            why = refusal(calibration, ra.archive, rb.archive)
            if why is None:
                cal = LaunchView(CellReader(calibration, objectives), source=f"calibration {calibration.run_id}")
            elif refused is not None:
                refused.append(why)
        else:
            roots = list(dict.fromkeys(p.path.resolve().parent.parent for p in (ra.archive, rb.archive)))
            for root in roots:
                cal = cal or calibration_view(root, ra.archive, rb.archive, objectives=objectives, refused=refused)
    if cal is not None and refused:  # refused ones are newer: the search goes newest first
        refused[:] = [f"{r}; {cal.source} (older) used instead" for r in dict.fromkeys(refused)]
    return va, vb, NoiseModel(va, vb, cal)


def _noise_summary(arms: set[str], va: LaunchView, vb: LaunchView,  # data-keyed: arm
                   model: NoiseModel) -> dict[str, ArmNoise]:
    out = {}
    for arm in sorted(arms):
        na, nb = va.arm_launches(arm), vb.arm_launches(arm)
        if 0 < own_df(na, nb) < CLAIM_DF and model.calibration is not None:
            src = model.calibration.source
        elif na >= 2 and nb >= 2:
            src = "measured in the runs"
        elif na >= 2 or nb >= 2:
            src = f"measured in run {'A' if na >= 2 else 'B'} (the other has one launch)"
        elif model.calibration is not None:
            src = model.calibration.source
        else:
            src = DEFAULT_FLOOR
        out[arm] = ArmNoise(na, nb, src)
    return out


def _machine_level(a: Archive, b: Archive, metrics: list[str], model: NoiseModel) -> MachineLevel:
    """Did the runs run on different machines? If so, every launch test and geometric mean adds the
    between-machine variance (toolkit/results/machines.py: from committed cross-machine A/A pairs under A's
    results root, else the default prior), set on the noise model before any test runs."""
    from toolkit.results.machines import cross_machines, machine_variance

    cross = cross_machines(a, b)
    if not cross.different:
        return MachineLevel(cross)
    model.machine = machine_variance(Path(a.path).resolve().parent.parent, metrics, judged=(a.run_id, b.run_id))
    return MachineLevel(cross, dict(model.machine))


def diff_runs(a: Archive, b: Archive, metrics: list[str] | None = None, correction: str = "holm",
              objectives: Objectives | None = None, calibration: Archive | str | None = "auto",
              arms: Collection[str] | None = None) -> DiffResult:
    """B against A, cell by cell (`arms`: only those arms' cells; the launch noise is each arm's own either way)."""
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
    if arms is not None:
        ga, gb = ({g: v for g, v in x.items() if g[0] in arms} for x in (ga, gb))
    refused: list[str] = []
    views = _noise_model(ra, rb, calibration, obj, refused)
    machines = _machine_level(a, b, metrics, views[2])
    cells = [_cell_diff(g, ra, ga[g], rb, gb[g], metrics, views) for g in sorted(set(ga) & set(gb))]
    _qualify(cells, a, b)
    # one launch a side and no launch noise known: the default floor, widened across machines by the largest
    # between-machine variance of the metrics compared (the floor is one figure for every metric)
    floor = DEFAULT_FLOOR_PCT if not views[2].machine else floor_pct(cv_of_var(
        DEFAULT.var + max(v.var for v in views[2].machine.values())))
    size = _apply_correction(cells, correction, floor)
    gm = {}
    for m in metrics:
        pairs = [(c.metrics[m].a, c.metrics[m].b) for c in cells if m in c.metrics and not c.metrics[m].excluded
                 and c.metrics[m].a and c.metrics[m].b and c.metrics[m].a > 0 and c.metrics[m].b > 0]
        if pairs:
            ga_, gb_ = geomean([p[0] for p in pairs]), geomean([p[1] for p in pairs])
            gm[m] = {"a": ga_, "b": gb_, "delta_pct": delta_pct(ga_, gb_), "cells": len(pairs)}
            comp, missing = geomean_comparison(cells, m, *views)
            if missing:
                gm[m]["untested"] = missing
            if comp is not None:
                gm[m].update(low_pct=comp.low_pct, high_pct=comp.high_pct, launch_delta_pct=comp.delta_pct,
                             p=comp.p, df=comp.df, se=comp.se, noise=comp.source)
    va, vb, model = views
    return DiffResult(a=str(a.path), b=str(b.path), metrics=metrics, cells=cells, correction=correction,
                      only_a=[_label(g) for g in sorted(set(ga) - set(gb))],
                      only_b=[_label(g) for g in sorted(set(gb) - set(ga))],
                      geomean=gm, env=env_diff(a.manifest, b.manifest),
                      slo=obj.block() if obj is not None else None, slo_note=slo_note,
                      noise=_noise_summary({g[0] for g in set(ga) & set(gb)}, va, vb, model),
                      calibration=model.calibration.run_id if model.calibration is not None else None,
                      family_size=size, machines=machines, floor_pct=round(floor),
                      calibration_refused=list(dict.fromkeys(refused)))
