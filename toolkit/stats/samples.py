"""Statistics of per-request samples (one launch's requests), benchstat style.

- Intervals: the median's and any quantile's distribution-free CI from order statistics chosen with the exact
  binomial distribution (`median_ci`, `quantile_ci`); a share's Wilson score interval (`wilson`); a paired
  ratio of sums with a percentile bootstrap over the pairs (`paired_bootstrap_ratio`).
- scipy is imported where a function needs it: the shared types read these intervals, and the load generator,
  which imports them, starts without loading scipy.
- Tests: the two-sided Mann-Whitney U test of two samples (`mann_whitney`, `mwu_asymptotic`); Fisher's exact
  test of two shares (`fisher_p`). With fewer than MIN_SAMPLES on either side no significance is called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_SAMPLES = 10
LEVEL = 0.95
Z95 = 1.959963984540054  # the standard normal's 97.5% point
BOOTSTRAP = 2000


def mann_whitney(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided p-value; None when either side has fewer than MIN_SAMPLES."""
    from scipy import stats as sps

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
    from scipy import stats as sps

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


def fisher_p(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """Two-sided p-value of Fisher's exact test of two shares, k_a of n_a against k_b of n_b (the 2x2 table
    [[k_a, n_a - k_a], [k_b, n_b - k_b]])."""
    from scipy import stats as sps

    return float(sps.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]]).pvalue)


def median_ci(x: np.ndarray, level: float = LEVEL) -> tuple[float | None, float | None]:
    """95% CI of the median: [X(k), X(n-k+1)] (order statistics) with the largest k whose binomial tail
    P(B <= k-1), B ~ Bin(n, 1/2), is at most (1 - level) / 2. None below 6 samples (at 95%). O(n)."""
    from scipy import stats as sps

    n = len(x)
    if n == 0:
        return None, None
    tail = (1 - level) / 2
    m = int(sps.binom.ppf(tail, n, 0.5))  # the smallest m with P(B <= m) >= tail
    if sps.binom.cdf(m, n, 0.5) > tail:
        m -= 1
    if m < 0:
        return None, None
    part = np.partition(x, [m, n - 1 - m])
    return float(part[m]), float(part[n - 1 - m])


def quantile_ci(x: np.ndarray, q: float, level: float = LEVEL) -> tuple[float | None, float | None]:
    """95% CI of the q-quantile (0 < q < 1), distribution-free like median_ci: [X(l), X(u)] (1-based order
    statistics), l the largest with P(B <= l-1) <= tail and u the smallest with P(B >= u) <= tail, B ~ Bin(n, q).
    None where the sample is too small for such an interval (a p90 needs n >= 36, a p99 n >= 368)."""
    from scipy import stats as sps

    n = len(x)
    if n == 0:
        return None, None
    tail = (1 - level) / 2
    k = int(sps.binom.ppf(tail, n, q))  # the smallest k with P(B <= k) >= tail
    lo = k + 1 if sps.binom.cdf(k, n, q) <= tail else k  # 1-based
    hi = int(sps.binom.ppf(1 - tail, n, q)) + 1
    if lo < 1 or hi > n:
        return None, None
    part = np.partition(np.asarray(x, dtype=np.float64), [lo - 1, hi - 1])
    return float(part[lo - 1]), float(part[hi - 1])


def wilson(k: int, n: int) -> tuple[float | None, float | None]:
    """95% Wilson score interval of a share k / n: inside [0, 1] and sensible at 0 or n successes (where the
    textbook p +- z*se interval collapses to a point). None for n = 0."""
    if n <= 0:
        return None, None
    p, z2 = k / n, Z95 * Z95
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(tokens: np.ndarray, e2e_ms: np.ndarray) -> float:
    """Output tokens per second over a set of requests: sum of tokens / sum of end-to-end seconds."""
    total = e2e_ms.sum()
    return float(tokens.sum() / (total / 1000.0)) if total > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class PairedRatio:
    """One cell's paired ratio of output rates, arm over baseline, over the prompts both completed (`n_pairs`),
    with its 95 % CI (None where there are too few pairs): what the speed-ups (toolkit/results/speedups.py) and
    tune's scores read. `rounds`: the launch rounds it pairs; `ci_method`: how the CI was made (None: the request
    bootstrap alone, paired_bootstrap_ratio's)."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    n_pairs: int
    rounds: int = 1
    ci_method: str | None = None


def paired_bootstrap_ratio(ta: np.ndarray, ea: np.ndarray, tb: np.ndarray, eb: np.ndarray, seed: int = 0,
                           resamples: int = BOOTSTRAP) -> tuple[float, float, float]:
    """The ratio of two arms' output rates over the same n pairs (sum of tokens / sum of end-to-end seconds, arm
    a over arm b), with a 95 % percentile bootstrap CI: `resamples` draws of n pair indices with replacement
    (numpy's default_rng(seed): deterministic), the 2.5th and 97.5th percentiles of the resampled ratios.
    Returns (point, low, high)."""
    n = len(ta)
    point = rate(ta, ea) / rate(tb, eb)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    ra = ta[idx].sum(1) / (ea[idx].sum(1) / 1000.0)
    rb = tb[idx].sum(1) / (eb[idx].sum(1) / 1000.0)
    lo, hi = np.percentile(ra / rb, [2.5, 97.5])
    return point, float(lo), float(hi)
