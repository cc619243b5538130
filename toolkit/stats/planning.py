"""Power before spending: the probability a planned comparison (toolkit/stats/comparisons.py `compare`, the two-sided
t-test of the log ratio) finds a given change, the launches and requests it needs, and the smallest change it
detects (minimum detectable effect).
"""

from __future__ import annotations

import math

from scipy import stats as sps

from toolkit.stats.launches import Noise
from toolkit.stats.scale import ALPHA, POWER, quantile, satterthwaite


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
        q = quantile(1 - alpha / 2)
        return float(sps.norm.sf(q - nc) + sps.norm.cdf(-q - nc))
    q = quantile(1 - alpha / 2, df)
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


def mde_pct(noise: Noise, n_a: int, n_b: int | None = None, alpha: float = ALPHA, power: float = POWER,
            machine_var: float = 0.0) -> float:
    """The smallest change (percent, upwards) a comparison of n_a against n_b launches detects with the
    given power at two-sided alpha: exp((t_{1-alpha/2} + t_{power}) * se) - 1, se^2 = var (1/n_a + 1/n_b) (the
    normal-shift approximation of `power`, close to it from 3 launches a side). machine_var: the sides ran on
    different machines: se^2 adds 2 machine_var, the df by Satterthwaite (the machine prior's df: inf)."""
    n_b = n_a if n_b is None else n_b
    v = noise.var * (1 / n_a + 1 / n_b)
    df = satterthwaite([v, 2 * machine_var], [noise.df, math.inf]) if machine_var > 0 else noise.df
    k = quantile(1 - alpha / 2, df) + quantile(power, df)
    return 100.0 * math.expm1(k * math.sqrt(v + 2 * machine_var))
