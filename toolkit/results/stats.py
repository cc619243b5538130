"""Statistics for comparing two samples of per-request figures, benchstat style.

- The centre is the median; its 95% confidence interval comes from order statistics (distribution-free,
  exact for any continuous distribution, no resampling: fast on millions of requests).
- The test is the two-sided Mann-Whitney U test (scipy) on the per-request samples.
- With fewer than MIN_SAMPLES on either side no significance is called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
MIN_SAMPLES = 10
Z95 = 1.959963984540054


@dataclass
class Centre:
    median: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


def clean(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x[np.isfinite(x)]


def median_ci(x: np.ndarray) -> Centre:
    """Median with its 95% CI: the order statistics at n/2 -+ 1.96*sqrt(n)/2 (binomial argument)."""
    n = len(x)
    if n == 0:
        return Centre(None, None, None, 0)
    half = Z95 * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)), 0)
    hi = min(int(math.ceil(n / 2 + half)), n - 1)
    mid_lo, mid_hi = (n - 1) // 2, n // 2
    kth = sorted({lo, hi, mid_lo, mid_hi})
    part = np.partition(x, kth)
    return Centre(float((part[mid_lo] + part[mid_hi]) / 2), float(part[lo]), float(part[hi]), n)


def mann_whitney(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided p-value; None when either side has fewer than MIN_SAMPLES."""
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return None
    if np.all(a == a[0]) and np.all(b == b[0]) and a[0] == b[0]:
        return 1.0  # identical constants: no evidence of a difference
    method = "asymptotic" if len(a) + len(b) > 40 else "auto"
    return float(sps.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def delta_pct(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a == 0:
        return None
    return (b - a) / abs(a) * 100.0


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))
