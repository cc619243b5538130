"""The open-loop arrival process (`rates:` with `arrival: {process, burstiness}`): the gaps the schedule
generates follow the declared distribution (a one-sample Kolmogorov-Smirnov test: exponential for poisson,
gamma(shape=B, scale=1/(rate*B)) for gamma), keep the mean gap 1/rate, and burstiness B sets the dispersion as
vLLM defines it (coefficient of variation 1/sqrt(B)); the test rejects the wrong distribution, so it can fail.
Then a real cell against the schedule server (benchmarks/loadgen_server.py): its requests leave on the gamma
schedule, the summary records the target and the achieved rate, and a client that cannot keep the schedule
(one slot for arrivals faster than a request takes) is marked `late`."""

from __future__ import annotations

import math
from itertools import islice

import numpy as np
import pytest
from scipy import stats as st

from toolkit.loadgen import CellLoad, run, run_cell
from toolkit.loadgen.share import gaps, load_schedule
from toolkit.loadgen.summary import summarize
from toolkit.schema.eligibility import late_bound_ms
from toolkit.schema.records import ProcessArrival, Prompt

N = 4000
ALPHA = 0.01  # fixed seeds: each p-value is one number, and a correct generator's is far above this


def declared(process: str, rate: float, b: float):
    """The distribution the spec declares for the gaps (scipy's parametrisation)."""
    if process == "poisson":
        return st.expon(scale=1 / rate)
    return st.gamma(a=b, scale=1 / (rate * b))


@pytest.mark.parametrize("process,rate,b", [("poisson", 2.0, 1.0), ("poisson", 37.5, 1.0), ("gamma", 4.0, 0.25),
                                            ("gamma", 4.0, 1.0), ("gamma", 10.0, 4.0)])
@pytest.mark.parametrize("seed", [0, 11])
def test_gaps_follow_the_declared_distribution(process, rate, b, seed):
    x = np.fromiter(islice(gaps(rate, seed, process, b), N), float)
    assert st.kstest(x, declared(process, rate, b).cdf).pvalue > ALPHA
    assert x.mean() == pytest.approx(1 / rate, rel=0.08)  # the mean rate is kept whatever the burstiness


@pytest.mark.parametrize("b", [0.25, 0.5, 2.0, 4.0])
def test_the_ks_test_tells_another_burstiness_apart(b):
    """The check has teeth: gamma gaps of shape B are not exponential (nor is Poisson gamma of shape B)."""
    x = np.fromiter(islice(gaps(4.0, 3, "gamma", b), N), float)
    assert st.kstest(x, declared("poisson", 4.0, 1.0).cdf).pvalue < 1e-6
    y = np.fromiter(islice(gaps(4.0, 3, "poisson"), N), float)
    assert st.kstest(y, declared("gamma", 4.0, b).cdf).pvalue < 1e-6


@pytest.mark.parametrize("b", [0.1, 0.25, 1.0, 4.0, 16.0])
def test_burstiness_sets_the_coefficient_of_variation(b):
    x = np.fromiter(islice(gaps(8.0, 5, "gamma", b), 20000), float)
    assert x.std() / x.mean() == pytest.approx(1 / math.sqrt(b), rel=0.06)


def test_constant_arrivals_are_evenly_spaced():
    x = list(islice(gaps(4.0, 0, "constant"), 100))
    assert x == [0.25] * 100


def test_schedule_is_seeded_and_the_same_for_every_arm():
    load = CellLoad(requests=10, rate=3.0, arrival="gamma", burstiness=0.5, seed=9)
    a, b = list(islice(load_schedule(load), 50)), list(islice(load_schedule(load), 50))
    other = list(islice(load_schedule(CellLoad(requests=10, rate=3.0, arrival="gamma", burstiness=0.5, seed=10)), 50))
    assert a == b and a != other and all(y > x for x, y in zip(a, a[1:]))


# -- a real cell: the schedule server (tests/loadgen/test_loadgen_workers.py starts it)

PROMPTS = [Prompt(id=f"p{i}", domain="d", prompt=f"hello {i}") for i in range(7)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.loadgen.test_loadgen_workers import start_server

    srv = start_server(tmp_path_factory.mktemp("arrival"))
    yield srv
    srv.stop()


@pytest.mark.slow
def test_a_gamma_cell_sends_its_schedule_and_records_the_achieved_rate(server):
    load = CellLoad(api="completions", concurrency=64, requests=120, output_len=4, rate=40.0, arrival="gamma",
                    burstiness=0.5, seed=4)
    recs = run(run_cell(server.base_url, load, PROMPTS))
    assert len(recs) == 120 and all(r.error is None and r.rate == 40.0 for r in recs)
    # each request's scheduled time (send - lag) is the schedule, on the cell's one clock
    scheduled = sorted(r.send_s - r.lag_ms / 1000 for r in recs)
    expected = list(islice(load_schedule(load), 120))
    assert max(abs((s - scheduled[0]) - (e - expected[0])) for s, e in zip(scheduled, expected)) < 1e-6
    s = summarize(recs, arm="a", domain="d", concurrency=64, output_len=4, load=load)
    assert s.rate == 40.0 and s.arrival == ProcessArrival(process="gamma", burstiness=0.5) and "late" in s.checked
    truth = (len(expected) - 1) / (expected[-1] - expected[0])  # the schedule's own rate over these arrivals
    assert s.achieved_rate == pytest.approx(truth, rel=0.25)  # what was sent, late sends and all
    assert s.lag_p99_ms is not None and s.key == "a__d__q40__r0" and s.label == "r=40/s"


@pytest.mark.slow
def test_a_client_that_cannot_keep_the_schedule_is_marked_late(server):
    """One slot (max_concurrency 1) for arrivals every 20 ms, each request taking > 30 ms (the server's TTFT):
    every later arrival waits for the slot, so the requests leave ever later."""
    load = CellLoad(api="completions", concurrency=1, requests=30, output_len=8, rate=50.0, seed=1)
    recs = run(run_cell(server.base_url, load, PROMPTS))
    s = summarize(recs, arm="a", domain="d", concurrency=1, output_len=8, load=load)
    late = [c for c in s.checks if c.check == "late"]
    assert late and late[0].excludes and s.lag_p99_ms > late_bound_ms(50.0) == 10.0
    assert late[0].cap_full and "all 1 slots were in flight" in late[0].message  # the cap is why
    assert s.achieved_rate < 0.8 * 50.0  # the server saw a slower arrival process than declared
