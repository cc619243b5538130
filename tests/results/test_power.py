"""Power before spending and the machine level (toolkit/stats/): the formulas against a seeded
simulation of the tests they describe."""

import math

import numpy as np
from scipy import stats as sps

from toolkit.stats import (MachineVar, Noise, cell_noise, compare, launches_needed, machine_prior,
                                      machine_var_from_pairs, mde_pct, power, requests_per_launch, with_machine)


def _noise(cv: float) -> Noise:
    return Noise(var=math.log1p(cv * cv), df=math.inf, source="calibration x")


def _simulated_power(cv: float, n: int, change_pct: float, reps: int = 4000, seed: int = 1) -> float:
    """The share of seeded A/B pairs (n launches a side, normal launch effects on the log scale) in which the
    test the verdicts run (each cell's own variance, 2 (n - 1) df) finds the change, vectorised."""
    rng = np.random.default_rng(seed)
    sd = math.sqrt(math.log1p(cv * cv))
    a = rng.normal(0.0, sd, (reps, n))
    b = rng.normal(math.log1p(change_pct / 100), sd, (reps, n))
    d = b.mean(1) - a.mean(1)
    var = (a.var(1, ddof=1) + b.var(1, ddof=1)) / 2
    t = d / np.sqrt(var * 2 / n)
    return float(np.mean(np.abs(t) > sps.t.ppf(0.975, 2 * n - 2)))


def test_power_matches_a_simulation_of_the_test():
    for cv, n, change in [(0.10, 3, 20.0), (0.05, 4, 10.0), (0.10, 8, 10.0)]:
        exact = power(_noise(cv), n, n, change)
        sim = _simulated_power(cv, n, change)
        assert abs(exact - sim) < 0.03, (cv, n, change, exact, sim)


def test_launches_needed_reaches_the_power_and_one_fewer_does_not():
    noise = _noise(0.10)
    n = launches_needed(noise, 10.0)
    assert n is not None and n > 2
    assert _simulated_power(0.10, n, 10.0) >= 0.78
    assert power(noise, n - 1, n - 1, 10.0) < 0.80 <= power(noise, n, n, 10.0)
    # roughly the normal-approximation formula 2 var (z + z)^2 / log(1.1)^2
    approx = 2 * noise.var * (1.96 + 0.8416) ** 2 / math.log(1.1) ** 2
    assert approx <= n <= approx + 3


def test_launches_needed_none_when_the_machine_level_alone_swamps_the_change():
    assert launches_needed(_noise(0.05), 10.0, machine_var=math.log1p(0.15 ** 2)) is None
    assert launches_needed(_noise(0.01), 50.0, most=4) == 2


def test_mde_is_about_the_change_found_with_80_percent_power():
    noise = Noise(var=math.log1p(0.1 ** 2), df=4.0)  # 3 launches a side, the cell's own variance
    mde = mde_pct(noise, 3, 3)
    assert 0.75 < power(noise, 3, 3, mde, df=4.0) < 0.85


def test_machine_variance_restores_coverage_across_machines():
    """Runs on two machines (machine CV 10 %, launch CV 5 %, 3 launches a side), no true change: the interval
    without the machine level covers 1 far less than 95 %; with it, about 95 %."""
    rng = np.random.default_rng(7)
    sm, sl = math.sqrt(math.log1p(0.01)), math.sqrt(math.log1p(0.0025))
    mv = MachineVar(var=sm * sm)
    plain = level = 0
    reps = 1500
    for _ in range(reps):
        ma, mb = rng.normal(0, sm, 2)
        a = np.exp(ma + rng.normal(0, sl, 3))
        b = np.exp(mb + rng.normal(0, sl, 3))
        noise = cell_noise(a, b)
        c0, c1 = compare(a, b, noise), compare(a, b, noise, machine=mv)
        plain += c0.low <= 1 <= c0.high
        level += c1.low <= 1 <= c1.high
    assert plain / reps < 0.7
    assert 0.93 <= level / reps <= 0.99
    assert "machine level" in compare([1, 1.1], [1, 1.2], _noise(0.1), machine=mv).source


def test_machine_var_from_pairs_recovers_the_variance():
    rng = np.random.default_rng(3)
    vm, se2 = 0.02, 0.004
    pairs = [(float(rng.normal(0, math.sqrt(2 * vm + se2))), se2) for _ in range(4000)]
    est = machine_var_from_pairs(pairs)
    assert abs(est.var - vm) < 0.003 and est.df == 4000
    assert machine_var_from_pairs([]) is None
    assert machine_var_from_pairs([(0.0, 0.01)]).var == 0.0


def test_machine_prior_and_with_machine():
    assert machine_prior("ttft_ms").cv > machine_prior("tpot_ms").cv
    assert "default prior" in machine_prior("tpot_ms").text()
    n = with_machine(_noise(0.1), machine_prior("tpot_ms").var, source="prior")
    assert n.var > _noise(0.1).var and "prior" in n.source


def test_requests_per_launch():
    assert requests_per_launch(0.25, 0.01, share=0.1) == math.ceil(math.pi / 2 * 0.25 / 0.001)
    assert requests_per_launch(0.0, 0.01) == 1


def test_mde_across_machines_is_larger_and_has_its_power():
    noise, mv = _noise(0.05), machine_prior("tpot_ms").var
    plain, across = mde_pct(noise, 3), mde_pct(noise, 3, machine_var=mv)
    assert across > plain
    assert 0.78 < power(noise, 3, 3, across, df=math.inf, machine_var=mv) < 0.82  # both with known variances
