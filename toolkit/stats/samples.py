"""Statistics for comparing two samples of per-request figures, benchstat style.

- The centre is the median, with the registry's 95% CI (toolkit/schema/metrics.py: order statistics,
  exact binomial; the same interval `results show` prints).
- The test is the two-sided Mann-Whitney U test on the per-request samples.
- With fewer than MIN_SAMPLES on either side no significance is called.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
MIN_SAMPLES = 10


def mann_whitney(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided p-value; None when either side has fewer than MIN_SAMPLES."""
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return None
    if np.all(a == a[0]) and np.all(b == b[0]) and a[0] == b[0]:
        return 1.0  # identical constants: no evidence of a difference
    if len(a) + len(b) <= 40:  # small: scipy picks the exact distribution when there are no ties
        return float(sps.mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)
    return mwu_asymptotic(a, b)


def _sort_keys(x: np.ndarray, label: int) -> np.ndarray:
    """float32 values as order-preserving unsigned integers, shifted left one bit to carry a label."""
    x = np.asarray(x, dtype=np.float32) + np.float32(0.0)  # -0.0 becomes 0.0: equal values, equal keys
    bits = x.view(np.uint32).astype(np.uint64)
    neg = (bits >> np.uint64(31)).astype(bool)
    bits = np.where(neg, bits ^ np.uint64(0xFFFFFFFF), bits | np.uint64(0x80000000))
    return (bits << np.uint64(1)) | np.uint64(label)


def mwu_asymptotic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value, normal approximation with tie and continuity correction: the
    number scipy's `method="asymptotic"` gives, from one integer sort of (value, sample) keys instead of
    an argsort-based ranking. Values are compared as float32 (what the archive stores)."""
    n1, n2 = len(a), len(b)
    n = n1 + n2
    keys = np.sort(np.concatenate([_sort_keys(a, 0), _sort_keys(b, 1)]))
    vals, is_b = keys >> np.uint64(1), (keys & np.uint64(1)).astype(bool)
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(vals[1:], vals[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], n)
    mid = (starts + ends + 1) / 2.0  # the mid-rank (1-based) of each tie group
    group = np.cumsum(new) - 1
    r1 = float(mid[group[~is_b]].sum())
    u1 = r1 - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    t = (ends - starts).astype(np.float64)
    ties = float((t ** 3 - t).sum())
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / sigma
    return float(min(1.0, 2 * sps.norm.sf(z)))


def delta_pct(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a == 0:
        return None
    return (b - a) / abs(a) * 100.0


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))
