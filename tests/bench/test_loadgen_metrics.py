"""metrics.summarize on hand-made records: conventions, percentiles, unreliable marks, CI, rates."""

from __future__ import annotations

import pytest

from toolkit.bench.metrics import itl_values, median_ci, stat, summarize
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


def test_stat_marks_unreliable_percentiles_and_ci_brackets_the_median():
    s = stat(range(50), seed=1)
    assert s.n == 50 and s.p50 == 24.5 and s.unreliable == ["p99"]
    assert s.ci_low <= s.p50 <= s.ci_high
    assert stat(range(5)).unreliable == ["p90", "p99"]
    assert stat(range(200)).unreliable == []
    assert stat([]).n == 0 and stat([]).p50 is None
    assert median_ci(__import__("numpy").arange(100.0), seed=3) == median_ci(__import__("numpy").arange(100.0), seed=3)


def test_summarize_excludes_warmup_and_counts_errors():
    recs = [rec(0, [100.0, 110.0], [1, 1], send=0.0, e2e=1000.0, warmup=True),
            rec(1, [50.0, 60.0, 70.0], [1, 1, 1], send=1.0, e2e=1000.0),
            rec(2, [40.0, 45.0], [1, 2], send=1.5, e2e=1000.0),
            RequestRecord(arm="a", domain="d", concurrency=2, prompt_id="p3", send_s=2.0, e2e_ms=5.0,
                          error="HTTP 500: boom", status=500)]
    s = summarize(recs, arm="a", domain="d", concurrency=2, output_len=8, seed=0)
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
    assert s.metrics["accept_length"].mean == pytest.approx(9 / 5)
    assert s.metrics["accept_length"].p50 == pytest.approx(2.0)
