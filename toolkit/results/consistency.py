"""Do a cell's three copies of the truth agree? Its records (cells/<key>.jsonl.gz), its per-request columns
(cells/<key>.npz) and its summary (cells/<key>.json, the same entry in summary.json). Checksums catch a
file changed after the run; this catches files changed together with SHA256SUMS, or written wrong:

- the columns are exactly what the records give (toolkit.schema.columns.columns_from_records);
- the summary's request counts are the records' (measured, failed);
- every request metric's median and sample count in the summary are the ones of its column (the same
  `describe` show and diff use), within float tolerance;
- the cell figures (output_tok_s, request_s, and accept_length when it came from the requests) are the
  ones the records give (toolkit.schema.metrics.cell_figures).

Records re-encoded by `toolkit results recode` (RECODED.json: every time rounded to `tol_ms`, the columns and
summary kept as the run wrote them) are compared within that rounding (`within_rounding`): a time moves by
at most tol_ms / 2, a difference or mean of gaps by at most tol_ms, a per-request rate by its relative share
tol_ms / e2e_ms, a cell figure by 2 tol_ms over its span; counts, tokens and acceptance exactly.

Imports (`results import`) keep the other tool's figures as their summary: only their records and columns
are compared. Archives written before the metric registry (their columns under the old names, toolkit.schema.columns)
stored other conventions under some names: only their columns, counts and request medians are checked.
"""

from __future__ import annotations

import math

import numpy as np

from toolkit.schema.columns import COLUMNS, columns_from_records
from toolkit.schema.metrics import REQUEST_METRICS, cell_figures, describe, figure_of
from toolkit.schema.records import CellSummary, RequestRecord

REL_TOL, ABS_TOL = 1e-6, 1e-9
CELL_FIGURES = ("output_tok_s", "request_s")


def _close(a: float | None, b: float | None, rel: float = REL_TOL) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=ABS_TOL)


def _same_column(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
    return bool(np.array_equal(a, b))


F32_RTOL = 1e-6  # the columns are float32 (eps 6e-8)
TIME_COLUMNS = ("ttft_ms", "tpot_ms", "itl_req_mean_ms", "e2e_ms")
RATE_COLUMNS = ("req_output_tok_s",)


def within_rounding(name: str, got: np.ndarray, stored: np.ndarray, e2e_ms: np.ndarray, tol_ms: float) -> bool:
    """Column `name` recomputed from records whose times were rounded to tol_ms, against the run's own."""
    if got.shape != stored.shape:
        return False
    if name in TIME_COLUMNS:
        atol, rtol = tol_ms, F32_RTOL
    elif name in RATE_COLUMNS:
        atol, rtol = 0.0, F32_RTOL + tol_ms / np.maximum(e2e_ms.astype(np.float64) - tol_ms, tol_ms)
    else:
        return _same_column(got, stored)
    a, b = got.astype(np.float64), stored.astype(np.float64)
    both = np.isnan(a) & np.isnan(b)
    return bool(np.all(both | (np.abs(a - b) <= atol + rtol * np.abs(b))))


def check_cell(summary: CellSummary, records: list[RequestRecord] | None, cols: dict[str, np.ndarray],
               old_columns: bool = False, imported: bool = False,
               tol_ms: float | None = None) -> list[tuple[str, str]]:
    """(which copy, what disagrees) for one cell; empty when its records, columns and summary agree.
    `which` is 'npz' or 'json'. Without records (None), the columns against the summary only. An imported
    cell's summary holds the other tool's own figures (`results import`): only its records and columns are
    compared. tol_ms: the records were re-encoded at that rounding (RECODED.json), compared within it."""
    out: list[tuple[str, str]] = []
    if records is not None and not imported:
        measured = [r for r in records if not r.warmup]
        failed = sum(1 for r in measured if r.error is not None)
        if summary.n_requests != len(measured):
            out.append(("json", f"n_requests is {summary.n_requests}, the records hold {len(measured)} measured "
                                "requests"))
        if summary.status == "ok" and summary.n_errors != failed:
            out.append(("json", f"n_errors is {summary.n_errors}, {failed} measured records failed"))
    if records is not None:
        expect = columns_from_records(records)
        for c in COLUMNS:
            if c not in cols:
                continue
            if tol_ms is None and not _same_column(cols[c], expect[c]):
                out.append(("npz", f"column {c} is not what the records give"))
            elif tol_ms is not None and not within_rounding(c, expect[c], cols[c], expect["e2e_ms"], tol_ms):
                out.append(("npz", f"column {c} is not what the records give within their rounding to "
                                   f"{tol_ms} ms (RECODED.json)"))
    if summary.status != "ok" or imported:
        return out
    for m in REQUEST_METRICS:
        stored = summary.metrics.get(m)
        if stored is None or m not in cols:
            continue
        got = describe(cols[m], ci=False)  # the median and n: no interval needed to compare them
        if got.n != stored.n or not _close(got.p50, stored.p50):
            out.append(("json", f"{m}: p50 {stored.p50!r} over n={stored.n}, but the median of its per-request "
                                f"column is {got.p50!r} over n={got.n}"))
    if old_columns or records is None:
        return out
    stats, span = cell_figures([r for r in records if not r.warmup])
    rel = REL_TOL if tol_ms is None else REL_TOL + 2 * tol_ms / max(span * 1000.0, tol_ms)
    names = CELL_FIGURES + (("accept_length",) if summary.accept_source in (None, "requests") else ())
    for m in names:
        stored, got = summary.metrics.get(m), stats.get(m)
        if stored is None and got is None:
            continue
        if stored is None or got is None or not _close(figure_of(stored), figure_of(got), rel):
            out.append(("json", f"{m} is {figure_of(stored) if stored else None!r}, the records give "
                                f"{figure_of(got) if got else None!r}"))
    return out
