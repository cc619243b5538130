"""metrics.summarize and the metric registry on hand-made records: conventions, percentiles, unreliable
marks, the median's order-statistic CI, rates, and two names for two conventions."""

from __future__ import annotations

import pytest

import numpy as np

from toolkit.loadgen.summary import itl_values, summarize
from toolkit.schema.metrics import METRICS, describe
from toolkit.stats import median_ci
from toolkit.schema.records import RequestRecord


def rec(i, chunks, tokens, send=0.0, ttft=None, e2e=None, **kw):
    return RequestRecord(arm="a", domain="d", concurrency=2, prompt_id=f"p{i}", send_s=send, chunk_ms=chunks,
                         chunk_tokens=tokens, ttft_ms=ttft if ttft is not None else chunks[0],
                         e2e_ms=e2e if e2e is not None else chunks[-1] + 1, output_tokens=sum(tokens), **kw)


def test_itl_conventions():
    r = rec(0, [10.0, 12.0, 12.0, 20.0], [1, 1, 2, 4])
    assert itl_values([r], "chunk") == [2.0, 0.0, 8.0]
    assert itl_values([r], "token") == [2.0, 0.0, 2.0]
    assert itl_values([r], "request") == [pytest.approx(10.0 / 3)]


def test_describe_marks_unreliable_percentiles_and_ci_brackets_the_median():
    s = describe(range(50))
    assert s.n == 50 and s.p50 == 24.5 and s.unreliable == ["p99"]
    assert s.ci_low <= s.p50 <= s.ci_high
    assert describe(range(5)).unreliable == ["p90", "p99"]
    assert describe(range(200)).unreliable == []
    assert describe([]).n == 0 and describe([]).p50 is None
    assert describe([1.0, float("nan"), 3.0]).n == 2  # a request without the value is left out


def test_median_ci_is_the_exact_binomial_order_statistic_interval():
    # n = 12: P(B <= 2) = 79/4096 = 0.019 <= 0.025 < P(B <= 3): the interval is [x(3), x(10)] (1-based)
    assert median_ci(np.arange(12.0)) == (2.0, 9.0)
    assert median_ci(np.arange(6.0)) == (0.0, 5.0)       # the smallest n with a 95% interval (benchstat: >= 6)
    assert median_ci(np.arange(5.0)) == (None, None)
    rng = np.random.default_rng(0)
    for n in (12, 40, 1000):
        hits = sum(lo <= 0.0 <= hi for lo, hi in (median_ci(rng.normal(size=n)) for _ in range(400)))
        assert 0.93 <= hits / 400 <= 1.0, n  # at least 95% coverage, by construction


def test_summarize_excludes_warmup_and_counts_errors():
    recs = [rec(0, [100.0, 110.0], [1, 1], send=0.0, e2e=1000.0, warmup=True),
            rec(1, [50.0, 60.0, 70.0], [1, 1, 1], send=1.0, e2e=1000.0),
            rec(2, [40.0, 45.0], [1, 2], send=1.5, e2e=1000.0),
            RequestRecord(arm="a", domain="d", concurrency=2, prompt_id="p3", send_s=2.0, e2e_ms=5.0,
                          error="HTTP 500: boom", status=500)]
    s = summarize(recs, arm="a", domain="d", concurrency=2, output_len=8)
    assert s.n_requests == 3 and s.n_errors == 1 and s.error_rate == pytest.approx(1 / 3)
    assert s.metrics["ttft_ms"].n == 2 and s.metrics["ttft_ms"].p50 == 45.0
    assert s.duration_s == pytest.approx(1.5)          # first measured send 1.0 -> last end 2.5
    assert s.metrics["request_s"].mean == pytest.approx(2 / 1.5)
    assert s.metrics["output_tok_s"].mean == pytest.approx(6 / 1.5)
    assert s.metrics["tpot_ms"].p50 == pytest.approx(((1000 - 50) / 2 + (1000 - 40) / 2) / 2)
    assert s.effective_concurrency == pytest.approx(2.005 / 1.5)
    assert s.itl_convention == "per-chunk gap divided by tokens in the chunk"
    assert "accept_length" not in s.metrics


def test_accept_length_is_the_ratio_of_sums():
    recs = [rec(0, [1.0, 2.0], [3, 3], spec_verify_ct=2, accept_length=3.0),
            rec(1, [1.0, 2.0, 3.0], [1, 1, 1], spec_verify_ct=3, accept_length=1.0)]
    s = summarize(recs, arm="a", domain="d", concurrency=1, output_len=8)
    assert s.metrics["accept_length"].mean == s.metrics["accept_length"].p50 == pytest.approx(9 / 5)  # the cell
    assert s.metrics["req_accept_length"].p50 == pytest.approx(2.0)  # the median of the per-request ratios
    assert METRICS["accept_length"].kind == "cell" and METRICS["req_accept_length"].kind == "request"


def test_two_conventions_two_names():
    """Pooled chunk ITL and the median of per-request mean ITL differ when requests differ in length;
    cell throughput and per-request rate differ whenever requests overlap: each pair has two names."""
    long = rec(0, [0.0] + [10.0 * i for i in range(1, 11)], [1] * 11, send=0.0, e2e=101.0)   # 10 gaps of 10 ms
    short = rec(1, [0.0, 50.0], [1, 1], send=0.0, e2e=51.0)                                  # 1 gap of 50 ms
    s = summarize([long, short], arm="a", domain="d", concurrency=2, output_len=16)
    assert s.metrics["itl_ms"].p50 == 10.0                   # 11 pooled gaps: ten of 10 ms, one of 50 ms
    assert s.metrics["itl_req_mean_ms"].p50 == 30.0          # the median of the two requests' means (10, 50)
    assert s.metrics["itl_ms"].ci_low is None                # pooled chunks: no CI (they are not independent)
    assert s.metrics["output_tok_s"].p50 == pytest.approx(13 / 0.101)  # 13 tokens over the 101 ms span
    assert s.metrics["req_output_tok_s"].p50 == pytest.approx((11 / 0.101 + 2 / 0.051) / 2)
