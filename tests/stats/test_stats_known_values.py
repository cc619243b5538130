"""toolkit.stats against known values: scipy's own tests and distributions, and textbook examples (worked by
hand in the comments). Each function of the package is pinned here to a figure it did not compute itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from toolkit import stats as st


def test_quantiles_and_tails_are_students_t_and_the_normal() -> None:
    assert st.quantile(0.975) == pytest.approx(1.959963984540054, abs=1e-15)
    assert st.quantile(0.975, 4) == pytest.approx(2.7764451051977987, abs=1e-12)  # the t table's 2.776
    assert st.quantile(0.975, 10) == pytest.approx(2.228138852, abs=1e-9)  # the t table: 2.228
    assert st.upper_tail(2.228138852, 10) == pytest.approx(0.025, abs=1e-9)
    assert st.upper_tail(1.6448536269514722) == pytest.approx(0.05, abs=1e-12)


def test_satterthwaite_is_welchs_df() -> None:
    # textbook: v1 = 1 (df 9), v2 = 4 (df 19): 25 / (1/9 + 16/19) = 26.1699...
    assert st.satterthwaite([1.0, 4.0], [9, 19]) == pytest.approx(25 / (1 / 9 + 16 / 19), rel=1e-12)
    assert st.satterthwaite([1.0, 4.0], [math.inf, math.inf]) == math.inf  # known variances: the normal
    assert st.satterthwaite([2.0, 3.0], [math.inf, 4]) == pytest.approx(25 / (9 / 4), rel=1e-12)


def _lognormal(seed: int, n: int, mu: float, sd: float) -> list[float]:
    return list(np.random.default_rng(seed).lognormal(mu, sd, n))


def test_compare_with_each_sides_variance_is_welchs_t_test_on_the_logs() -> None:
    a, b = _lognormal(1, 5, 0.0, 0.1), _lognormal(2, 7, 0.15, 0.3)
    la, lb = np.log(a), np.log(b)
    na = st.Noise(var=float(np.var(la, ddof=1)), df=len(a) - 1)
    nb = st.Noise(var=float(np.var(lb, ddof=1)), df=len(b) - 1)
    c = st.compare(a, b, na, nb)
    ref = sps.ttest_ind(lb, la, equal_var=False)
    assert c.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert c.d / c.se == pytest.approx(ref.statistic, rel=1e-12)
    assert c.delta_pct == pytest.approx(100 * (math.exp(lb.mean() - la.mean()) - 1), rel=1e-12)


def test_compare_with_the_cells_own_variance_is_students_pooled_t_test() -> None:
    a, b = _lognormal(3, 3, 0.0, 0.1), _lognormal(4, 3, 0.1, 0.1)
    own = st.cell_noise(a, b)
    assert own.df == 4
    c = st.compare(a, b, own, own)
    ref = sps.ttest_ind(np.log(b), np.log(a), equal_var=True)
    assert c.p == pytest.approx(ref.pvalue, rel=1e-10)
    lo, hi = ref.confidence_interval(0.95)
    assert (math.log(c.low), math.log(c.high)) == pytest.approx((lo, hi), rel=1e-10)


def test_interval_is_the_t_interval_of_the_logs() -> None:
    x = _lognormal(5, 6, 0.3, 0.2)
    lx = np.log(x)
    centre, low, high = st.interval(x, st.cell_noise(x))
    lo, hi = sps.t.interval(0.95, len(x) - 1, loc=lx.mean(), scale=sps.sem(lx))
    assert (math.log(centre), math.log(low), math.log(high)) == pytest.approx((lx.mean(), lo, hi), rel=1e-12)


def test_stein_interval_takes_its_variance_from_the_first_stage_only() -> None:
    x = dict(enumerate(_lognormal(6, 8, 0.0, 0.2)))
    lx = np.log(list(x.values()))
    centre, low, high, first = st.stein_interval(x, 3)
    s2 = float(np.var(lx[:3], ddof=1))
    h = sps.t.ppf(0.975, 2) * math.sqrt(s2 / 8)
    assert first.df == 2 and first.var == pytest.approx(s2, rel=1e-12)
    assert (math.log(low), math.log(high)) == pytest.approx((lx.mean() - h, lx.mean() + h), rel=1e-12)
    assert st.stein_interval({0: 1.0, 1: 2.0}, 1) is None  # one first-stage figure: no variance


def test_tost_is_the_90_interval_inside_the_margin() -> None:
    """TOST at alpha is 5 % exactly when the (1 - 2 alpha) interval's nearer edge touches the margin."""
    c = st.from_delta(2.0, 0.03, 6)
    q = sps.t.ppf(0.95, 6)
    edge = math.exp(c.d + q * c.se) - 1  # the 90 % interval's upper edge, as a margin in percent
    assert st.tost_p(c, 100 * edge) == pytest.approx(0.05, rel=1e-9)
    assert st.tost_p(c, 100 * edge * 1.5) < 0.05 < st.tost_p(c, 100 * edge * 0.8)


def test_one_sided_margin_tests() -> None:
    c = st.from_delta(20.0, 0.05, 8)
    m = 5.0
    ref = sps.t.sf((math.log1p(0.20) - math.log1p(0.05)) / 0.05, 8)
    assert st.exceeds_p(c, m, +1) == pytest.approx(ref, rel=1e-12)
    assert st.beyond_p(c, m) == st.exceeds_p(c, m, +1)
    assert st.exceeds_p(c, m, -1) > 0.999
    assert st.beyond_margin(10.0, 10.0) is False and st.beyond_margin(-10.0, 10.0) is True  # -10 % < 1/1.1


def test_holm_textbook() -> None:
    # p = .01 .04 .03 .005 -> sorted .005 .01 .03 .04 times 4 3 2 1 = .02 .03 .06 .04 -> monotone .02 .03 .06 .06
    assert st.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # a test repeating member 0 is adjusted in its place and adds no member: the family stays of size 2
    assert st.holm([0.01, 0.02, 0.012], [None, None, 0]) == pytest.approx([0.02, 0.02, 0.024])


def test_mann_whitney_and_fisher_are_scipys() -> None:
    rng = np.random.default_rng(7)
    a, b = np.round(rng.normal(10, 2, 60), 1), np.round(rng.normal(10.8, 2, 70), 1)  # ties
    ref = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
    assert st.mwu_asymptotic(a, b) == pytest.approx(ref, rel=1e-9)
    assert st.mann_whitney(a[:5], b) is None  # below MIN_SAMPLES
    assert st.fisher_p(3, 4, 1, 4) == pytest.approx(0.4857142857142857, rel=1e-12)  # the lady tasting tea


def test_order_statistic_and_wilson_intervals() -> None:
    x = np.arange(1.0, 13.0)  # n = 12: P(B <= 2) = 0.0193 <= 0.025 < P(B <= 3): [X(3), X(10)]
    assert st.median_ci(x) == (3.0, 10.0)
    assert st.quantile_ci(x, 0.5) == st.median_ci(x)
    assert st.wilson(5, 10) == pytest.approx(tuple(sps.binomtest(5, 10).proportion_ci(method="wilson")), abs=1e-12)
    # textbook: 81 of 263 -> Wilson 95 % [0.2553, 0.3662]
    assert st.wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)


def test_combine_and_of_interval() -> None:
    s = 0.05
    one = st.of_interval(1.2, 1.2 * math.exp(-1.959963984540054 * s), 1.2 * math.exp(1.959963984540054 * s))
    assert one.se == pytest.approx(s, rel=1e-12) and one.df == math.inf
    two = st.of_interval(0.9, 0.9 * math.exp(-1.959963984540054 * 2 * s), 0.9 * math.exp(1.959963984540054 * 2 * s))
    c = st.combine([(one, 1), (two, 1)], shared=(0.01, math.inf))
    se = math.sqrt((s * s + 4 * s * s) / 4 + 0.01)  # independent cells' noise divided, the shared variance once
    assert c.ratio == pytest.approx(math.sqrt(1.2 * 0.9), rel=1e-12) and c.se == pytest.approx(se, rel=1e-12)
    assert math.log(c.high / c.ratio) == pytest.approx(1.959963984540054 * se, rel=1e-12)
    assert st.of_interval(1.1).se == 0.0  # no interval: no noise of its own


def test_geomean_scale_and_floor() -> None:
    assert st.geomean([1.0, 4.0, 16.0]) == pytest.approx(4.0, rel=1e-12)
    assert st.geomean([0.0, -1.0]) is None
    assert st.delta_pct(2.0, 3.0) == 50.0
    assert st.pct_of_log(st.log_of_pct(12.5)) == pytest.approx(12.5, rel=1e-12)
    assert st.cv_of_var(math.log1p(0.01)) == pytest.approx(0.10, rel=1e-12)
    assert st.floor_pct(0.10) == pytest.approx(100 * (math.exp(1.959963984540054 * math.sqrt(2) * 0.1) - 1))
    assert st.DEFAULT_FLOOR_PCT == 32
    assert st.se_of_interval(math.exp(-1.959963984540054), math.exp(1.959963984540054)) == pytest.approx(1.0)


def test_launch_noise_df_runs_from_independent_to_one_shared_effect() -> None:
    """Satterthwaite's df of the pooled launch variance: G (n - 1) when launch effects are independent across
    cells, n - 1 when one launch effect moves every cell alike."""
    shared = [1.0, 1.3, 0.8, 1.1]
    same = st.launch_noise({c: [v * (1 + c) for v in shared] for c in range(3)})
    assert same.df == pytest.approx(3.0) and same.var == pytest.approx(float(np.var(np.log(shared), ddof=1)))
    rng = np.random.default_rng(11)
    indep = st.launch_noise({c: list(rng.lognormal(0, 0.1, 4)) for c in range(3)})
    assert 3.0 < indep.df <= 9.0


def test_power_and_mde_at_known_values() -> None:
    """With a known variance (df inf), the MDE at 80 % power is (z_.975 + z_.8) se: power there is 0.80."""
    n = st.Noise(var=0.01, df=math.inf)
    mde = st.mde_pct(n, 3)
    se = math.sqrt(0.01 * 2 / 3)
    assert mde == pytest.approx(100 * math.expm1((1.959963984540054 + 0.8416212335729143) * se), rel=1e-12)
    assert st.power(n, 3, change_pct=mde, df=math.inf) == pytest.approx(0.80, abs=1e-4)
    # noncentral t: power of a 2-sided t-test with df 4, noncentrality 3 (scipy's nct)
    nc_noise = st.Noise(var=1.0, df=4)
    p = st.power(nc_noise, 2, 2, change_pct=100 * math.expm1(3.0), df=4)
    q = sps.t.ppf(0.975, 4)
    assert p == pytest.approx(sps.nct.sf(q, 4, 3.0) + sps.nct.cdf(-q, 4, 3.0), rel=1e-12)
    assert st.launches_needed(n, 10.0) is not None
    assert st.requests_per_launch(0.04, 0.01) == math.ceil(math.pi / 2 * 0.04 / 0.001)


def test_paired_bootstrap_ratio() -> None:
    t = np.array([100.0, 120.0, 90.0, 110.0])
    e = np.array([1000.0, 1300.0, 950.0, 1200.0])
    point, lo, hi = st.paired_bootstrap_ratio(t, e / 2, t, e, seed=3)  # arm a twice as fast on every pair
    assert (point, lo, hi) == pytest.approx((2.0, 2.0, 2.0), rel=1e-12)
    rng = np.random.default_rng(0)
    ta, tb = rng.integers(50, 150, 40).astype(float), rng.integers(50, 150, 40).astype(float)
    ea, eb = rng.uniform(500, 1500, 40), rng.uniform(500, 1500, 40)
    first = st.paired_bootstrap_ratio(ta, ea, tb, eb, seed=1)
    assert first == st.paired_bootstrap_ratio(ta, ea, tb, eb, seed=1)  # seeded: the same interval
    assert first[0] == pytest.approx((ta.sum() / ea.sum()) / (tb.sum() / eb.sum()), rel=1e-12)
    assert first[1] < first[0] < first[2]


def test_error_interval_adds_half_widths_in_quadrature() -> None:
    lo, hi = st.error_interval(1.1, 1.0, 1.21, 1.0, 0.9, 1 / 0.9)
    h = math.hypot(math.log(1.21) / 2, -math.log(0.9))
    assert (lo, hi) == pytest.approx((1.1 * math.exp(-h) - 1, 1.1 * math.exp(h) - 1), rel=1e-12)
