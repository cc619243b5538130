"""`toolkit results verify`: checksums and schema of a run folder; every problem names its file."""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import ValidationError

from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.errors import ToolkitError
from toolkit.schema.keys import STATUSES
from toolkit.results.archive import archive_files, sha256_file
from toolkit.schema.columns import COLUMNS, load_columns
from toolkit.schema.manifest import load_derived, load_manifest


@dataclass
class Problem:
    file: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)


def _json(path: Path, problems: list[Problem], rel: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        problems.append(Problem(rel, "missing"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(Problem(rel, f"not valid JSON ({exc}): truncated or edited"))
    return None


def _checksums(path: Path, status: str | None, problems: list[Problem]) -> None:
    sums = path / "SHA256SUMS"
    if not sums.exists():
        if status is not None:
            problems.append(Problem("SHA256SUMS", "missing although the run was finalized"))
        return
    listed: dict[str, str] = {}
    for i, line in enumerate(sums.read_text(errors="replace").splitlines(), 1):
        digest, _, rel = line.partition("  ")
        if len(digest) != 64 or not rel:
            problems.append(Problem("SHA256SUMS", f"line {i} is malformed"))
            continue
        listed[rel] = digest
    for rel, digest in listed.items():
        f = path / rel
        if not f.is_file():
            problems.append(Problem(rel, "listed in SHA256SUMS but missing"))
        elif sha256_file(f) != digest:
            problems.append(Problem(rel, "sha256 differs from SHA256SUMS: the file was truncated or edited "
                                         "after the run was finalized"))
    for rel in archive_files(path):
        if rel not in listed and not _is_tmp(rel):
            problems.append(Problem(rel, "not covered by SHA256SUMS (added after the run was finalized)"))


def _is_tmp(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(".") and name.endswith(".tmp")


def _records(path: Path, rel: str, problems: list[Problem]) -> None:
    """Decompress the whole file (gzip's CRC catches truncation) and check the first and last record."""
    first = last = None
    try:
        with gzip.open(path, "rb") as f:
            for line in f:
                first = first or line
                last = line
    except (EOFError, OSError, zlib.error) as exc:
        problems.append(Problem(rel, f"cannot be decompressed to the end ({exc}): truncated or corrupted"))
        return
    for which, line in (("first", first), ("last", last)):
        if line is None:
            continue
        try:
            RequestRecord.model_validate_json(line)
        except ValidationError as exc:
            problems.append(Problem(rel, f"{which} record does not match the schema: {exc.errors()[0]['msg']}"))


def _cells(path: Path, problems: list[Problem]) -> dict[str, dict]:
    cells = {}
    for p in sorted((path / "cells").glob("*.json")):
        key, rel = p.name[: -len(".json")], f"cells/{p.name}"
        data = _json(p, problems, rel)
        if data is None:
            continue
        try:
            cells[key] = CellSummary.model_validate(data).model_dump(mode="json")
        except ValidationError as exc:
            problems.append(Problem(rel, f"does not match the CellSummary schema: {exc.errors()[0]['msg']}"))
            continue
        gz = path / "cells" / f"{key}.jsonl.gz"
        if gz.exists():
            _records(gz, f"cells/{gz.name}", problems)
        else:
            problems.append(Problem(f"cells/{key}.jsonl.gz", "missing (its cell summary exists)"))
        npz = path / "cells" / f"{key}.npz"
        if npz.exists():
            try:
                cols = load_columns(npz)
                missing = [c for c in COLUMNS if c not in cols]
                if missing or len({len(v) for v in cols.values()}) > 1:
                    problems.append(Problem(f"cells/{npz.name}", f"columns missing or of unequal length {missing}"))
            except ToolkitError as exc:
                problems.append(Problem(f"cells/{npz.name}", exc.message))
    return cells


def verify_run(path: str | Path) -> list[Problem]:
    """Every problem of one run folder (an empty list: it verifies)."""
    path = Path(path)
    problems: list[Problem] = []
    if not path.is_dir():
        return [Problem(str(path), "no such run folder")]
    manifest = _json(path / "manifest.json", problems, "manifest.json")
    if manifest is not None:
        try:
            load_manifest(manifest, path / "manifest.json")
        except ToolkitError as exc:
            problems.append(Problem("manifest.json", exc.message))
    summary = _json(path / "summary.json", problems, "summary.json") if (path / "summary.json").exists() else None
    status = None
    if (path / "summary.json").exists():
        status = (summary or {}).get("status", "?")
    _checksums(path, status, problems)
    cells = _cells(path, problems)
    if summary is not None:
        if summary.get("status") not in STATUSES:
            problems.append(Problem("summary.json", f"status {summary.get('status')!r} is not one of {STATUSES}"))
        try:
            load_derived(summary.get("derived"), path / "summary.json")
        except ToolkitError as exc:
            problems.append(Problem("summary.json", f"derived: {exc.message}"))
        listed = {}
        for i, c in enumerate(summary.get("cells") or []):
            try:
                cs = CellSummary.model_validate(c)
            except ValidationError as exc:
                problems.append(Problem("summary.json", f"cells[{i}] does not match the schema: {exc.errors()[0]['msg']}"))
                continue

            listed[cs.key] = cs.model_dump(mode="json")
        for key in sorted(set(listed) | set(cells)):
            if key not in cells:
                problems.append(Problem("summary.json", f"lists cell {key}, whose files are missing"))
            elif key not in listed:
                problems.append(Problem(f"cells/{key}.json", "cell is not in summary.json (written after finalize?)"))
            elif listed[key] != cells[key]:
                problems.append(Problem("summary.json", f"entry for cell {key} differs from cells/{key}.json: edited"))
    for tmp in path.rglob(".*.tmp"):
        problems.append(Problem(tmp.relative_to(path).as_posix(), "left-over temporary file of an interrupted write"))
    return problems
