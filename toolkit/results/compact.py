"""Compacted archives: a finished run archive's (or tune session's) large files stored gzipped as
NAME.gz, read transparently. Every reader of an archive file that may be compacted opens it through
`stored` / `read_bytes` / `read_text` here (NAME or NAME.gz), the one place that knows.

What is compacted (`compactable`): server logs (*.log), and from COMPACT_MIN bytes JSON files (summary.json,
cells/*.json, servers/*.json, telemetry/*.json, ...), a cell's per-request columns (cells/<key>.npz, written
uncompressed by np.savez: its zip headers and arrays compress 2.3x here, where np.savez_compressed, one deflate
stream per array beside the stored headers, gives 1.4x on the committed cells) and a run's archived inputs
(inputs/files/<path>: the bytes reproduce lays out, read through `read_bytes`); never manifest.json or
tune.json (a folder's kind is read from them), slurm/, nor a file already named .gz or whose NAME.gz is
taken. In a tune session also, from COMPACT_MIN bytes: its prompt split (prompts/*.jsonl) and its input
store's blobs (inputs/sha256/<sha256>, the bytes its runs read: reproduce and verify read them through
`read_bytes`, decompressed, and check the sha256 of that). Records are already .jsonl.gz or .rec.xz. A run
or a session that resume could still complete (interrupted) is not compacted. gzip level 9 without name or
mtime: the same bytes every time.

When: at finalize. `ArchiveWriter.finalize` (bench matrix, tune's runs, bench noise's runs, imports) and a tune
session's finish call `finish` once the folder's SHA256SUMS is written, unless the run was interrupted (resume
then reads and appends to plain files). `toolkit results compact` remains for archives written before.

Integrity: SHA256SUMS lists the bytes as stored (NAME.gz), so `sha256sum -c SHA256SUMS` still checks every
file. `compact` first checks the folder's SHA256SUMS (a folder that does not verify is left as it is), then
keeps the original line of each file it compresses in SHA256SUMS.orig (the digest of NAME as the run
wrote it; itself listed in the new SHA256SUMS) and rewrites SHA256SUMS; toolkit.checksums.check_sums checks
that each NAME.gz listed there decompresses to exactly those bytes. The chain from the run's own sums is kept.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from pathlib import Path

from toolkit.checksums import NAME as SUMS, ORIG, check_sums, folder_files, is_run_archive, write_sums
from toolkit.errors import ToolkitError
from toolkit.fsutil import sha256_file, write_atomic
from toolkit.results.records import reencode
from toolkit.schema.manifest import InputFile
from toolkit.schema.tune import RESUMABLE

COMPACT_MIN = 1024
GZ = ".gz"
KEPT = ("manifest.json", "tune.json", "RECODED.json")
STORE = "inputs/sha256"  # a tune session's inputs, once for all its runs, by content (toolkit.bench.inputs)
FILES = "inputs/files"  # a run's own inputs, under the path the manifest lists


def stored_at(run: Path, f: InputFile) -> Path:
    """Where an archived input (a manifest's InputFile) lies: inputs/files/<path> in the run, or <store>/<sha256>
    (a tune session's runs); NAME.gz once compacted: read it through `exists` and `read_bytes` here."""
    return run / f.store / (f.sha256 or "") if f.store else run / FILES / f.path


def stored(path: Path) -> Path:
    """The file that holds NAME: path itself, else path.gz if that exists, else path (missing)."""
    path = Path(path)
    if path.exists():
        return path
    gz = path.with_name(path.name + GZ)
    return gz if gz.exists() else path


def exists(path: Path) -> bool:
    return stored(path).exists()


def read_bytes(path: Path) -> bytes:
    """NAME's content, from NAME or NAME.gz (FileNotFoundError names NAME when neither exists)."""
    p = stored(path)
    return gzip.decompress(p.read_bytes()) if p.name.endswith(GZ) and p != Path(path) else p.read_bytes()


def content_sha256(path: Path) -> str | None:
    """The sha256 of NAME's content (read_bytes: decompressed from NAME.gz), None when NAME.gz cannot be
    decompressed (truncated or edited). FileNotFoundError when neither exists."""
    try:
        return hashlib.sha256(read_bytes(path)).hexdigest()
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zlib.error):
        return None


def read_text(path: Path) -> str:
    return read_bytes(path).decode()


def glob(folder: Path, pattern: str) -> list[Path]:
    """The logical files (NAME for NAME.gz) in folder matching pattern (e.g. '*.json'), sorted."""
    folder = Path(folder)
    names = {p.name for p in folder.glob(pattern)} | {p.name[: -len(GZ)] for p in folder.glob(pattern + GZ)}
    return [folder / n for n in sorted(names)]


def compactable(rel: str, size: int, session: bool = False) -> bool:
    """Whether the file at rel (relative to its folder) is stored as NAME.gz; `session`: the folder is a tune
    session (tune.json), whose prompt split and input store are compacted too."""
    parts = rel.split("/")
    if session and size >= COMPACT_MIN and not rel.endswith(GZ) and (
            (len(parts) == 2 and parts[0] == "prompts" and rel.endswith(".jsonl"))
            or (len(parts) == 3 and rel.startswith(STORE + "/") and _is_digest(parts[2]))):
        return True
    if rel in KEPT or parts[0] == "slurm" or rel.endswith(GZ):
        return False
    if parts[0] == "inputs":  # a run's inputs/files/<path>; the store's blobs only in their session (above)
        return len(parts) > 2 and parts[1] == "files" and size >= COMPACT_MIN
    return rel.endswith(".log") or (rel.endswith((".json", ".npz")) and size >= COMPACT_MIN)


def _is_digest(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def compact(folder: Path) -> list[str]:
    """Compact one finished folder (a run archive or a tune session) and the run archives nested in it;
    returns the files compressed (relative to folder). A folder without SHA256SUMS, or whose sums do not
    match, is refused: its evidence would be lost. In a tune session written before runs shared their inputs,
    each nested run's inputs/files/ also move to the session's store (share_inputs)."""
    folder = Path(folder)
    session = (folder / "tune.json").is_file() and (folder / SUMS).is_file()
    if session:
        _compact_one(folder, compress=False)  # only the check: the session must verify before anything moves
    done: list[str] = []
    moved = False
    for sub in sorted(p for p in folder.rglob("*") if p.is_dir() and is_run_archive(p)):
        if session:  # its inputs move to the store as the run wrote them, before what stays is compacted
            _compact_one(sub, compress=False)
            shared = share_inputs(sub, folder / STORE)
            moved = moved or bool(shared)
            done += [f"{sub.relative_to(folder).as_posix()}/{r}" for r in shared]
        done += [f"{sub.relative_to(folder).as_posix()}/{r}" for r in _compact_one(sub)]
    if moved:
        write_sums(folder)  # the session's list now covers the store's blobs
    return done + _compact_one(folder)


def share_inputs(run: Path, store: Path) -> list[str]:
    """Move a run's archived inputs (inputs/files/<path>, not scrubbed) to the shared store at <sha256>, the
    manifest's entry naming the store relative to the run (InputFile.store), and write the run's SHA256SUMS
    again; each file's bytes are checked against the manifest's sha256 first. Returns the files moved."""
    manifest = json.loads((run / "manifest.json").read_text())
    files = (manifest.get("inputs") or {}).get("files") or []
    rel_store = os.path.relpath(store, run).replace(os.sep, "/")
    moved: list[str] = []
    for f in files:
        src = run / "inputs" / "files" / str(f.get("path"))
        if f.get("store") or not f.get("archived", True) or f.get("scrubbed") or not src.is_file():
            continue
        if sha256_file(src) != f.get("sha256"):
            raise ToolkitError(f"{src} is not the bytes its manifest lists; it is left as it is", file=src)
        blob = store / f["sha256"]
        if not exists(blob):  # stored already, plain or as <sha256>.gz
            blob.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(blob, src.read_bytes())
        f["store"] = rel_store
        moved.append(f"inputs/files/{f['path']}")
    if not moved:
        return []
    write_atomic(run / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    for rel in moved:
        (run / rel).unlink()
    for d in sorted((p for p in (run / "inputs").rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    if (run / "inputs").is_dir() and not any((run / "inputs").iterdir()):
        (run / "inputs").rmdir()
    write_sums(run)
    return moved


def finish(folder: Path) -> list[str]:
    """Compact a folder just finalized (its SHA256SUMS freshly written by the caller, so not checked again),
    and write a run's records in the codec (cells/<key>.rec.xz, RECODED.json: exact) where decoding gives
    the very lines the run wrote; an interrupted run is left plain (nothing is raised): resume completes it."""
    folder = Path(folder)
    if is_run_archive(folder) and _interrupted(folder):
        return []
    done = _compact_one(folder, check=False)
    if is_run_archive(folder):  # records in the codec where it holds them exactly (toolkit.results.records)
        done += reencode(folder, exact_only=True)
    return done


def _interrupted(folder: Path) -> bool:
    """As Archive.interrupted: no summary (killed), or stopped by a signal (a summary without the field:
    `partial` meant interrupted, as toolkit.schema.manifest.load_summary reads it)."""
    summary = json.loads(read_text(folder / "summary.json")) if exists(folder / "summary.json") else None
    if summary is None:
        return True
    flag = summary.get("interrupted")
    return summary.get("status") == "partial" if flag is None else bool(flag)


def _is_session(folder: Path) -> bool:
    return (folder / "tune.json").is_file() and not is_run_archive(folder)


def _session_open(folder: Path) -> bool:
    """A tune session that resume may still go on with (toolkit.tune.state.resume_state: not complete or failed)."""
    try:
        status = json.loads((folder / "tune.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return False  # not a session's state: verify names it
    return status in RESUMABLE


def _compact_one(folder: Path, check: bool = True, compress: bool = True) -> list[str]:
    if not (folder / SUMS).is_file():
        raise ToolkitError(f"{folder} has no {SUMS}: only a finished folder is compacted", file=folder)
    problems = check_sums(folder) if check else []
    if problems:
        rel, msg = problems[0]
        raise ToolkitError(f"{folder} does not verify ({rel}: {msg}); it is left as it is", file=folder,
                           hint="`toolkit results verify` lists every problem")
    if is_run_archive(folder):
        if _interrupted(folder):
            raise ToolkitError(f"{folder} was interrupted: resume may still complete it, so it is left as it is",
                               file=folder)
    session = _is_session(folder)
    if session and _session_open(folder):
        raise ToolkitError(f"{folder} is a tune session that did not finish: `--resume` may still complete it "
                           "(reading its prompts/ as written), so it is left as it is", file=folder / "tune.json")
    if not compress:
        return []
    files = folder_files(folder)
    todo = [r for r in files if compactable(r, (folder / r).stat().st_size, session)
            and not (folder / (r + GZ)).exists()]  # an input named NAME beside one named NAME.gz: left as it is
    if not todo:
        return []
    listed = dict(reversed(ln.split("  ", 1)) for ln in (folder / SUMS).read_text().splitlines())
    orig = dict(reversed(ln.split("  ", 1)) for ln in
                ((folder / ORIG).read_text().splitlines() if (folder / ORIG).is_file() else []))
    orig.update({r: listed[r] for r in todo})  # a run finalized again (resumed): the newest bytes of NAME
    orig_text = "".join(f"{d}  {r}\n" for r, d in orig.items())
    for r in todo:
        write_atomic(folder / (r + GZ), gzip.compress((folder / r).read_bytes(), compresslevel=9, mtime=0))
    write_atomic(folder / ORIG, orig_text)
    for r in todo:
        (folder / r).unlink()
    write_sums(folder)
    return todo
