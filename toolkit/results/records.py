"""A cell's request records as stored: the plain form `cells/<key>.jsonl.gz` (one RequestRecord JSON a line,
gzip, what every run writes) or the compact form `cells/<key>.rec.xz` (the records codec below). Every
reader of a cell's records goes through `records_path` / `read_records` here, the one place that knows both.

The codec (RECORDS_CODEC): xz (preset 9e) of JSON lines, a header line first, then one record a line with
its fields as the run wrote them (`model_dump_json(exclude_defaults=True)`) except the times, stored as
integer microseconds: `send_us` for send_s, `ttft_us`, `e2e_us`, `lag_us` for the *_ms fields and
`chunk_dus` for chunk_ms as deltas (each chunk's arrival minus the previous one's, the first from send).
Decoding gives the times back as us / 1000 ms (send_s: us / 1e6 s). Times already at the microsecond
(the load generator rounds to it since 2026-12-06) round-trip exactly; older records (15 significant
digits) lose what is below the microsecond, which is why an archive is re-encoded only by `toolkit results
recode`, which records it (toolkit.results.recode: RECODED.json, what verify checks).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
from datetime import datetime, timezone
import zlib
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict, ValidationError

from toolkit import __version__
from toolkit.checksums import NAME as SUMS, write_sums
from toolkit.errors import ToolkitError
from toolkit.fsutil import write_atomic
from toolkit.schema.records import RequestRecord

PLAIN, COMPACT = ".jsonl.gz", ".rec.xz"
RECORDS_CODEC = "toolkit-records/1"
HEADER = {"codec": RECORDS_CODEC, "time_unit": "us"}
_MS = ("ttft_ms", "e2e_ms", "lag_ms")


def records_path(cells: Path, key: str) -> Path:
    """The file holding a cell's records: <key>.jsonl.gz, else <key>.rec.xz if that exists, else the plain
    name (missing)."""
    plain = Path(cells) / f"{key}{PLAIN}"
    compact = plain.with_name(f"{key}{COMPACT}")
    return compact if not plain.exists() and compact.exists() else plain


def records_exist(cells: Path, key: str) -> bool:
    return records_path(cells, key).exists()


def cell_key_of(path: Path) -> str | None:
    """The cell key of a records file's name, None for another file."""
    for suffix in (PLAIN, COMPACT):
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return None


def _us(x: float) -> int:
    return round(x * 1000.0)


def encode_one(r: RequestRecord) -> dict:  # json-edge: a records line
    d = json.loads(r.model_dump_json(exclude_defaults=True))
    d["send_us"] = round(d.pop("send_s") * 1e6)
    for f in _MS:
        if d.get(f) is not None:
            d[f[:-3] + "_us"] = _us(d.pop(f))
    if "chunk_ms" in d:
        us = [_us(t) for t in d.pop("chunk_ms")]
        d["chunk_dus"] = [b - a for a, b in zip([0] + us, us)]
    return d


def decode_one(d: dict) -> RequestRecord:
    d = dict(d)
    if "send_us" in d:
        d["send_s"] = d.pop("send_us") / 1e6
    for f in _MS:
        if f[:-3] + "_us" in d:
            d[f] = d.pop(f[:-3] + "_us") / 1000.0
    if "chunk_dus" in d:
        acc, out = 0, []
        for step in d.pop("chunk_dus"):
            acc += step
            out.append(acc / 1000.0)
        d["chunk_ms"] = out
    return RequestRecord.model_validate(d)


def encode(records: list[RequestRecord]) -> bytes:
    lines = [json.dumps(HEADER, sort_keys=True)] + [json.dumps(encode_one(r), separators=(",", ":"))
                                                    for r in records]
    return lzma.compress(("\n".join(lines) + "\n").encode(), preset=9 | lzma.PRESET_EXTREME)


def plain_lines(records: list[RequestRecord]) -> bytes:
    """The records as the run writes them into <key>.jsonl.gz (before gzip)."""
    return b"".join(r.model_dump_json(exclude_defaults=True).encode() + b"\n" for r in records)


def _compact_lines(path: Path, blob: bytes | None = None) -> Iterator[tuple[int, dict]]:
    try:
        text = lzma.decompress(path.read_bytes() if blob is None else blob).decode()
    except (lzma.LZMAError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise ToolkitError(f"cannot be decompressed to the end ({exc}): truncated or corrupted", file=path) from None
    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("codec") != RECORDS_CODEC:
        raise ToolkitError(f"its first line is not the records codec's header ({RECORDS_CODEC})", file=path, line=1,
                           hint="a .rec.xz file is written by `toolkit results recode`")
    for i, line in enumerate(lines[1:], 2):
        try:
            yield i, json.loads(line)
        except ValueError as exc:
            raise ToolkitError(f"line {i} is not JSON ({exc})", file=path, line=i) from None


def iter_records(path: Path, blob: bytes | None = None) -> Iterator[RequestRecord]:
    """Every record of one records file, either form (blob: its bytes, already read); ToolkitError (file,
    line) for a file that cannot be read whole or a record that does not match the schema."""
    path = Path(path)
    if path.name.endswith(COMPACT):
        for i, d in _compact_lines(path, blob):
            try:
                yield decode_one(d)
            except (ValidationError, TypeError, AttributeError) as exc:
                msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                raise ToolkitError(f"record {i - 1} does not match the schema: {msg}", file=path, line=i) from None
        return
    try:
        with gzip.open(path, "rb") as f:
            for i, line in enumerate(f, 1):
                try:
                    yield RequestRecord.model_validate_json(line)
                except ValidationError as exc:
                    raise ToolkitError(f"record {i} does not match the schema: {exc.errors()[0]['msg']}", file=path,
                                       line=i) from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ToolkitError(f"cannot be decompressed to the end ({exc}): truncated or corrupted", file=path) from None


def read_records(path: Path) -> list[RequestRecord]:
    return list(iter_records(path))


# -- a run whose records `toolkit results recode` re-encoded: RECODED.json, what verify checks

RECODED = "RECODED.json"
PRECISION_MS = 0.001


class RecodedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str  # cells/<key>.jsonl.gz, the file it replaced
    source_sha256: str  # that file's bytes, as the run's SHA256SUMS listed them
    lines_sha256: str  # its decompressed JSON lines
    records: int
    exact: bool  # the decoded records give those lines again, byte for byte


class Recoded(BaseModel):
    model_config = ConfigDict(extra="forbid")

    codec: str = RECORDS_CODEC
    precision_ms: float = PRECISION_MS
    recoded_at: str
    toolkit_version: str
    files: dict[str, RecodedFile]  # cells/<key>.rec.xz -> what it replaced


def reencode(run: Path, exact_only: bool) -> list[str]:
    """Re-encode a finished run's plain records files (cells/<key>.jsonl.gz -> <key>.rec.xz), each recorded
    in RECODED.json, and write its SHA256SUMS again; returns the files re-encoded. exact_only: only those
    whose decoded records give the very lines again (a new run's, written at the microsecond), the others
    left plain. The caller has checked the run (toolkit.results.recode, or finalize that just wrote it)."""
    run = Path(run)
    listed = dict(reversed(ln.split("  ", 1)) for ln in (run / SUMS).read_text().splitlines())
    before = load_recoded(run)
    files = dict(before.files) if before else {}
    done: list[str] = []
    for src in sorted((run / "cells").glob(f"*{PLAIN}")):
        rel, dest = f"cells/{src.name}", src.with_name(src.name[: -len(PLAIN)] + COMPACT)
        lines = gzip.decompress(src.read_bytes())
        records = list(iter_records(src))
        blob = encode(records)
        back = list(iter_records(dest, blob))
        exact = plain_lines(back) == lines
        if len(back) != len(records) or (exact_only and not exact):
            continue
        write_atomic(dest, blob)
        files[f"cells/{dest.name}"] = RecodedFile(source=rel, source_sha256=listed[rel], records=len(records),
                                                  lines_sha256=hashlib.sha256(lines).hexdigest(), exact=exact)
        done.append(rel)
    if not done:
        return []
    rec = Recoded(recoded_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  toolkit_version=__version__, files=dict(sorted(files.items())))
    write_atomic(run / RECODED, json.dumps(rec.model_dump(mode="json"), indent=1) + "\n")
    for rel in done:
        (run / rel).unlink()
    write_sums(run)
    return done


def load_recoded(run: Path) -> Recoded | None:
    """The run's RECODED.json, None when its records were never re-encoded; ToolkitError when malformed."""
    path = Path(run) / RECODED
    if not path.is_file():
        return None
    try:
        return Recoded.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise ToolkitError(f"does not match the RECODED schema: {exc.errors()[0]['msg']}", file=path) from None


def recoded_problems(run: Path, rec: Recoded | None) -> list[tuple[str, str]]:
    """(file, what is wrong) with the run's re-encoding as recorded: a listed file missing, its source
    still there beside it, an exact one whose decoded records no longer give the run's lines."""
    if rec is None:
        return []
    out: list[tuple[str, str]] = []
    for rel, f in rec.files.items():
        if not (run / rel).is_file():
            out.append((rel, f"listed in {RECODED} but missing"))
            continue
        if (run / f.source).exists():
            out.append((f.source, f"still there beside its re-encoding {rel} ({RECODED}): which one is the run's?"))
        if f.exact:
            try:
                lines = plain_lines(list(iter_records(run / rel)))
            except ToolkitError:
                continue  # the records check names it
            if hashlib.sha256(lines).hexdigest() != f.lines_sha256:
                out.append((rel, f"its records no longer give the run's original lines ({RECODED}: exact, "
                                 f"{f.lines_sha256[:12]}...): edited"))
    return out


def tolerance_for(rec: Recoded | None, rel: str) -> float | None:
    """The rounding (ms) a re-encoded records file was written at, None when exact or not re-encoded."""
    f = rec.files.get(rel) if rec else None
    return None if f is None or f.exact else rec.precision_ms
