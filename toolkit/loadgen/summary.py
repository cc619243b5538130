"""A cell's summary from its request records. Every figure comes from the metric registry
(toolkit/schema/metrics.py), which defines each metric once: what one sample is, how the median's
95% CI is made (order statistics, the same everywhere), which direction is better. `results show`
and `results diff` recompute the same figures from the archive with the same functions.

`itl_values` keeps the raw chunk timings' other views for the load generator's fidelity checks
(plain per-chunk gaps as a reference client measures them); reported metrics never use it.
"""

from __future__ import annotations

from typing import Iterable, Literal

from toolkit.loadgen.load import CellLoad
from toolkit.schema.eligibility import bundled_check, late_check, stall_check
from toolkit.schema.metrics import achieved_rate, cell_stats, chunk_itls
from toolkit.schema.records import CellSummary, ProcessArrival, RequestRecord

ITL_CONVENTION = "per-chunk gap divided by tokens in the chunk"  # itl_ms, pooled over chunks


def itl_values(records: Iterable[RequestRecord],
               convention: Literal["token", "chunk", "request"] = "token") -> list[float]:
    """token: the registry's itl_ms samples; chunk: plain gaps between chunks (sglang.bench_serving's
    per-chunk ITL); request: (last chunk - first chunk) / (chunks - 1) per request."""
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
            out.extend(chunk_itls(r))
    return out


def no_success_reason(measured: list[RequestRecord]) -> str:
    """Why a cell with no successful request failed: how many failed and the first error (the server's own
    words, where it sent some), or that none was measured."""
    if not measured:
        return "no measured request: the cell sent none (or every one was a warm-up)"
    first = next((r.error for r in measured if r.error), "") or "no error message"
    first = " ".join(first.split())
    first = first if len(first) <= 500 else first[:497] + "..."
    return f"no request succeeded ({len(measured)} of {len(measured)} failed); the first error: {first}"


def summarize(records: list[RequestRecord], *, arm: str, domain: str, concurrency: int, output_len: int,
              workload_hash: str = "", repeat: int = 0, launch: int = 0, sampling: dict | None = None,
              load: CellLoad | None = None) -> CellSummary:
    """One CellSummary over the measured (non-warmup) records; errors count in error_rate, and a cell none of
    whose measured requests succeeded is a failed cell (status failed, the first error its reason); a stall
    (toolkit/schema/eligibility.py) is a check of the cell, and so is
    `bundled` (most answers in one chunk), with the cell's bundled_share. An open-loop `load` (its rate set) adds the
    target and achieved rate, the p99 lateness and, when the client could not keep the schedule, `late`."""
    measured = [r for r in records if not r.warmup]
    n_ok = sum(1 for r in measured if r.error is None)
    metrics, span = cell_stats(records)
    summary = CellSummary(arm=arm, domain=domain, concurrency=concurrency, repeat=repeat, launch=launch,
                          output_len=output_len,
                          workload_hash=workload_hash, sampling=dict(sampling or {}), n_requests=len(measured),
                          n_errors=len(measured) - n_ok, itl_convention=ITL_CONVENTION, metrics=metrics,
                          accept_source="requests" if "accept_length" in metrics else None)
    summary.error_rate = summary.n_errors / len(measured) if measured else 0.0
    if n_ok == 0:  # nothing measured is no measurement: the cell failed, whatever the client thought of it
        summary.status, summary.reason = "failed", no_success_reason(measured)
    if measured:
        summary.duration_s = span
        summary.effective_concurrency = sum((r.e2e_ms or 0.0) for r in measured) / 1000.0 / span
    stall = stall_check(records)
    summary.checked = ["stall"]
    if stall is not None:
        summary.checks = [stall]
    summary.bundled_share, bundled = bundled_check(records)
    if summary.bundled_share is not None:
        summary.checked = [*summary.checked, "bundled"]
    if bundled is not None:
        summary.checks = [*summary.checks, bundled]
    if load is not None and load.rate is not None:
        summary.rate, summary.achieved_rate = load.rate, achieved_rate(records)
        summary.arrival = ProcessArrival(process=load.arrival, burstiness=load.burstiness)
        summary.lag_p99_ms, late = late_check(records, load.rate, load.concurrency)
        summary.checked = [*summary.checked, "late"]
        if late is not None:
            summary.checks = [*summary.checks, late]
    return summary
