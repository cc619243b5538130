"""Goodput and attainment from per-request records with known latencies: exact counts, the intervals
against scipy's, and the rules for failed requests and requests without a value."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from toolkit.schema.columns import columns_from_records
from toolkit.schema.metrics import cell_stats, share
from toolkit.stats import median_ci, quantile_ci, wilson
from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.schema.slo import Objective, Objectives, evaluate


def rec(i: int, ttft: float, tpot: float | None, tokens: int = 11, *, error: bool = False,
        warmup: bool = False) -> RequestRecord:
    """One request: `tokens` single-token chunks, the first at ttft, then one every `tpot` ms."""
    if error:
        return RequestRecord(arm="a", domain="d", concurrency=4, prompt_id=f"p{i}", send_s=i * 0.1, error="HTTP 500",
                             status=500)
    chunks = [ttft + k * (tpot or 0.0) for k in range(tokens)]
    return RequestRecord(arm="a", domain="d", concurrency=4, prompt_id=f"p{i}", send_s=i * 0.1, ttft_ms=ttft,
                         e2e_ms=chunks[-1], output_tokens=tokens, chunk_ms=chunks, chunk_tokens=[1] * tokens,
                         warmup=warmup)


def cell(records: list[RequestRecord]) -> tuple[CellSummary, dict]:
    stats, span = cell_stats(records)
    measured = [r for r in records if not r.warmup]
    c = CellSummary(arm="a", domain="d", concurrency=4, output_len=16, workload_hash="h", metrics=stats,
                    n_requests=len(measured), n_errors=sum(r.error is not None for r in measured), duration_s=span)
    return c, columns_from_records(records)


# 20 measured requests with known latencies, 2 warmup requests (ignored), 2 failed requests
TTFT = [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 300, 400, 500, 600]
TPOT = [10, 10, 10, 10, 10, 20, 20, 20, 20, 20, 30, 30, 30, 30, 30, 40, 40, 40, 40, 40]
RECORDS = ([rec(100, 1.0, 1.0, warmup=True), rec(101, 9999.0, 999.0, warmup=True)]
           + [rec(i, t, p) for i, (t, p) in enumerate(zip(TTFT, TPOT))]
           + [rec(50, 0, 0, error=True), rec(51, 0, 0, error=True)])


def test_exact_counts_goodput_and_attainment() -> None:
    c, cols = cell(RECORDS)
    obj = Objectives(items=[Objective(metric="ttft_ms", bound="per_request", limit=150),
                            Objective(metric="tpot_ms", bound="per_request", limit=30)])
    r = evaluate([c], [cols], obj)
    # ttft <= 150: the first 11; tpot <= 30: the first 15 -> both: the first 11
    assert (r.n, r.ok, r.met) == (22, 20, 11)
    assert r.attainment == pytest.approx(11 / 22)
    ref = binomtest(11, 22).proportion_ci(method="wilson")
    assert (r.attainment_low, r.attainment_high) == pytest.approx((ref.low, ref.high))
    # goodput: the cell's throughput scaled to the 11 requests of 20 (all carry 11 tokens)
    assert r.goodput_req_s == pytest.approx(c.metrics["request_s"].mean * 11 / 20)
    assert r.goodput_tok_s == pytest.approx(c.metrics["output_tok_s"].mean * 11 / 20)
    assert r.goodput_tok_s == pytest.approx(11 * 11 / c.duration_s)  # = their tokens / the measured span
    by = {o.objective: o for o in r.objectives}
    assert by["ttft_ms.per_request"].value == pytest.approx(11 / 22) and by["tpot_ms.per_request"].value == 15 / 22
    assert not r.holds and "attainment 50.0% < 90%" in r.why


def test_percentile_objective_holds_on_the_point_estimate_with_its_ci() -> None:
    c, cols = cell(RECORDS)
    p90 = float(np.percentile(TTFT, 90))  # 410: numpy's linear interpolation, what `results show` prints
    for limit, holds in ((411, True), (409, False)):
        obj = Objectives(items=[Objective(metric="ttft_ms", bound="p90", limit=limit)], attainment=0.9)
        r = evaluate([c], [cols], obj)
        (o,) = r.objectives
        assert o.value == pytest.approx(p90) and o.holds is holds and o.n == 20
        assert o.ci_low is None and not o.certain  # 20 samples: no distribution-free 95% interval for a p90
        assert r.met == 20 and r.attainment == pytest.approx(20 / 22)  # no per-request objective: every success
        assert r.holds is holds


def test_failed_requests_count_against_attainment() -> None:
    c, cols = cell(RECORDS)
    obj = Objectives(items=[Objective(metric="e2e_ms", bound="per_request", limit=1e9)], attainment=0.95)
    r = evaluate([c], [cols], obj)
    assert (r.met, r.n) == (20, 22) and not r.holds and "90.9% < 95%" in r.why


def test_a_request_without_the_value_meets_that_objective() -> None:
    """One output token: no TPOT and no ITL, nothing that could miss the limit (vLLM counts TPOT 0)."""
    recs = [rec(0, 50, 100.0), rec(1, 50, None, tokens=1), rec(2, 50, 1.0)]
    c, cols = cell(recs)
    assert np.isnan(cols["tpot_ms"][1]) and np.isnan(cols["itl_req_mean_ms"][1])
    for metric in ("tpot_ms", "itl_ms"):
        obj = Objectives(items=[Objective(metric=metric, bound="per_request", limit=10)])
        assert evaluate([c], [cols], obj).met == 2  # requests 1 and 2; request 0 has 100 ms gaps


def test_itl_objectives_read_the_per_request_mean_itl() -> None:
    assert Objective(metric="itl_ms", bound="p90", limit=5).sample == "itl_req_mean_ms"
    recs = [rec(i, 10, float(g)) for i, g in enumerate([2, 4, 6, 8])]
    c, cols = cell(recs)
    r = evaluate([c], [cols], Objectives(items=[Objective(metric="itl_ms", bound="per_request", limit=5)],
                                         attainment=0.5))
    assert r.met == 2 and r.holds


def test_repeats_pool_requests_and_average_goodput() -> None:
    a, ca = cell([rec(i, 100, 10) for i in range(10)])
    b, cb = cell([rec(i, 300, 10) for i in range(10)])
    b = b.model_copy(update={"repeat": 1})
    obj = Objectives(items=[Objective(metric="ttft_ms", bound="per_request", limit=200)], attainment=0.5)
    r = evaluate([a, b], [ca, cb], obj)
    assert (r.n, r.met, r.repeats) == (20, 10, 2) and r.holds
    assert r.goodput_tok_s == pytest.approx((a.metrics["output_tok_s"].mean + 0.0) / 2)


def test_quantile_ci_is_the_median_ci_at_one_half_and_scipy_s_interval() -> None:
    from scipy.stats import quantile_test

    rng = np.random.default_rng(0)
    for n in (6, 7, 12, 50, 301):
        x = rng.lognormal(size=n)
        assert quantile_ci(x, 0.5) == median_ci(x)
        for q in (0.9, 0.99):
            lo, hi = quantile_ci(x, q)
            ref = quantile_test(x, q=float(np.quantile(x, q)), p=q).confidence_interval(0.95)
            if lo is None:
                assert np.isnan(ref.low) or np.isnan(ref.high), (n, q)
            else:  # scipy's two one-sided 97.5% bounds: the same order statistics
                assert (lo, hi) == (ref.low, ref.high), (n, q)


def test_wilson_matches_scipy_and_share_carries_it() -> None:
    for k, n in ((0, 10), (3, 10), (10, 10), (61, 64), (1, 1000)):
        assert wilson(k, n) == pytest.approx(tuple(binomtest(k, n).proportion_ci(method="wilson")), abs=1e-12)
    s = share(61, 64)
    assert s.p50 == s.mean == 61 / 64 and (s.ci_low, s.ci_high) == wilson(61, 64) and s.n == 64
    assert wilson(0, 0) == (None, None)


def test_objectives_round_trip_the_spec_block() -> None:
    block = {"ttft_ms": {"p90": 200.0, "per_request": 500.0}, "tpot_ms": {"p99": 30.0}, "attainment": 0.95}
    obj = Objectives.from_block(block)
    assert [o.name for o in obj.items] == ["ttft_ms.p90", "ttft_ms.per_request", "tpot_ms.p99"]
    assert obj.block() == block and Objectives.from_block({"attainment": 0.9}) is None


def test_the_matrix_block_gives_the_one_objective_type() -> None:
    """A Matrix's `slo:` block (the committed quickstart-slo) gives toolkit.schema.slo.Objectives directly,
    the same objectives an archived block reads back as; the default attainment is written once."""
    from pathlib import Path

    from toolkit.schema.slo import DEFAULT_ATTAINMENT
    from toolkit.specs import load_spec
    from toolkit.specs.matrix import Slo

    root = Path(__file__).resolve().parents[2]
    slo = load_spec(root / "envs" / "matrices" / "quickstart-slo.yaml").model.slo
    got = slo.objectives()
    assert isinstance(got, Objectives) and got.items and all(isinstance(o, Objective) for o in got.items)
    assert got == Objectives.from_block(slo.model_dump())  # what an archive of this matrix reads back
    assert Slo(tpot_ms={"p90": 50}).attainment == DEFAULT_ATTAINMENT == Objectives().attainment
    assert Slo(tpot_ms={"p90": 50, "per_request": 80}, attainment=0.5).objectives().text() == (
        "tpot_ms p90 <= 50 ms; tpot_ms <= 80 ms per request; attainment >= 50% of the requests")
