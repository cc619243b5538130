"""Per-request numeric columns: what diff and report read, so they never parse JSON records.

One `.npz` per cell (uncompressed numpy arrays, float32 unless noted) holds the measured, successful
requests (warmup and errors excluded), one row per request, in record order:

    ttft_ms        time to first token
    e2e_ms         end-to-end latency
    tpot_ms        (e2e - ttft) / (output_tokens - 1)                       NaN with < 2 tokens
    itl_ms         mean over the request's chunks of gap-to-previous-chunk / tokens in the chunk
                                                                           NaN with < 2 chunks
    output_tok_s   output_tokens / e2e seconds (the decode rate one user sees)
    accept_length  output tokens per verification step (speculative), NaN when not reported
    output_tokens  int32
    input_tokens   int32, -1 when unknown
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from toolkit.schema.records import RequestRecord
from toolkit.errors import ToolkitError

FLOAT_COLUMNS = ("ttft_ms", "e2e_ms", "tpot_ms", "itl_ms", "output_tok_s", "accept_length")
INT_COLUMNS = ("output_tokens", "input_tokens")
COLUMNS = FLOAT_COLUMNS + INT_COLUMNS


def _nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def _itl(r: RequestRecord) -> float:
    ch = r.chunk_ms
    if len(ch) < 2:
        return float("nan")
    toks = r.chunk_tokens if len(r.chunk_tokens) == len(ch) else None
    if toks is None or toks.count(1) == len(toks):  # one token per chunk: the gaps telescope
        return (ch[-1] - ch[0]) / (len(ch) - 1)
    gaps = [(ch[i] - ch[i - 1]) / max(toks[i], 1) for i in range(1, len(ch))]
    return sum(gaps) / len(gaps)


def _accept(r: RequestRecord) -> float:
    if r.accept_length is not None:
        return float(r.accept_length)
    if r.spec_verify_ct:
        return r.output_tokens / r.spec_verify_ct
    return float("nan")


def columns_from_records(records: list[RequestRecord]) -> dict[str, np.ndarray]:
    measured = [r for r in records if not r.warmup and r.ok and r.e2e_ms is not None]
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    for r in measured:
        ttft, e2e = _nan(r.ttft_ms), float(r.e2e_ms)
        cols["ttft_ms"].append(ttft)
        cols["e2e_ms"].append(e2e)
        cols["tpot_ms"].append((e2e - ttft) / (r.output_tokens - 1) if r.output_tokens > 1 and r.ttft_ms is not None
                               else float("nan"))
        cols["itl_ms"].append(_itl(r))
        cols["output_tok_s"].append(r.output_tokens / (e2e / 1000.0) if e2e > 0 else float("nan"))
        cols["accept_length"].append(_accept(r))
        cols["output_tokens"].append(r.output_tokens)
        cols["input_tokens"].append(-1 if r.input_tokens is None else r.input_tokens)
    out = {c: np.asarray(cols[c], dtype=np.float32) for c in FLOAT_COLUMNS}
    out.update({c: np.asarray(cols[c], dtype=np.int32) for c in INT_COLUMNS})
    return out


def save_columns(cols: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{c: cols[c] for c in COLUMNS})
    return buf.getvalue()


def load_columns(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {c: z[c] for c in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise ToolkitError(f"cannot read the request columns ({exc})", file=path,
                           hint="the file was truncated or edited; `toolkit results verify` names what changed") from None
