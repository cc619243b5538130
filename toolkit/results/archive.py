"""The run archive: one folder per run, written once, read by list/show/verify/diff/report.

    results/<matrix>/<run-id>/
      manifest.json              written at create (schema version, specs, image, commands, host, ...)
      cells/<key>.jsonl.gz       every RequestRecord of a cell (warmup included, flagged)
      cells/<key>.npz            per-request numeric columns of the measured, successful requests (.npz.gz
                                 once finalized: toolkit.results.compact; read through stored_columns)
      cells/<key>.json           the CellSummary; written last, so its presence means "cell done"
      logs/...                   server logs
      summary.json               at finalize: status, finished_at, cells, derived results
      report.md                  at finalize
      SHA256SUMS                 at finalize: `sha256sum -c` format over every other file

Every file is written atomically (temp + rename) and only once; a complete run is never rewritten.
docs/results.md describes the format.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from pydantic import BaseModel, ValidationError

from toolkit import __version__
from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.gitinfo import git_revision
from toolkit.specs import sha256_file
from toolkit.errors import ToolkitError
from toolkit.fsutil import write_atomic, write_json
from toolkit.schema.keys import FORMAT, SCHEMA_VERSION, STATUSES, cell_key, safe_name  # noqa: F401 (re-exported)
from toolkit.schema.manifest import Derived, Manifest, Summary, load_manifest, load_summary
from toolkit.schema.columns import COLUMNS, columns_from_records, load_stored, registry_names, save_columns
from toolkit.checksums import folder_files, write_sums
from toolkit.results.compact import exists, finish, glob, read_bytes, read_text, stored
from toolkit.results.records import iter_records, plain_lines, records_exist, records_path
from toolkit.signals import signals_held
from toolkit.scrub import referenced_vars, scrub, scrub_text, secret_values

RESERVED = ("manifest.json", "summary.json", "report.md", "SHA256SUMS")
def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def archive_files(path: Path) -> list[str]:
    """Every regular file under the run folder except SHA256SUMS (and temp files), as sorted relative POSIX
    paths: what SHA256SUMS lists (toolkit.checksums)."""
    return folder_files(path)


def stored_columns(path: Path) -> dict[str, np.ndarray]:  # data-keyed: column name
    """A cell's per-request columns under the names the run stored them (toolkit.schema.columns), from
    cells/<key>.npz or, once the run is compacted, cells/<key>.npz.gz decompressed: the one reader of that file
    (registry_names gives the registry's names). ToolkitError for a file that cannot be read whole."""
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        raise ToolkitError("the request columns are missing", file=path) from None
    except (OSError, EOFError, zlib.error) as exc:
        raise ToolkitError(f"cannot decompress the request columns ({exc})", file=stored(path),
                           hint="the file was truncated or edited; `toolkit results verify` names what "
                                "changed") from None
    return load_stored(stored(path), data)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except FileNotFoundError:
        raise ToolkitError(f"{path.name} is missing", file=path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ToolkitError(f"{path.name} is not valid JSON ({exc})", file=path,
                           hint="the file was truncated or edited; `toolkit results verify` names what changed") from None


class ArchiveWriter:
    """Writes one run. The matrix runner creates it, writes cells as they finish, then finalizes."""

    def __init__(self, path: Path, manifest: Manifest):
        self.path = Path(path)
        self.manifest = manifest
        self.run_id = manifest.run_id
        # this process's secret variables, and those the specs name (a target's api_key_env): masked wherever
        # they turn up
        self.secrets = secret_values(names=referenced_vars(manifest.model_dump(mode="json")))

    @classmethod
    def create(cls, root: str | Path, matrix_name: str, manifest: Manifest | dict | None = None) -> "ArchiveWriter":
        """A new run folder with its manifest.json (the fields set in `manifest`, scrubbed, plus the
        archive's own: format, schema_version, run_id, matrix_name, started_at, toolkit)."""
        if not isinstance(manifest, Manifest):
            manifest = Manifest.model_validate(manifest or {})
        parent = Path(root) / safe_name(matrix_name)
        parent.mkdir(parents=True, exist_ok=True)
        while True:  # os.mkdir is atomic: two concurrent runs never get the same folder
            run_id = new_run_id()
            try:
                os.mkdir(parent / run_id)
                break
            except FileExistsError:
                continue
        path = parent / run_id
        (path / "cells").mkdir()
        (path / "logs").mkdir()
        written = manifest.written()
        full = scrub(written, secret_values(names=referenced_vars(written)))
        full.setdefault("started_at", now_utc())
        full.setdefault("toolkit", {"version": __version__, "git_sha": git_revision()})
        full.update(format=FORMAT, schema_version=SCHEMA_VERSION, run_id=run_id, matrix_name=matrix_name)
        write_json(path / "manifest.json", full)
        return cls(path, load_manifest(full, path / "manifest.json"))

    @classmethod
    def resume(cls, run_dir: str | Path) -> "ArchiveWriter":
        """Continue a partial run: write the missing cells, then finalize again. Complete runs are refused."""
        path = Path(run_dir)
        manifest = load_manifest(_read_json(path / "manifest.json"), path / "manifest.json")
        if exists(path / "summary.json"):
            summary = load_summary(_read_json(path / "summary.json"), path / "summary.json")
            if summary.status == "complete":
                raise ToolkitError(f"run {path.name} is complete; a complete run is never rewritten", file=path,
                                   hint="start a new run instead")
            if not summary.interrupted:  # every planned cell is archived: resume would run nothing
                raise ToolkitError(f"run {path.name} is {summary.status} ({summary.why()}) but was not interrupted: "
                                   "every cell it planned ran, and resume runs only cells that never ran",
                                   file=path, hint="fix the cause of the failed cells (their reasons are in "
                                   "`toolkit results show RUN`) and start a new run")
        for tmp in path.rglob(".*.tmp"):  # half-written temp files of the interrupted run (never data)
            tmp.unlink()
        return cls(path, manifest)

    def _check_open(self) -> None:
        summary = self.path / "summary.json"
        if exists(summary) and _read_json(summary).get("status") == "complete":
            raise ToolkitError(f"run {self.run_id} is complete and cannot be changed", file=self.path)

    def write_cell(self, summary: CellSummary, records: list[RequestRecord]) -> str:
        """Write one cell's records, columns and summary (in that order), each once and atomically."""
        self._check_open()
        key = summary.key
        base = self.path / "cells" / key
        if exists(base.with_suffix(".json")):
            raise ToolkitError(f"cell {key} is already in run {self.run_id}", file=base.with_suffix(".json"),
                               hint="cells are written once; resume writes only the missing ones (done_cells())")
        summary = summary.model_copy(update={k: scrub_text(getattr(summary, k), self.secrets)
                                             for k in ("reason", "log_tail") if getattr(summary, k)})
        lines = plain_lines(records)
        write_atomic(base.parent / f"{key}.jsonl.gz", gzip.compress(lines, compresslevel=6, mtime=0))
        write_atomic(base.parent / f"{key}.npz", save_columns(columns_from_records(records)))
        write_atomic(base.with_suffix(".json"), summary.model_dump_json(indent=2) + "\n")
        return key

    def write_file(self, relpath: str, data: bytes | str) -> Path:
        """Any extra file (server logs, ...) under the run folder; text is scrubbed of secrets."""
        self._check_open()
        rel = Path(relpath)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ToolkitError(f"archive file path {relpath!r} must be relative and stay inside the run folder")
        if rel.as_posix() in RESERVED or rel.parts[0] == "cells":
            raise ToolkitError(f"{relpath!r} is written by the archive itself; choose another name (e.g. logs/...)")
        if isinstance(data, bytes):
            try:
                data = data.decode()
            except UnicodeDecodeError:
                return write_atomic(self.path / rel, data)  # binary: written as is
        return write_atomic(self.path / rel, scrub_text(data, self.secrets))

    def amend_manifest(self, field: str, value: BaseModel) -> None:
        """Set one manifest field learnt while the run is open (a Slurm target's jobs: ids and nodes exist only
        once submitted), scrubbed like the rest. Only that key of manifest.json changes; a complete run's never."""
        self._check_open()
        path = self.path / "manifest.json"
        raw = _read_json(path)
        raw[field] = scrub(value.model_dump(mode="json"), self.secrets)
        write_json(path, raw)
        self.manifest = self.manifest.model_copy(update={field: value})

    def done_cells(self) -> set[str]:
        """Keys of the cells fully written (their summary, written last, exists)."""
        return {p.name[: -len(".json")] for p in glob(self.path / "cells", "*.json")}

    def finalize(self, status: str, derived: Derived | dict | None = None, report_md: str | Callable[[], str] = "",
                 interrupted: bool | None = None, compact: bool = True) -> Path:
        """Write summary.json, report.md and SHA256SUMS, then compact the run (toolkit.results.compact.finish)
        unless it was interrupted (or `compact` is False: the plain form toolkit versions before 2026-12-06
        wrote, which tests' synthetic archives keep). `interrupted`: a signal stopped the run (resume
        completes it; None leaves it to readers to infer from the status, as for archives from before the
        field). A partial/failed run may be finalized again. `report_md` as a callable is rendered once
        summary.json is written, so the report reads the run's finish time and status as stored."""
        if status not in STATUSES:
            raise ToolkitError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        self._check_open()
        if not isinstance(derived, Derived):
            derived = Derived.model_validate(derived or {})
        cells = [CellSummary.model_validate_json(read_text(self.path / "cells" / f"{k}.json"))
                 for k in sorted(self.done_cells())]
        summary = Summary(run_id=self.run_id, status=status, interrupted=interrupted,
                          started_at=self.manifest.started_at, finished_at=now_utc(), cells=cells, derived=derived)
        data = summary.model_dump(mode="json")
        data["derived"] = scrub(derived.model_dump(mode="json", exclude_unset=True), self.secrets)  # as set
        with signals_held():  # Ctrl-C waits until the three are written: never a summary without its sums
            write_json(self.path / "summary.json", data)
            md = report_md() if callable(report_md) else report_md
            write_atomic(self.path / "report.md", md or f"# {self.manifest.matrix_name} {self.run_id}\n")
            write_sums(self.path)
            if compact:  # compacted as written; an interrupted run stays plain for --resume
                finish(self.path)
        return self.path


@dataclass
class Archive:
    """A run read back. Cells come from cells/*.json (the source of truth while a run is partial):
    `cells` is the list, `cell_map` the same keyed by cell_key."""

    path: Path
    manifest: Manifest
    summary: Summary | None
    cell_map: dict[str, CellSummary] = field(default_factory=dict)
    unverified: list[str] = field(default_factory=list)  # read with --force although these problems were found

    @property
    def cells(self) -> list[CellSummary]:
        return list(self.cell_map.values())

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.path.name

    @property
    def matrix_name(self) -> str:
        return self.manifest.matrix_name or self.path.parent.name

    @property
    def status(self) -> str:
        return self.summary.status if self.summary else "incomplete"

    @property
    def interrupted(self) -> bool:
        """Stopped before every planned cell ran (a signal, or no summary.json: killed): resume completes it."""
        return self.summary is None or bool(self.summary.interrupted)

    @property
    def why(self) -> str:
        """Why the run is not complete, in words ("" when it is)."""
        if self.summary is None:
            return "never finalized, the run was killed: --resume completes it"
        return self.summary.why()

    @property
    def derived(self) -> Derived:
        return self.summary.derived if self.summary else Derived()

    def iter_records(self, key: str) -> Iterator[RequestRecord]:
        """A cell's records, plain (<key>.jsonl.gz) or re-encoded (<key>.rec.xz: toolkit.results.records)."""
        path = records_path(self.path / "cells", key)
        if not path.exists():
            raise ToolkitError(f"no records for cell {key}", file=path)
        try:
            yield from iter_records(path)
        except ToolkitError as exc:  # not gzip/xz, cut short, not text, or a record off the schema
            raise ToolkitError(f"the cell's records cannot be read: {exc.message}", file=path, line=exc.line,
                               hint=f"`toolkit results verify {self.path}` lists every problem; restore "
                                    "the run folder from a copy") from None

    def columns(self, key: str) -> dict[str, np.ndarray]:  # data-keyed: column name
        """Per-request numeric columns of a cell (from the .npz; derived from the records if it is absent)."""
        path = self.path / "cells" / f"{key}.npz"
        if exists(path):
            return registry_names(stored_columns(path))
        if records_exist(self.path / "cells", key):
            return columns_from_records(list(self.iter_records(key)))
        return {c: np.empty(0, np.float32) for c in COLUMNS}


def open_archive(path: str | Path) -> Archive:
    path = Path(path)
    if not path.is_dir():
        raise ToolkitError(f"no run folder at {path}", hint="`toolkit results list` shows the archived runs")
    manifest = load_manifest(_read_json(path / "manifest.json"), path / "manifest.json")
    summary = (load_summary(_read_json(path / "summary.json"), path / "summary.json")
               if exists(path / "summary.json") else None)
    cells: dict[str, CellSummary] = {}
    for p in glob(path / "cells", "*.json"):
        try:
            cells[p.name[: -len(".json")]] = CellSummary.model_validate_json(read_text(p))
        except ValidationError as exc:
            raise ToolkitError(f"cell summary does not match the schema: {exc.errors()[0]['msg']}", file=p,
                               hint="`toolkit results verify` checks every file") from None
    return Archive(path=path, manifest=manifest, summary=summary, cell_map=cells)
