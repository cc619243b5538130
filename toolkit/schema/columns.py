"""Per-request numeric columns: what show, diff and report read, so they never parse JSON records.

One `.npz` per cell (numpy arrays, written uncompressed: `np.savez`, the same bytes for the same arrays)
holds the successful measured requests (warmup and errors left out), one row per request, in record order:
every `request` metric of the registry (toolkit/schema/metrics.py) as float32, NaN where a request has no
value, under its registry name:

    ttft_ms  tpot_ms  itl_req_mean_ms  e2e_ms  req_output_tok_s  req_accept_length

plus `output_tokens` and `input_tokens` (int32, -1 when unknown).

Archives written before the registry (until 2026-12) stored three of these under older names; they
are read under the registry's names, the files untouched (an archive is never rewritten):

    itl_ms        -> itl_req_mean_ms    (it was the per-request mean, not the pooled itl_ms)
    output_tok_s  -> req_output_tok_s   (it was the per-request rate, not the cell throughput)
    accept_length -> req_accept_length

A finished run stores it gzipped, `cells/<key>.npz.gz` (toolkit.results.compact, as every other file of
1 KiB or more): the readers in toolkit/results pass its decompressed bytes here (`data`), so the arrays
read are the very ones written.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.schema.metrics import REQUEST_METRICS, request_values, successful
from toolkit.schema.records import RequestRecord

FLOAT_COLUMNS = REQUEST_METRICS
INT_COLUMNS = ("output_tokens", "input_tokens")
COLUMNS = FLOAT_COLUMNS + INT_COLUMNS
OLD_NAMES = {"itl_ms": "itl_req_mean_ms", "output_tok_s": "req_output_tok_s", "accept_length": "req_accept_length"}


def columns_from_records(records: list[RequestRecord]) -> dict[str, np.ndarray]:  # data-keyed: column name
    ok = successful(records)
    out = {c: request_values(ok, c) for c in FLOAT_COLUMNS}
    out["output_tokens"] = np.asarray([r.output_tokens for r in ok], dtype=np.int32)
    out["input_tokens"] = np.asarray([-1 if r.input_tokens is None else r.input_tokens for r in ok], dtype=np.int32)
    return out


def save_columns(cols: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{c: cols[c] for c in COLUMNS})
    return buf.getvalue()


def registry_names(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # data-keyed: column name
    """Columns under the registry's names, whichever version wrote them."""
    if not stored_under_old_names(raw):
        return dict(raw)
    return {OLD_NAMES.get(k, k): v for k, v in raw.items()}


def load_stored(path: Path, data: bytes | None = None) -> dict[str, np.ndarray]:  # data-keyed: column name
    """The arrays under the names the run stored them (an older archive's `itl_ms`, ...), in stored order;
    `data`: the file's bytes when they are not read from `path` itself (a compacted NAME.gz, decompressed),
    `path` then names it in errors."""
    try:
        with np.load(path if data is None else io.BytesIO(data), allow_pickle=False) as z:
            return {c: z[c] for c in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise ToolkitError(f"cannot read the request columns ({exc})", file=path,
                           hint="the file was truncated or edited; `toolkit results verify` names what changed") from None


def stored_under_old_names(raw: dict[str, np.ndarray]) -> bool:
    """Written before the registry (OLD_NAMES): the checks of toolkit.results.consistency differ."""
    return not any(new in raw for new in OLD_NAMES.values())

