"""Comparisons on the log scale (toolkit/stats/scale.py): B against A from per-launch figures and each side's
launch noise (toolkit/stats/launches.py), their combination, the margin tests, one-sample intervals.

- `compare`: a t-based CI and two-sided test of the log-ratio B/A, se^2 = var_a / n_a + var_b / n_b (+ twice a
  between-machine variance), Welch-Satterthwaite df;
- `combine`: a weighted mean of independent comparisons (a geometric mean of their ratios), Satterthwaite df,
  with a variance every part shares added once (`shared`: a launch that moves all of them);
- `tost_p` (equivalence within a margin: two one-sided tests), `exceeds_p` (one-sided: beyond a margin in a
  given direction), `beyond_p` (beyond a margin in the direction observed), `from_delta` (a comparison rebuilt
  from what a diff keeps);
- `interval`: the geometric mean of per-launch (or per-round) figures with a t-interval; `two_stage_interval`:
  Stein's two-stage interval of a sequential run; `widen`: a request-bootstrap interval of two single launches
  widened by both launches' noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from toolkit.stats.launches import MachineVar, Noise, cell_noise
from toolkit.stats.scale import ALPHA, logs, quantile, satterthwaite, se_of_interval, upper_tail


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


def compare(a: Iterable[float] | Mapping, b: Iterable[float] | Mapping, noise_a: Noise, noise_b: Noise | None = None,
            alpha: float = ALPHA, machine: MachineVar | None = None) -> Comparison | None:
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
    df = noise_a.df if noise_b is noise_a else satterthwaite([va, vb], [noise_a.df, noise_b.df])
    source = _source(noise_a, noise_b)
    if machine is not None and machine.var > 0:
        vm = 2 * machine.var
        df = satterthwaite([va + vb, vm], [df, machine.df])
        se = math.sqrt(va + vb + vm)
        source = f"{source} + {machine.text()}"
    return _comparison(d, se, df, len(la), len(lb), source, alpha)


def _source(na: Noise, nb: Noise) -> str:
    return na.source if na.source == nb.source else f"{na.source} / {nb.source}"


def _comparison(d: float, se: float, df: float, n_a: int, n_b: int, source: str, alpha: float) -> Comparison:
    q = quantile(1 - alpha / 2, df)
    p = 2 * upper_tail(abs(d) / se, df) if se > 0 else (1.0 if d == 0 else 0.0)
    return Comparison(d=d, se=se, df=df, ratio=math.exp(d), low=math.exp(d - q * se), high=math.exp(d + q * se),
                      p=min(1.0, p), n_a=n_a, n_b=n_b, source=source)


def combine(parts: list[tuple[Comparison, float]], alpha: float = ALPHA,
            shared: tuple[float, float] = (0.0, math.inf)) -> Comparison | None:
    """A weighted mean of independent comparisons (weights normalised; e.g. arms, each with its own
    launches, or cells of one trial): d = sum w_i d_i, se^2 = sum (w_i se_i)^2, Satterthwaite df; the geometric
    mean of their ratios with a CI. `shared`: (variance, df) of an effect every part shares (a launch moving all
    cells of it together), added once to se^2, not divided among the parts as their own noise is."""
    parts = [(c, w) for c, w in parts if c is not None and w > 0]
    if not parts:
        return None
    total = sum(w for _, w in parts)
    d = sum(c.d * w for c, w in parts) / total
    vs = [((w / total) * c.se) ** 2 for c, w in parts]
    dfs = [c.df for c, _ in parts]
    if shared[0] > 0:
        vs, dfs = vs + [shared[0]], dfs + [shared[1]]
    df = satterthwaite(vs, dfs)
    sources = sorted({c.source for c, _ in parts})
    return _comparison(d, math.sqrt(sum(vs)), df, sum(c.n_a for c, _ in parts), sum(c.n_b for c, _ in parts),
                       " / ".join(sources), alpha)


def of_interval(ratio: float, low: float | None = None, high: float | None = None, alpha: float = ALPHA) -> Comparison:
    """A ratio with its normal (1 - alpha) interval (e.g. a bootstrap's) as a comparison on the log scale, for
    `combine`: se from the interval's width (scale.se_of_interval), infinite df; no interval: se 0."""
    d = math.log(ratio)
    se = se_of_interval(low, high, alpha) if low and high and low > 0 else 0.0
    return Comparison(d=d, se=se, df=math.inf, ratio=ratio, low=low or 0.0, high=high or 0.0, p=1.0, n_a=0, n_b=0,
                      source="")


def tost_p(c: Comparison, margin_pct: float) -> float:
    """Two one-sided tests of equivalence within +-margin (on the log scale: |d| < log(1 + margin)): the
    larger of the two p-values; below alpha, B is within the margin of A with confidence 1 - alpha
    (the (1 - 2 alpha) CI lies inside the margin)."""
    m = math.log1p(margin_pct / 100.0)
    if c.se == 0:
        return 0.0 if abs(c.d) < m else 1.0
    return max(upper_tail((c.d + m) / c.se, c.df), upper_tail((m - c.d) / c.se, c.df))


def exceeds_p(c: Comparison, margin_pct: float, direction: int) -> float:
    """One-sided p-value of a change beyond the margin in one direction (+1: up, -1: down), on the log scale:
    H0 direction * d <= log(1 + margin). Below alpha, B is more than the margin above (below: 1 / (1 + margin)
    times) A with confidence 1 - alpha (the gate of `results diff --fail-on-regression`)."""
    m, x = math.log1p(margin_pct / 100.0), direction * c.d
    if c.se == 0:
        return 0.0 if x > m else 1.0
    return upper_tail((x - m) / c.se, c.df)


def beyond_p(c: Comparison, margin_pct: float) -> float:
    """One-sided p-value of a change beyond the margin in the direction observed (H0: |d| <= log(1 + m))."""
    return exceeds_p(c, margin_pct, 1 if c.d >= 0 else -1)


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
    h = quantile(1 - alpha / 2, noise.df) * math.sqrt(noise.var / len(xs))
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def widen(ratio: float, low: float, high: float, noise_a: Noise, noise_b: Noise,
          alpha: float = ALPHA) -> tuple[float, float, str]:
    """A request-bootstrap CI of the ratio of two single launches (arm over baseline, one server each), widened
    by both launches' noise: se^2 = se_bootstrap^2 + var_a + var_b on the log scale. Returns (low, high, how)."""
    if noise_a.var == 0 and noise_b.var == 0:
        return low, high, "one round on one shared server (one launch for both arms): paired bootstrap over the requests"
    se_boot = se_of_interval(low, high, alpha)
    vs = [se_boot ** 2, noise_a.var, noise_b.var]
    df = satterthwaite(vs, [math.inf, noise_a.df, noise_b.df])
    h = quantile(1 - alpha / 2, df) * math.sqrt(sum(vs))
    if noise_a.source == noise_b.source == "default":
        how = f"the default launch CV {noise_a.cv:.0%} per server (no launch noise measured)"
    else:
        how = noise_a.text() if noise_a == noise_b else f"{noise_a.text()}; baseline {noise_b.text()}"
    return (ratio * math.exp(-h), ratio * math.exp(h),
            f"one round: paired bootstrap over the requests widened by the launch noise of both servers ({how})")


def stein_interval(values: Mapping, stage1: int, alpha: float = ALPHA) -> tuple[float, float, float, Noise] | None:
    """Stein's two-stage interval of a sequential series ({order: figure}, positive): the geometric mean of every
    figure with its (1 - alpha) t-interval, the variance and df taken from the first `stage1` figures only (in
    key order). A stopping rule that saw only the first stage's variance cannot bias it, so the interval covers
    whatever the stop (the series' own variance over the figures a width rule stopped at does not). Returns
    (centre, low, high, the first stage's Noise); None when the first stage has fewer than two figures."""
    own = cell_noise(dict(sorted(values.items())[:stage1]))
    if own is None:
        return None
    out = interval(values, own, alpha)
    return None if out is None else (*out, own)
