"""Per-cell metrics from request records: mean, p50, p90, p99, n and a seeded bootstrap 95% CI of the
median, with percentiles marked unreliable when n is too small for them.

Conventions (named in every CellSummary):
- TTFT: send -> first content chunk. E2E: send -> end of stream.
- TPOT: per request (e2e - ttft) / (output_tokens - 1).
- ITL:  per chunk, the gap to the previous chunk divided by the tokens that chunk carries, pooled
        over all chunks of all successful requests (`itl_values(..., "token")`). The raw chunk
        times allow the other two: "chunk" (plain per-chunk gaps, sglang/vLLM) and "request"
        ((last - first chunk) / (chunks - 1) per request, guidellm).
- request_s, output_tok_s: successful requests and their output tokens over the measured span
  (first send -> last end); effective concurrency = sum of E2E / span (Little's law).
"""

from __future__ import annotations

from typing import Iterable, Literal

import numpy as np

from toolkit.schema.records import CellSummary, RequestRecord, Stat

ITL_CONVENTIONS = {
    "token": "per-chunk gap divided by tokens in the chunk",
    "chunk": "per-chunk gap",
    "request": "(last chunk - first chunk) / (chunks - 1) per request",
}
MIN_N = {"p90": 10, "p99": 100}
BOOTSTRAP = 1000


def median_ci(values: np.ndarray, seed: int = 0, level: float = 0.95) -> tuple[float | None, float | None]:
    """Bootstrap (seeded, 1000 resamples) CI of the median; for n > 1000 the distribution-free
    order-statistic interval (same target, exact coverage, no resampling cost)."""
    n = len(values)
    if n < 2:
        return None, None
    alpha = (1 - level) / 2
    if n > 1000:
        s = np.sort(values)
        half = 1.959964 * np.sqrt(n) / 2
        lo, hi = int(np.floor(n / 2 - half)), int(np.ceil(n / 2 + half))
        return float(s[max(lo, 0)]), float(s[min(hi, n - 1)])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(BOOTSTRAP, n))
    meds = np.median(values[idx], axis=1)
    return float(np.quantile(meds, alpha)), float(np.quantile(meds, 1 - alpha))


def stat(values: Iterable[float], seed: int = 0) -> Stat:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    n = len(v)
    if n == 0:
        return Stat(n=0)
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    lo, hi = median_ci(v, seed)
    return Stat(mean=float(v.mean()), p50=float(p50), p90=float(p90), p99=float(p99), ci_low=lo, ci_high=hi, n=n,
                unreliable=[p for p, k in MIN_N.items() if n < k])


def itl_values(records: Iterable[RequestRecord], convention: Literal["token", "chunk", "request"] = "token") -> list[float]:
    out: list[float] = []
    for r in records:
        t = r.chunk_ms
        if len(t) < 2:
            continue
        if convention == "request":
            out.append((t[-1] - t[0]) / (len(t) - 1))
        elif convention == "chunk":
            out.extend(b - a for a, b in zip(t, t[1:]))
        else:
            k = r.chunk_tokens
            out.extend((t[i] - t[i - 1]) / max(k[i], 1) for i in range(1, len(t)))
    return out


def tpot(r: RequestRecord) -> float | None:
    if r.ttft_ms is None or r.e2e_ms is None or r.output_tokens < 2:
        return None
    return (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1)


def summarize(records: list[RequestRecord], *, arm: str, domain: str, concurrency: int, output_len: int,
              workload_hash: str = "", repeat: int = 0, sampling: dict | None = None, seed: int = 0,
              itl_convention: Literal["token", "chunk", "request"] = "token") -> CellSummary:
    """One CellSummary over the measured (non-warmup) records; errors count in error_rate only."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.error is None]
    summary = CellSummary(arm=arm, domain=domain, concurrency=concurrency, repeat=repeat, output_len=output_len,
                          workload_hash=workload_hash, sampling=dict(sampling or {}), n_requests=len(measured),
                          n_errors=len(measured) - len(ok), itl_convention=ITL_CONVENTIONS[itl_convention])
    summary.error_rate = summary.n_errors / len(measured) if measured else 0.0
    if not measured:
        return summary
    start = min(r.send_s for r in measured)
    end = max(r.send_s + (r.e2e_ms or 0.0) / 1000.0 for r in measured)
    span = max(end - start, 1e-9)
    summary.duration_s = span
    summary.effective_concurrency = sum((r.e2e_ms or 0.0) for r in measured) / 1000.0 / span
    m = summary.metrics
    m["ttft_ms"] = stat((r.ttft_ms for r in ok), seed)
    m["tpot_ms"] = stat((tpot(r) for r in ok), seed)
    m["itl_ms"] = stat(itl_values(ok, itl_convention), seed)
    m["e2e_ms"] = stat((r.e2e_ms for r in ok), seed)
    tokens = sum(r.output_tokens for r in ok)
    m["output_tok_s"] = _rate(tokens / span, len(ok))
    m["request_s"] = _rate(len(ok) / span, len(ok))
    verify = [r for r in ok if r.spec_verify_ct]
    if verify:
        acc = stat((r.accept_length for r in verify), seed)
        # the robust aggregate: sum(completion_tokens) / sum(spec_verify_ct), not a mean of ratios
        acc.mean = sum(r.output_tokens for r in verify) / sum(r.spec_verify_ct for r in verify)
        m["accept_length"] = acc
    return summary


def _rate(value: float, n: int) -> Stat:
    """A cell-level rate: one figure (mean = p50), n = the requests behind it; no percentiles."""
    return Stat(mean=value, p50=value, n=n)
