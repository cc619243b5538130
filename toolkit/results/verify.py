"""`toolkit results verify`: every folder the toolkit keeps under results/ checks out, each problem naming
its file. Plain `results verify` walks the whole root: run archives, the run archives nested in tune
sessions, the sessions' own files, and any other capture folder.

- a run archive: SHA256SUMS (once finalized), the schema of every file, and its content: each cell's
  records, per-request columns and summary agree (toolkit.results.consistency), summary.json's entries
  are the cells' files;
- a tune session (tune.json): its own SHA256SUMS (its runs keep theirs) and tune.json;
- any other folder of files (benchmark captures): its SHA256SUMS.

A folder written before the toolkit checksummed its kind (the committed results/gpu-validation/ and
results/sglang-h200-threshold/, tune sessions before 2026-12-04) has none: a warning, since nothing can
be checked, not an error (archives are never rewritten to add one).

`show`, `report`, `diff` and `slo` read only an archive that verifies (`open_verified`, the one loader they
share, with every check `verify` makes): a corrupted or edited archive is refused (exit 2) naming it and its
first problem, unless --force (--allow-unverified), which reads it with every problem printed first and
UNVERIFIED in every output (docs/results.md says why).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import ValidationError

from toolkit.checksums import NAME as SUMS, check_sums, is_run_archive, is_temp
from toolkit.errors import ToolkitError
from toolkit.results.archive import archive_files, stored_columns
from toolkit.results.compact import content_sha256, exists, glob, read_text, stored
from toolkit.results.consistency import check_cell
from toolkit.results.records import (RECODED, Recoded, load_recoded, read_records, recoded_problems, records_path,
                                     tolerance_for)
from toolkit.schema.columns import COLUMNS, registry_names, stored_under_old_names
from toolkit.schema.keys import STATUSES, cell_key
from toolkit.schema.manifest import load_derived, load_manifest
from toolkit.schema.records import CellSummary, RequestRecord

NO_SUMS = (f"no {SUMS}: written before the toolkit checksummed this kind of folder, so its files cannot be "
           "checked (archives are never rewritten to add one)")


@dataclass
class Problem:
    file: str
    message: str
    severity: str = "error"  # warning: nothing found wrong, but not everything could be checked

    def __str__(self) -> str:
        return f"{self.file}: {self.message}" if self.severity == "error" else f"{self.file}: warning: {self.message}"

    def to_dict(self) -> dict:  # json-edge: verify --json
        return asdict(self)


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def _json(path: Path, problems: list[Problem], rel: str):
    try:
        return json.loads(read_text(path))
    except FileNotFoundError:
        problems.append(Problem(rel, "missing"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(Problem(rel, f"not valid JSON ({exc}): truncated or edited"))
    return None


def _checksums(path: Path, status: str | None, problems: list[Problem]) -> None:
    problems.extend(verify_sums(path, status))


def verify_sums(path: Path, status: str | None) -> list[Problem]:
    """The checksum part of verify_run alone (`results list` makes it for every run): each file that SHA256SUMS
    does not match, or SHA256SUMS missing from a finalized run (`status`: summary.json's; None: not finalized)."""
    if not (path / SUMS).exists():
        return [Problem(SUMS, "missing although the run was finalized")] if status is not None else []
    return [Problem(rel, msg) for rel, msg in check_sums(path)]


def _stored_inputs(path: Path, manifest: dict | None, problems: list[Problem]) -> None:
    """Inputs kept once for a tune session (toolkit.bench.inputs STORE: <store>/<sha256>, outside the run's own
    SHA256SUMS; <sha256>.gz once the session is compacted): each blob the manifest names must be there, and its
    bytes (decompressed, through compact.read_bytes) must have exactly that sha256."""
    files = ((manifest or {}).get("inputs") or {}).get("files") or [] if isinstance(manifest, dict) else []
    for f in files:
        if not isinstance(f, dict) or not f.get("store") or not f.get("archived", True):
            continue
        digest = str(f.get("sha256") or "")
        blob = path / f["store"] / digest
        rel = f"{f['store']}/{digest}"
        if len(digest) != 64 or not exists(blob):
            problems.append(Problem(rel, f"input {f.get('path')} ({f.get('ref')}) is missing from the session's "
                                         "shared store"))
            continue
        rel = f"{f['store']}/{stored(blob).name}"
        got = content_sha256(blob)
        if got is None:
            problems.append(Problem(rel, f"input {f.get('path')} ({f.get('ref')}): not a valid gzip file: "
                                         "truncated or edited"))
            continue
        if got != digest:
            problems.append(Problem(rel, f"input {f.get('path')} ({f.get('ref')}): the stored bytes' sha256 differs "
                                         "from the manifest's: edited"))


def _records(path: Path, rel: str, problems: list[Problem]) -> list[RequestRecord] | None:
    """Every record of a cell, either form (toolkit.results.records: gzip's CRC and xz's check catch
    truncation; each line must match the schema); None when the file cannot be read whole."""
    try:
        return read_records(path)
    except ToolkitError as exc:
        problems.append(Problem(rel, exc.message))
        return None


def _cells(path: Path, problems: list[Problem], records: bool = True, imported: bool = False,
           recoded: Recoded | None = None) -> dict[str, dict]:  # data-keyed: cell key
    cells = {}
    for p in glob(path / "cells", "*.json"):
        key, rel = p.name[: -len(".json")], f"cells/{p.name}"
        data = _json(p, problems, rel)
        if data is None:
            continue
        try:
            summary = CellSummary.model_validate(data)
        except ValidationError as exc:
            problems.append(Problem(rel, f"does not match the CellSummary schema: {exc.errors()[0]['msg']}"))
            continue
        cells[key] = summary.model_dump(mode="json")
        gz, npz = records_path(path / "cells", key), path / "cells" / f"{key}.npz"
        recs = _records(gz, f"cells/{gz.name}", problems) if gz.exists() and records else None
        if not gz.exists():
            problems.append(Problem(f"cells/{gz.name}", "missing (its cell summary exists)"))
        cols, old = None, False
        if exists(npz):  # cells/<key>.npz, or .npz.gz once compacted: the arrays as the run wrote them
            try:
                raw = stored_columns(npz)
                cols, old = registry_names(raw), stored_under_old_names(raw)
                missing = [c for c in COLUMNS if c not in cols]
                if missing or len({len(v) for v in cols.values()}) > 1:
                    problems.append(Problem(f"cells/{npz.name}", f"columns missing or of unequal length {missing}"))
                    cols = None
            except ToolkitError as exc:
                problems.append(Problem(f"cells/{npz.name}", exc.message))
        if cols is not None and (recs is not None or not records):
            tol = tolerance_for(recoded, f"cells/{gz.name}")
            for which, msg in check_cell(summary, recs, cols, old_columns=old, imported=imported, tol_ms=tol):
                problems.append(Problem(f"cells/{npz.name}" if which == "npz" else rel,
                                        f"{msg}: the records, columns and summary of cell {key} disagree (edited?)"))
    return cells


def verify_run(path: str | Path, records: bool = True) -> list[Problem]:
    """Every problem of one run folder (an empty list: it verifies). records=False leaves the request records
    unread (what show, diff and report read is the summaries and columns: checked all the same), which keeps
    the check of a million-request archive well under a second."""
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
    summary = _json(path / "summary.json", problems, "summary.json") if exists(path / "summary.json") else None
    status = None
    if exists(path / "summary.json"):
        status = (summary or {}).get("status", "?")
    _checksums(path, status, problems)
    _stored_inputs(path, manifest, problems)
    source = (manifest or {}).get("source") if isinstance(manifest, dict) else None
    imported = isinstance(source, dict) and source.get("format") not in (None, "toolkit")
    recoded = _recoded(path, problems)
    cells = _cells(path, problems, records, imported, recoded)
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


def _recoded(path: Path, problems: list[Problem]) -> Recoded | None:
    """The run's RECODED.json (its records re-encoded by `toolkit results recode`): checked, and said as a
    warning, since the records below the stated rounding are not the run's own any more."""
    try:
        rec = load_recoded(path)
    except ToolkitError as exc:
        problems.append(Problem(RECODED, exc.message))
        return None
    if rec is None:
        return None
    problems.extend(Problem(rel, msg) for rel, msg in recoded_problems(path, rec))
    lossy = sum(1 for f in rec.files.values() if not f.exact)
    if lossy:
        problems.append(Problem(RECODED, f"records of {lossy} cell(s) re-encoded with times rounded to "
                                         f"{rec.precision_ms} ms ({rec.recoded_at}): checked within that rounding "
                                         "against the run's own columns and summaries; the originals' sha256s are "
                                         "kept, not their bytes",
                                "warning"))
    return rec


# -- other folders, discovery, and the readers' gate

def kind_of(path: Path) -> str:
    """'run' (manifest.json), 'session' (a tune session: tune.json) or 'folder'."""
    if (path / "manifest.json").is_file():
        return "run"
    if (path / "tune.json").is_file():
        return "session"
    return "folder"


def _session(path: Path, problems: list[Problem]) -> None:
    """A tune session's state, read as every reader reads it (toolkit.schema.tune.load_tune_state): valid
    JSON, a session's format and version, the typed fields."""
    from toolkit.schema.tune import STATE_FILE, load_tune_state

    if _json(path / STATE_FILE, problems, STATE_FILE) is None:
        return  # missing, or not JSON: said once
    try:
        load_tune_state(path / STATE_FILE)
    except ToolkitError as exc:
        problems.append(Problem(STATE_FILE, exc.message + (f" ({exc.hint})" if exc.hint else "")))


def verify_folder(path: str | Path) -> list[Problem]:
    """Every problem of one kept folder, whatever its kind (warnings included)."""
    path = Path(path)
    if not path.is_dir():
        return [Problem(str(path), "no such folder")]
    kind = kind_of(path)
    if kind == "run":
        return verify_run(path)
    problems: list[Problem] = []
    if kind == "session":
        _session(path, problems)
    if (path / SUMS).exists():
        problems.extend(Problem(rel, msg) for rel, msg in check_sums(path))
    else:
        problems.append(Problem(SUMS, NO_SUMS, "warning"))
    for tmp in path.rglob(".*.tmp"):
        problems.append(Problem(tmp.relative_to(path).as_posix(), "left-over temporary file of an interrupted write"))
    return problems


def discover(root: str | Path) -> list[Path]:
    """Every folder under root (root included) that verify checks: run archives, nested ones too (a tune
    session's runs), tune sessions, and every other folder that holds files. Sorted."""
    root = Path(root)
    out: set[Path] = set()

    def walk(d: Path) -> None:
        kind = kind_of(d)
        if kind == "run":
            out.add(d)
            return
        children = [p for p in d.iterdir() if p.is_dir() and not p.is_symlink()] if d.is_dir() else []
        if kind == "session" or (d != root and any(p.is_file() for p in d.iterdir())):
            out.add(d)  # its subfolders are its own (plots/, specs/): only the run archives among them count
            out.update(m.parent for m in d.rglob("manifest.json") if is_run_archive(m.parent))
            return
        for c in children:
            walk(c)

    if root.is_dir():
        walk(root)
    return sorted(out)


def open_verified(path: str | Path, allow_unverified: bool = False, warn=None):
    """The archive at path, read only when it verifies, every check of `results verify` (checksums, schema,
    content, the request records included: a record edited with its SHA256SUMS rewritten is refused too);
    else a ToolkitError naming the archive and its first problem (exit 2). With allow_unverified (--force) it
    is read anyway: a loud UNVERIFIED warning with each problem goes to `warn` first, and the archive carries
    the problems (`archive.unverified`) so that every output made from it says UNVERIFIED (mark_unverified).
    A warning (its records re-encoded, RECODED.json) goes to `warn` as a note: the run is read, never silently."""
    from toolkit.results.archive import open_archive

    path = Path(path)
    # a temp file is a write in progress (a run being watched) or an interrupted one: never read, so no reason
    # to refuse the archive
    found = verify_run(path)
    problems = [p for p in errors(found) if not is_temp(p.file.rsplit("/", 1)[-1])]
    if problems and not allow_unverified:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise ToolkitError(f"run {path.name} does not verify: {problems[0]}{more}", file=path,
                           hint=f"`toolkit results verify {path}` lists every problem; restore the run folder from a "
                                "copy, or pass --force (--allow-unverified) to read it anyway (its figures are then "
                                "not to be trusted, and every output says UNVERIFIED)")
    if problems and warn is not None:
        warn(f"WARNING: run {path} does not verify (UNVERIFIED); its figures are not to be trusted:")
        for p in problems:
            warn(f"  {p}")
    if warn is not None:  # nothing wrong, but said: records re-encoded at a stated rounding (RECODED.json)
        for p in found:
            if p.severity == "warning":
                warn(f"note: run {path.name}: {p.file}: {p.message}")
    archive = open_archive(path)
    archive.unverified = [str(p) for p in problems]
    return archive


def mark_unverified(report, *archives) -> None:
    """Say UNVERIFIED in every output of a report made from an archive read with --force: a first paragraph
    of the text, Markdown and HTML, and `unverified` in its JSON data."""
    from toolkit.results.report.model import Para

    bad = {str(a.path): a.unverified for a in archives if getattr(a, "unverified", None)}
    if not bad:
        return
    lines = [f"UNVERIFIED: run {p} does not verify ({len(v)} problem(s), e.g. {v[0]}); read with --force: its "
             "figures are not to be trusted" for p, v in bad.items()]
    report.blocks.insert(0, Para("\n".join(lines)))
    if isinstance(report.data, dict):
        report.data["unverified"] = bad
