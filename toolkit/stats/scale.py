"""The scale every test and interval works on, and the distributions they read: log ratios.

A change is a ratio B / A and a spread a coefficient of variation, both on the log scale: d = log B - log A,
a change in percent 100 (e^d - 1), "within +-X %" a ratio between 1 / (1 + X) and 1 + X. Quantiles and tail
probabilities are Student's t with df degrees of freedom, the standard normal where df is infinite (a variance
taken as known). Satterthwaite's df of a sum of independent variance estimates (`satterthwaite`)."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from scipy import stats as sps

ALPHA = 0.05
POWER = 0.80


def quantile(p: float, df: float = math.inf) -> float:
    """The p-quantile of Student's t with df degrees of freedom (df infinite: the standard normal)."""
    return float(sps.norm.ppf(p) if math.isinf(df) else sps.t.ppf(p, df))


def upper_tail(x: float, df: float = math.inf) -> float:
    """P(T > x) for Student's t with df degrees of freedom (df infinite: the standard normal)."""
    return float(sps.norm.sf(x) if math.isinf(df) else sps.t.sf(x, df))


def satterthwaite(vs: list[float], dfs: list[float]) -> float:
    """Welch-Satterthwaite df of a sum of independent variance estimates v_i with df_i each:
    (sum v_i)^2 / sum (v_i^2 / df_i); a term with infinite df (a variance taken as known) adds nothing to the
    denominator; inf when every term is known."""
    den = sum(v * v / df for v, df in zip(vs, dfs) if not math.isinf(df))
    return sum(vs) ** 2 / den if den > 0 else math.inf


def cv_of_var(var: float) -> float:
    """The coefficient of variation of a log-normal figure whose log has variance var: sqrt(e^var - 1)."""
    return math.sqrt(math.expm1(var))


def var_of_cv(cv: float) -> float:
    """The variance of the log of a log-normal figure with coefficient of variation cv: log(1 + cv^2)."""
    return math.log1p(cv * cv)


def _log(v: Any) -> float | None:
    return math.log(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def logs(values: Mapping[Any, float] | Iterable[float]) -> dict[Any, float]:  # data-keyed: the input's own keys
    """The positive finite figures, logged, keyed as given (a sequence: by position)."""
    items = values.items() if isinstance(values, Mapping) else enumerate(values)
    out = {}
    for k, v in items:
        x = _log(v)
        if x is not None:
            out[k] = x
    return out


def delta_pct(a: float | None, b: float | None) -> float | None:
    """The change from a to b in percent of |a|; None when either is missing or not finite, or a is 0."""
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a == 0:
        return None
    return (b - a) / abs(a) * 100.0


def log_of_pct(pct: float) -> float:
    """A change in percent as a log ratio: log(1 + pct / 100) (pct > -100)."""
    return math.log1p(pct / 100.0)


def pct_of_log(d: float) -> float:
    """A log ratio as a change in percent: 100 (e^d - 1)."""
    return 100.0 * math.expm1(d)


def geomean_of_logs(xs: list[float]) -> float:
    """The geometric mean of figures given by their logs: exp(mean of xs) (xs not empty)."""
    return math.exp(sum(xs) / len(xs))


def geomean(values: list[float]) -> float | None:
    """The geometric mean of the positive finite values, exp(mean log); None when there are none."""
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not vals:
        return None
    return float(geomean_of_logs([math.log(v) for v in vals]))


def floor_pct(cv: float, alpha: float = ALPHA) -> float:
    """The change two single launches stay within with probability 1 - alpha when the launch CV is cv:
    exp(z * sqrt(2) * cv) - 1, in percent (the noise floor of a one-launch-a-side comparison)."""
    return 100.0 * (math.exp(sps.norm.ppf(1 - alpha / 2) * math.sqrt(2) * cv) - 1)


def beyond_margin(delta_pct: float, margin_pct: float) -> bool:
    """Is a change (percent) beyond +-margin on the scale every test uses, the log ratio: |log(1 + delta)| >
    log(1 + margin), i.e. a ratio above 1 + margin or below 1 / (1 + margin)?"""
    return delta_pct <= -100 or abs(math.log1p(delta_pct / 100.0)) > math.log1p(margin_pct / 100.0)


def se_of_interval(low: float, high: float, alpha: float = ALPHA) -> float:
    """The standard error on the log scale that a normal (1 - alpha) interval [low, high] of a ratio implies:
    (log high - log low) / (2 z_{1-alpha/2}) (e.g. a percentile bootstrap's, read as normal on the log scale)."""
    return (math.log(high) - math.log(low)) / (2 * quantile(1 - alpha / 2))


def error_interval(pred: float, pred_low: float | None, pred_high: float | None, meas: float,
                   meas_low: float | None, meas_high: float | None) -> tuple[float, float] | None:
    """The error predicted / measured - 1 as a fraction, its interval (lo, hi) at the two intervals' level: on
    the log scale, the half-widths of the predicted interval and of the measured CI added in quadrature around
    ln(pred / meas) (independent estimates of one level). None when either interval is missing or not
    positive."""
    vals = (pred, pred_low, pred_high, meas, meas_low, meas_high)
    if any(v is None or not v > 0 for v in vals):
        return None
    h = math.hypot((math.log(pred_high) - math.log(pred_low)) / 2, (math.log(meas_high) - math.log(meas_low)) / 2)
    e = math.log(pred / meas)
    return math.exp(e - h) - 1, math.exp(e + h) - 1
