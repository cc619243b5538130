"""The server launch as the unit of replication: the statistics every verdict calls (`results diff`,
`results reproduce`, the paired speed-ups and the advice made from them, SLO certainty, tune's
confirmation). Numbers only: toolkit/results/noise.py reads them from archives.

Why: every request of an arm comes from one server launch, and what changes between launches (CUDA
graphs, memory layout, clocks, batch composition, the tokens themselves) moves all of them together.
Requests are not independent samples of "the arm", launches are. So:

- per (cell, metric) one figure per launch (the launch's median for request metrics, the cell figure for
  cell metrics), on the log scale, so a change is a ratio and a spread a coefficient of variation;
- the launch-to-launch variance per (arm, metric), pooled over the arm's cells (`launch_noise`): each
  cell's launches give (n - 1) degrees of freedom, and the pooled estimate assumes the arm's cells share
  one launch CV. Its degrees of freedom come from a two-way (cell x launch) decomposition
  (Satterthwaite): when launches move all cells of the arm together, the cells' deviations are not
  independent and the df shrink towards (launches - 1), as they must;
- the variance a cell's test or interval uses is the cell's own (`cell_noise`): its launches' variance, the
  sides of a comparison pooled, with their (n - 1) df summed. Why not the arm's pool, or the pool shrunk
  towards the cell (a scaled inverse-chi-square prior) or replaced only in an odd cell (an F test): one pool
  is calibrated only on average over the cells. Cells differ (launch noise rises with concurrency; a cell can
  be bimodal), and with 3 launches a side the data cannot tell a noisy cell from bad luck well enough for
  either fix: in benchmarks/cellvar_sim.py (6 cells, 3 launches a side) the pool calls a bimodal cell changed
  in ~20 % of A/A pairs and its quiet siblings in ~1 %, shrinkage (prior df estimated from the cells' spread,
  limma style) still ~15 %, an F test at 5 % ~17 %; the cell's own variance is exact under normal launch
  effects whatever the other cells do (4-7 % in every cell, bimodal and heavy-tailed included). The price is
  df: (n_a - 1) + (n_b - 1), 4 at 3 launches a side, so wider intervals than the pool claimed;
  the pool (`launch_noise`) stays for what has no launches of its own (a side of one launch borrowing a
  calibration's) and for the arm's geometric mean (its launch-to-launch variance, arm_var);
- a t-based CI and test of the log-ratio B/A with those df (`compare`), an equivalence test with a
  margin (`tost_p`), a test of a change beyond a margin (`beyond_p`; one direction: `exceeds_p`), all on
  the log scale (`beyond_margin`: a point estimate on the same scale), a one-sample interval
  (`interval`: per-round paired speed-ups, SLO percentiles over launches), the smallest change a
  comparison can detect (`mde_pct`), the power of a planned comparison and the launches it needs (`power`,
  `launches_needed`, `requests_per_launch`);
- the machine as a level above the launch (`MachineVar`): two runs on different machines differ by their
  machines' effects as well, which launches on one machine never average away; `compare(..., machine=)` adds
  twice the between-machine variance (a prior per metric, `machine_prior`, or one estimated from committed
  cross-machine A/A pairs, `machine_var_from_pairs`).

With one launch on a side its launch variance cannot be seen from the run: the caller uses the other
side's, a calibration run's (`toolkit bench noise`), or, where there is none, the default launch CV
(DEFAULT_LAUNCH_CV) and the floor it implies (DEFAULT_FLOOR_PCT). docs/results.md#launch-noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from scipy import stats as sps

ALPHA = 0.05
POWER = 0.80
# The launch CV assumed when no run shows it: the committed H200 A/A pair (docs/results.md#launch-noise)
# moved stable arms' cells by 5-13 % (RMS, one launch a side) and every arm's geomean by at most 19 %.
DEFAULT_LAUNCH_CV = 0.10


def floor_pct(cv: float, alpha: float = ALPHA) -> float:
    """The change two single launches stay within with probability 1 - alpha when the launch CV is cv:
    exp(z * sqrt(2) * cv) - 1, in percent (the noise floor of a one-launch-a-side comparison)."""
    return 100.0 * (math.exp(sps.norm.ppf(1 - alpha / 2) * math.sqrt(2) * cv) - 1)


DEFAULT_FLOOR_PCT = round(floor_pct(DEFAULT_LAUNCH_CV))  # 32 %


@dataclass(frozen=True)
class Noise:
    """The launch-to-launch spread of one per-launch figure, on the log scale.

    var: the variance of one launch's log figure (between launches, plus the sampling noise of the
    figure within a launch); df its degrees of freedom (inf: taken as known); arm_var / arm_df the same
    for a launch's mean over the arm's cells (what a geometric mean over cells varies by)."""

    var: float
    df: float
    source: str = "runs"  # runs | calibration <run id> | default
    cells: int = 0
    launches: int = 0
    arm_var: float | None = None
    arm_df: float | None = None

    @property
    def cv(self) -> float:
        """The coefficient of variation of one launch's figure (sd of its log; exact: sqrt(e^var - 1))."""
        return math.sqrt(math.expm1(self.var))

    def text(self) -> str:
        if self.source == "default":
            return f"default launch CV {self.cv:.0%} (no launch noise measured)"
        df = "" if math.isinf(self.df) else f", df {self.df:.1f}"
        return f"{self.source}: launch CV {self.cv:.1%}{df}"


DEFAULT = Noise(var=math.log1p(DEFAULT_LAUNCH_CV ** 2), df=math.inf, source="default")
SHARED = Noise(var=0.0, df=math.inf, source="shared")  # arms served by one server: one launch, nothing to add


def _log(v: Any) -> float | None:
    return math.log(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def logs(values: Mapping[Any, float] | Iterable[float]) -> dict[Any, float]:
    """The positive finite figures, logged, keyed as given (a sequence: by position)."""
    items = values.items() if isinstance(values, Mapping) else enumerate(values)
    out = {}
    for k, v in items:
        x = _log(v)
        if x is not None:
            out[k] = x
    return out


def _two_way(rows: list[list[float]]) -> tuple[float, float, float, float] | None:
    """Cells x launches (balanced), log figures: (MS launches, df, MS residual, df); None when G < 2."""
    g, n = len(rows), len(rows[0])
    if g < 2 or n < 2:
        return None
    grand = sum(map(sum, rows)) / (g * n)
    cm = [sum(r) / n for r in rows]
    lm = [sum(r[j] for r in rows) / g for j in range(n)]
    ss_l = g * sum((x - grand) ** 2 for x in lm)
    ss_e = sum((rows[i][j] - cm[i] - lm[j] + grand) ** 2 for i in range(g) for j in range(n))
    return ss_l / (n - 1), n - 1, ss_e / ((g - 1) * (n - 1)), (g - 1) * (n - 1)


def _balanced(cells: dict[Any, dict[Any, float]]) -> list[list[float]]:
    """The largest cells x launches block every cell of which has every launch (launches present in most
    cells first)."""
    count: dict[Any, int] = {}
    for v in cells.values():
        for launch in v:
            count[launch] = count.get(launch, 0) + 1
    best: list[list[float]] = []
    for k in sorted(set(count.values()), reverse=True):
        keep = sorted(launch for launch, c in count.items() if c >= k)
        rows = [[v[launch] for launch in keep] for v in cells.values() if all(launch in v for launch in keep)]
        if len(keep) >= 2 and len(rows) * len(keep) > sum(map(len, best)):
            best = rows
    return best


def launch_noise(by_cell: Mapping[Any, Mapping[Any, float] | Iterable[float]], source: str = "runs") -> Noise | None:
    """The launch noise of one (arm, metric) from its cells' per-launch figures (cell -> {launch: figure},
    or cell -> [figure per launch]). None when no cell has two launches.

    var: the pooled within-cell variance of the log figures, sum over cells of sum (y - cell mean)^2 over
    sum (n_cell - 1): unbiased for one launch's variance whether or not launches move cells together.
    df: Satterthwaite's, from the two-way decomposition of the largest balanced block (cells x launches):
    var = (MS_launch + (G - 1) MS_resid) / G, so df runs from G (n - 1) (launch effects independent
    across cells) down to n - 1 (one shared launch effect); never more than sum (n_cell - 1)."""
    cells = {k: logs(v) for k, v in by_cell.items()}
    cells = {k: v for k, v in cells.items() if len(v) >= 2}
    if not cells:
        return None
    ss = sum(sum((x - sum(v.values()) / len(v)) ** 2 for x in v.values()) for v in cells.values())
    dof = sum(len(v) - 1 for v in cells.values())
    var = ss / dof
    n = max(len(v) for v in cells.values())
    rows = _balanced(cells)
    tw = _two_way(rows) if rows else None
    if tw is None:
        df = float(n - 1) if len(cells) > 1 else float(dof)  # no block to tell: as if launches were shared
        arm_var, arm_df = (var if len(cells) == 1 else None), (float(dof) if len(cells) == 1 else None)
    else:
        ms_l, df_l, ms_e, df_e = tw
        g = len(rows)
        a, b = ms_l / g, (g - 1) * ms_e / g
        den = a * a / df_l + b * b / df_e
        df = min(float(dof), (a + b) ** 2 / den) if den > 0 else float(dof)
        arm_var, arm_df = ms_l / g, float(df_l)
    return Noise(var=var, df=max(df, 1.0), source=source, cells=len(cells), launches=n, arm_var=arm_var,
                 arm_df=arm_df)


def cell_noise(*figures: Mapping[Any, float] | Iterable[float], source: str = "runs") -> Noise | None:
    """One cell's own launch noise from its per-launch figures on each side (a comparison's two runs, or one
    series): the variance of the log figures about each side's mean, pooled over the sides with two or more
    launches (sum of squares over sum of (n - 1)), with those df. None when no side has two launches (the
    caller falls back to a pool: a calibration's, `launch_noise`). The module docstring says why not the pool."""
    sides = [list(logs(f).values()) for f in figures]
    sides = [x for x in sides if len(x) >= 2]
    if not sides:
        return None
    ss = sum(sum((v - sum(x) / len(x)) ** 2 for v in x) for x in sides)
    dof = sum(len(x) - 1 for x in sides)
    return Noise(var=ss / dof, df=float(dof), source=source, cells=1, launches=max(map(len, sides)))


def _q(p: float, df: float) -> float:
    return float(sps.norm.ppf(p) if math.isinf(df) else sps.t.ppf(p, df))


def _sf(x: float, df: float) -> float:
    return float(sps.norm.sf(x) if math.isinf(df) else sps.t.sf(x, df))


@dataclass(frozen=True)
class Comparison:
    """B against A on the log scale: d = mean log B - mean log A, its standard error and df, the ratio
    exp(d) with its (1 - alpha) CI, and the two-sided p-value of d = 0."""

    d: float
    se: float
    df: float
    ratio: float
    low: float
    high: float
    p: float
    n_a: int
    n_b: int
    source: str

    @property
    def delta_pct(self) -> float:
        return 100.0 * math.expm1(self.d)

    @property
    def low_pct(self) -> float:
        return 100.0 * (self.low - 1)

    @property
    def high_pct(self) -> float:
        return 100.0 * (self.high - 1)


def _welch_df(va: float, dfa: float, vb: float, dfb: float) -> float:
    den = (va * va / dfa if not math.isinf(dfa) else 0.0) + (vb * vb / dfb if not math.isinf(dfb) else 0.0)
    return (va + vb) ** 2 / den if den > 0 else math.inf


def compare(a: Iterable[float] | Mapping, b: Iterable[float] | Mapping, noise_a: Noise, noise_b: Noise | None = None,
            alpha: float = ALPHA, machine: "MachineVar | None" = None) -> Comparison | None:
    """B against A from per-launch figures (a, b) and the launch noise of each side (noise_b defaults to
    noise_a: one variance for both, e.g. a calibration's or the side that has launches). None when a side
    has no figure.

    machine: the sides ran on different machines. Each side's mean then carries its machine's effect, which
    more launches on the same machine do not average away: se^2 = var_a / n_a + var_b / n_b + 2 machine.var,
    the df by Satterthwaite with the machine variance's own df (a prior's: inf)."""
    la, lb = list(logs(a).values()), list(logs(b).values())
    if not la or not lb:
        return None
    noise_b = noise_b or noise_a
    va, vb = noise_a.var / len(la), noise_b.var / len(lb)
    d = sum(lb) / len(lb) - sum(la) / len(la)
    se = math.sqrt(va + vb)
    df = noise_a.df if noise_b is noise_a else _welch_df(va, noise_a.df, vb, noise_b.df)
    source = _source(noise_a, noise_b)
    if machine is not None and machine.var > 0:
        vm = 2 * machine.var
        df = _welch_many([va + vb, vm], [df, machine.df])
        se = math.sqrt(va + vb + vm)
        source = f"{source} + {machine.text()}"
    return _comparison(d, se, df, len(la), len(lb), source, alpha)


@dataclass(frozen=True)
class MachineVar:
    """The between-machine variance of one metric on the log scale (a machine's effect, shared by every launch
    on it), with its df (inf for a prior taken as known) and where it came from (the committed cross-machine
    A/A pairs, or the default prior MACHINE_PRIOR_CV)."""

    var: float
    df: float = math.inf
    source: str = "default"

    @property
    def cv(self) -> float:
        return math.sqrt(math.expm1(self.var))

    def text(self) -> str:
        return f"machine level CV {self.cv:.0%} ({self.source})"


# The between-machine CV assumed per metric family when no committed cross-machine A/A pairs show it
# (conservative: the replay on another machine in issue 42 moved every cell alike, TTFT -21 % [-34, -5] and
# TPOT -13 %; the H200 tune's confirmation saw 15-24 % between machines). A difference between two machines
# varies by sqrt(2) times this CV.
MACHINE_PRIOR_CV = {"ttft": 0.15, "tpot": 0.10, "itl": 0.10, "e2e": 0.10, "throughput": 0.10}
MACHINE_PRIOR_SOURCE = ("default prior (issue 42: a replay on another machine moved TTFT -21 %, TPOT -13 %; "
                        "no committed cross-machine A/A pairs)")


def machine_prior(metric: str) -> MachineVar:
    """The default between-machine variance of a metric (MACHINE_PRIOR_CV by the metric's family: TTFT for
    names starting with ttft, else 10 %)."""
    cv = MACHINE_PRIOR_CV["ttft"] if metric.startswith("ttft") else MACHINE_PRIOR_CV["tpot"]
    return MachineVar(var=math.log1p(cv * cv), df=math.inf, source=MACHINE_PRIOR_SOURCE)


def machine_var_from_pairs(pairs: list[tuple[float, float]]) -> MachineVar | None:
    """The between-machine variance from A/A pairs across machines. Each pair is (d, se2): d the log ratio of
    the two machines' means of one arm and metric, se2 = var_a / n_a + var_b / n_b what launch noise alone
    gives it. E[d^2] = 2 machine_var + se2, so the moment estimate is max(0, mean(d^2 - se2) / 2), with one df
    per pair. None without pairs."""
    if not pairs:
        return None
    v = sum(d * d - se2 for d, se2 in pairs) / len(pairs) / 2
    return MachineVar(var=max(0.0, v), df=float(len(pairs)), source=f"{len(pairs)} cross-machine A/A pair(s)")


def _source(na: Noise, nb: Noise) -> str:
    return na.source if na.source == nb.source else f"{na.source} / {nb.source}"


def _comparison(d: float, se: float, df: float, n_a: int, n_b: int, source: str, alpha: float) -> Comparison:
    q = _q(1 - alpha / 2, df)
    p = 2 * _sf(abs(d) / se, df) if se > 0 else (1.0 if d == 0 else 0.0)
    return Comparison(d=d, se=se, df=df, ratio=math.exp(d), low=math.exp(d - q * se), high=math.exp(d + q * se),
                      p=min(1.0, p), n_a=n_a, n_b=n_b, source=source)


def combine(parts: list[tuple[Comparison, float]], alpha: float = ALPHA) -> Comparison | None:
    """A weighted mean of independent comparisons (weights normalised; e.g. arms, each with its own
    launches), its se and Satterthwaite df: the geometric mean of their ratios with a CI."""
    parts = [(c, w) for c, w in parts if c is not None and w > 0]
    if not parts:
        return None
    total = sum(w for _, w in parts)
    d = sum(c.d * w for c, w in parts) / total
    vs = [((w / total) * c.se) ** 2 for c, w in parts]
    df = _welch_many(vs, [c.df for c, _ in parts])
    sources = sorted({c.source for c, _ in parts})
    return _comparison(d, math.sqrt(sum(vs)), df, sum(c.n_a for c, _ in parts), sum(c.n_b for c, _ in parts),
                       " / ".join(sources), alpha)


def _welch_many(vs: list[float], dfs: list[float]) -> float:
    den = sum(v * v / df for v, df in zip(vs, dfs) if not math.isinf(df))
    return sum(vs) ** 2 / den if den > 0 else math.inf


def tost_p(c: Comparison, margin_pct: float) -> float:
    """Two one-sided tests of equivalence within +-margin (on the log scale: |d| < log(1 + margin)): the
    larger of the two p-values; below alpha, B is within the margin of A with confidence 1 - alpha
    (the (1 - 2 alpha) CI lies inside the margin)."""
    m = math.log1p(margin_pct / 100.0)
    if c.se == 0:
        return 0.0 if abs(c.d) < m else 1.0
    return max(_sf((c.d + m) / c.se, c.df), _sf((m - c.d) / c.se, c.df))


def exceeds_p(c: Comparison, margin_pct: float, direction: int) -> float:
    """One-sided p-value of a change beyond the margin in one direction (+1: up, -1: down), on the log scale:
    H0 direction * d <= log(1 + margin). Below alpha, B is more than the margin above (below: 1 / (1 + margin)
    times) A with confidence 1 - alpha (the gate of `results diff --fail-on-regression`)."""
    m, x = math.log1p(margin_pct / 100.0), direction * c.d
    if c.se == 0:
        return 0.0 if x > m else 1.0
    return _sf((x - m) / c.se, c.df)


def beyond_p(c: Comparison, margin_pct: float) -> float:
    """One-sided p-value of a change beyond the margin in the direction observed (H0: |d| <= log(1 + m))."""
    return exceeds_p(c, margin_pct, 1 if c.d >= 0 else -1)


def beyond_margin(delta_pct: float, margin_pct: float) -> bool:
    """Is a change (percent) beyond +-margin on the scale every test uses, the log ratio: |log(1 + delta)| >
    log(1 + margin), i.e. a ratio above 1 + margin or below 1 / (1 + margin)?"""
    return delta_pct <= -100 or abs(math.log1p(delta_pct / 100.0)) > math.log1p(margin_pct / 100.0)


def from_delta(delta_pct: float, se: float, df: float | None) -> Comparison:
    """A comparison rebuilt from a change in percent and the se and df of its log ratio (what a diff keeps), for
    the margin tests above."""
    d = math.log1p(delta_pct / 100.0)
    return Comparison(d=d, se=se, df=math.inf if df is None else df, ratio=math.exp(d), low=0.0, high=0.0, p=1.0,
                      n_a=0, n_b=0, source="")


def interval(values: Iterable[float] | Mapping, noise: Noise, alpha: float = ALPHA) -> tuple[float, float, float] | None:
    """The geometric mean of per-launch (or per-round) figures with its (1 - alpha) t-interval, the
    variance taken from `noise` (the cell's own, `cell_noise`, where it has launches): (centre, low, high)."""
    xs = list(logs(values).values())
    if not xs:
        return None
    m = sum(xs) / len(xs)
    h = _q(1 - alpha / 2, noise.df) * math.sqrt(noise.var / len(xs))
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def widen(ratio: float, low: float, high: float, noise_a: Noise, noise_b: Noise,
          alpha: float = ALPHA) -> tuple[float, float, str]:
    """A request-bootstrap CI of the ratio of two single launches (arm over baseline, one server each), widened
    by both launches' noise: se^2 = se_bootstrap^2 + var_a + var_b on the log scale. Returns (low, high, how)."""
    if noise_a.var == 0 and noise_b.var == 0:
        return low, high, "one round on one shared server (one launch for both arms): paired bootstrap over the requests"
    z = _q(1 - alpha / 2, math.inf)
    se_boot = (math.log(high) - math.log(low)) / (2 * z)
    vs = [se_boot ** 2, noise_a.var, noise_b.var]
    df = _welch_many(vs, [math.inf, noise_a.df, noise_b.df])
    h = _q(1 - alpha / 2, df) * math.sqrt(sum(vs))
    if noise_a.source == noise_b.source == "default":
        how = f"the default launch CV {noise_a.cv:.0%} per server (no launch noise measured)"
    else:
        how = noise_a.text() if noise_a == noise_b else f"{noise_a.text()}; baseline {noise_b.text()}"
    return (ratio * math.exp(-h), ratio * math.exp(h),
            f"one round: paired bootstrap over the requests widened by the launch noise of both servers ({how})")


def power(noise: Noise, n_a: int, n_b: int | None = None, change_pct: float = 10.0, df: float | None = None,
          alpha: float = ALPHA, machine_var: float = 0.0) -> float:
    """The probability that the two-sided t-test of the log ratio (`compare`) finds a true change of change_pct
    (either direction) with n_a against n_b launches, launch variance noise.var, at level alpha.

    Exact under normal launch effects: the statistic d / se is noncentral t with df degrees of freedom and
    noncentrality delta / se, where delta = log(1 + change_pct / 100) and se^2 = var (1/n_a + 1/n_b) + 2 machine_var
    (machine_var: the between-machine variance of a cross-machine comparison, `with_machine`), so
    power = P(T' > t_{1-alpha/2, df}) + P(T' < -t_{1-alpha/2, df}). df: the test's (default: the cell's own variance
    the run will measure, (n_a - 1) + (n_b - 1), or the noise's own df where that is smaller, e.g. a calibration's
    that a single-launch side borrows)."""
    n_b = n_a if n_b is None else n_b
    if df is None:
        df = float(n_a + n_b - 2) if n_a + n_b > 2 else noise.df
    se = math.sqrt(noise.var * (1 / n_a + 1 / n_b) + 2 * machine_var)
    if se == 0:
        return 1.0
    nc = math.log1p(change_pct / 100.0) / se
    if math.isinf(df):
        q = float(sps.norm.ppf(1 - alpha / 2))
        return float(sps.norm.sf(q - nc) + sps.norm.cdf(-q - nc))
    q = float(sps.t.ppf(1 - alpha / 2, df))
    return float(sps.nct.sf(q, df, nc) + sps.nct.cdf(-q, df, nc))


MAX_LAUNCHES = 64


def launches_needed(noise: Noise, change_pct: float = 10.0, power_goal: float = POWER, alpha: float = ALPHA,
                    machine_var: float = 0.0, most: int = MAX_LAUNCHES) -> int | None:
    """The launches per arm (both sides alike) a comparison needs to find a true change of change_pct with
    probability power_goal at two-sided alpha, on the log-ratio scale of the tests: the smallest n >= 2 with
    power(noise, n, n, change_pct) >= power_goal (the run's cells then test with their own variance, 2 (n - 1)
    df). Roughly n = 2 var (t_{1-alpha/2} + t_{power})^2 / log(1 + change)^2; None when more than `most`
    launches would be needed (or never enough: a machine variance alone exceeds what the change allows)."""
    for n in range(2, most + 1):
        if power(noise, n, n, change_pct, alpha=alpha, machine_var=machine_var) >= power_goal:
            return n
    return None


def requests_per_launch(request_var: float, launch_var: float, share: float = 0.1, most: int = 100_000) -> int:
    """The requests a launch needs so that the sampling noise of its median stays within `share` of the launch
    variance (so more requests would no longer narrow a verdict; more launches would). The median of r
    requests whose log figure has variance request_var varies by (pi / 2) request_var / r (its asymptotic
    variance under a normal shape), so r = ceil((pi / 2) request_var / (share * launch_var))."""
    if launch_var <= 0:
        return most
    return max(1, min(most, math.ceil(math.pi / 2 * request_var / (share * launch_var))))


def with_machine(noise: Noise, machine_var: float, machine_df: float = math.inf, source: str = "") -> Noise:
    """The noise of a launch from a machine drawn at random: launch variance plus the between-machine variance
    (a random machine effect shared by every launch on it). What a comparison of runs on two machines uses
    through `compare(..., machine_var=...)`; this is for single figures and their text."""
    var = noise.var + machine_var
    df = _welch_many([noise.var, machine_var], [noise.df, machine_df]) if machine_var > 0 else noise.df
    return Noise(var=var, df=df, source=f"{noise.source} + {source or 'machine level'}", cells=noise.cells,
                 launches=noise.launches, arm_var=noise.arm_var, arm_df=noise.arm_df)


def mde_pct(noise: Noise, n_a: int, n_b: int | None = None, alpha: float = ALPHA, power: float = POWER,
            machine_var: float = 0.0) -> float:
    """The smallest change (percent, upwards) a comparison of n_a against n_b launches detects with the
    given power at two-sided alpha: exp((t_{1-alpha/2} + t_{power}) * se) - 1, se^2 = var (1/n_a + 1/n_b) (the
    normal-shift approximation of `power`, close to it from 3 launches a side). machine_var: the sides ran on
    different machines: se^2 adds 2 machine_var, the df by Satterthwaite (the machine prior's df: inf)."""
    n_b = n_a if n_b is None else n_b
    v = noise.var * (1 / n_a + 1 / n_b)
    df = _welch_many([v, 2 * machine_var], [noise.df, math.inf]) if machine_var > 0 else noise.df
    k = _q(1 - alpha / 2, df) + _q(power, df)
    return 100.0 * math.expm1(k * math.sqrt(v + 2 * machine_var))


__all__ = ["ALPHA", "POWER", "DEFAULT", "SHARED", "DEFAULT_FLOOR_PCT", "DEFAULT_LAUNCH_CV", "Comparison", "Noise",
           "MACHINE_PRIOR_CV", "MachineVar", "launches_needed", "machine_prior", "machine_var_from_pairs", "power",
           "requests_per_launch", "with_machine",
           "beyond_margin", "beyond_p", "cell_noise", "combine", "compare", "exceeds_p", "floor_pct", "from_delta",
           "interval", "launch_noise", "logs", "mde_pct", "tost_p", "widen"]
