"""inputs/: the bytes of every file a run read, so that `toolkit results reproduce` can replay it with no
checkout at hand.

    writer = archive_run(root, plan, manifest)     # the runner's one call for a new run
    matrix_path = materialize(archive, tree_dir)   # replay: the files back in their layout, each checked

Archived (bytes under inputs/files/<path>, listed in the manifest's `inputs` and in SHA256SUMS):
  the Matrix spec and every file it extends, its Environment (and extends chain), the Hosts spec of a
  hosts target, patches, the user's workload, holdout and training-data files, and the chat template /
  tokenizer config of a `model.path` model.
A run archived inside a tune session (its results root holds tune.json) stores each such file once for the
whole session, by content: <session>/inputs/sha256/<sha256> (STORE), the manifest's entry naming that folder
relative to the run (`store`); verify and replay check the blob's sha256 against the entry, as for a file under
inputs/files/ (the session's SHA256SUMS lists the blobs too). Scrubbed files stay in the run. A finished run
stores its inputs/files/ of 1 KiB or more gzipped (NAME.gz), a finished session its blobs (<sha256>.gz,
toolkit.results.compact): every read here goes through `compact.stored_at` and `compact.read_bytes`, so the
sha256 checked and the bytes laid out are the decompressed ones.
Referenced only (path and sha256, no bytes): CA bundles (trust material stays out of archives) and a
`model.path` directory (weights are too big); replay checks them where the run read them.
Not copied: bundled workloads (the manifest's workload hash is matched against the toolkit's own
prompts at replay) and the dummy model (regenerated from the resolved spec; its recipe hash is kept).

The files keep their layout relative to their common folder, so the relative paths inside the specs
resolve the same way and the replayed specs hash the same as the original's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.fsutil import write_atomic
from toolkit.bench.sources import other_environments
from toolkit.results.compact import FILES, STORE, content_sha256, exists, read_bytes, stored, stored_at
from toolkit.results.archive import Archive, ArchiveWriter
from toolkit.scrub import referenced_vars, scrub_text, secret_values
from toolkit.schema.manifest import DummyModelRecord, DriftRecord, InputFile, InputsRecord, Manifest
from toolkit.specs import PACKAGED, LoadedSpec, referenced_files, sha256_file


def session_store(root: Path) -> Path | None:
    """The shared input store of a tune session whose runs are archived under root (None: not a session)."""
    return Path(root) / STORE if (Path(root) / "tune.json").is_file() else None
REFERENCE_ONLY = {"ca_bundle"}  # roles whose bytes never go in an archive
MODEL_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json", "generation_config.json",
               "config.json", "special_tokens_map.json")
MODEL_FILE_MAX = 1 << 20


@dataclass
class Origin:
    """What a replay adds to the run it starts (toolkit.bench.reproduce): the run it reproduces, the drift
    it accepted, and the image it runs (None: the plan's own)."""

    run_id: str
    drift: list[DriftRecord] = field(default_factory=list)
    build: Any = None  # toolkit.schema.manifest.BuildRecord
    sweep: Any = None  # toolkit.schema.sweep.SweepRecord: a sweep's recorded rates, run again, not re-probed


# -- recording (a new run)

def _role(key: str) -> str:
    last = key.split(":")[-1]
    if "ca_bundle" in last:
        return "ca_bundle"
    if "patches" in last:
        return "patch"
    if last.endswith(".holdout"):
        return "holdout"
    if last == "training_data":
        return "training_data"
    return "workload" if last.startswith("workloads") else "file"


def _entries(plan) -> list[tuple[str, str, Path]]:
    """(key, role, path) of every file the run reads, specs first."""
    out: list[tuple[str, str, Path]] = []
    specs: list[tuple[str, LoadedSpec]] = [("matrix", plan.spec), ("environment", plan.env_spec)]
    # the other Environments arms come from (`{name, environment, preset}`), each once
    environments = specs[1:] + list(other_environments(plan.sources, plan.env_spec).items())
    if plan.hosts_spec is not None:
        specs.append(("target.hosts", plan.hosts_spec))
    specs += environments[1:]
    for name, spec in specs:
        for i, f in enumerate(spec.files or [spec.path]):
            out.append((name if i == 0 else f"{name}.extends[{i - 1}]", "spec", Path(f)))
    for name, spec in [specs[0], *environments]:
        for key, f in referenced_files(spec).items():
            if key not in ("environment", "target.hosts") and not key.endswith("].environment"):  # specs, above
                out.append((f"{name}:{key}", _role(key), f))
    for name, spec in environments:
        model = getattr(spec.model, "model", None)
        if model is not None and model.path:
            out.append((f"{name}:model.path", "model", spec.path_of(("model", "path"), model.path)))
    return out


def _archived_bytes(data: bytes, secrets: list[str]) -> bytes:
    """What ArchiveWriter.write_file stores for `data`: text is scrubbed of secrets, binary kept as is."""
    try:
        return scrub_text(data.decode(), secrets).encode()
    except UnicodeDecodeError:
        return data


def _abs(p: Path) -> str:
    return os.path.abspath(os.path.expanduser(str(p)))


def collect(plan) -> tuple[InputsRecord, dict[str, bytes]]:
    """The inputs listing of a planned run and the bytes to archive ({tree path: original bytes})."""
    entries = _entries(plan)
    secrets = secret_values(names=referenced_vars(plan.m.model_dump(mode="json")))  # as the archive writer masks
    # a model the toolkit ships (`model.path: toolkit:NAME`), kept out of the tree's root
    packaged = {_abs(e.path_of(("model", "path"), e.model.model.path)) for e in plan.env_specs()
                if getattr(e.model, "model", None) is not None and str(e.model.model.path or "").startswith(PACKAGED)}
    root = os.path.commonpath([os.path.dirname(_abs(p)) for _, _, p in entries if _abs(p) not in packaged])
    files: list[InputFile] = []
    data: dict[str, bytes] = {}
    seen: set[str] = set()
    for key, role, p in entries:
        src = _abs(p)
        rel = PurePosixPath(*Path(os.path.relpath(src, root)).parts).as_posix()
        if src in packaged:  # a model the toolkit ships: archived beside the specs' tree, under its name
            rel = f"_toolkit/{Path(src).name}"
        if role == "model":
            files.append(InputFile(ref=key, role=role, path=rel, source=src, archived=False, files=_model_files(p)))
            for name in files[-1].files:
                raw = (Path(src) / name).read_bytes()
                data[f"{rel}/{name}"] = raw
                files.append(_file(f"{key}/{name}", "model_file", f"{rel}/{name}", str(Path(src) / name), raw,
                                   secrets))
            continue
        if rel in seen:
            continue  # one file named twice (a spec that is also extended, a patch listed twice)
        seen.add(rel)
        raw = Path(src).read_bytes()
        entry = _file(key, role, rel, src, raw, secrets)
        if role in REFERENCE_ONLY:
            entry.archived = False
        else:
            data[rel] = raw
        files.append(entry)
    record = InputsRecord(matrix=files[0].path, files=files, dummy_model=dummy_record(plan.env_spec))
    return record, data


def _file(key: str, role: str, rel: str, src: str, raw: bytes, secrets: list[str]) -> InputFile:
    import hashlib

    return InputFile(ref=key, role=role, path=rel, source=src, sha256=hashlib.sha256(raw).hexdigest(),
                     size=len(raw), scrubbed=_archived_bytes(raw, secrets) != raw)


def _model_files(d: Path) -> dict[str, str]:  # data-keyed: model file name
    """The small files of a model directory that decide how prompts become tokens (chat template, config)."""
    return {n: sha256_file(d / n) for n in MODEL_FILES
            if (d / n).is_file() and (d / n).stat().st_size <= MODEL_FILE_MAX}


def dummy_record(env_spec: LoadedSpec) -> DummyModelRecord | None:
    env = env_spec.model
    if env.model is None or env.model.dummy is None:
        return None
    from toolkit.serve.dummy import RECIPE, model_hash

    return DummyModelRecord(hash=model_hash(env.model.dummy), recipe=RECIPE)


def archive_run(root: Path, plan, manifest: Manifest, origin: Origin | None = None) -> ArchiveWriter:
    """The run's archive, with the inputs listing in its manifest and the files' bytes under inputs/files/
    (and, for a replay, `reproduces` and `drift`). The runner calls this once, when a new run starts."""
    record, data = collect(plan)
    update: dict[str, Any] = {"inputs": record}
    if origin is not None:
        update.update(reproduces=origin.run_id, drift=origin.drift)
    store = session_store(root)
    if store is not None:  # a tune session: every run's unchanged inputs stored once, by content
        for f in record.files:
            if f.archived and not f.scrubbed and f.path in data:
                f.store = os.path.relpath(store, Path(root) / plan.m.name / "_").replace(os.sep, "/")
    writer = ArchiveWriter.create(root, plan.m.name, manifest.model_copy(update=update))
    by_path = {f.path: f for f in record.files}
    for rel, raw in data.items():
        if store is not None and by_path.get(rel) is not None and by_path[rel].store:
            blob = stored_at(writer.path, by_path[rel])
            if not exists(blob) or content_sha256(blob) != by_path[rel].sha256:  # once, plain or <sha256>.gz
                blob.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(blob, raw)
            continue
        written = writer.write_file(f"{FILES}/{rel}", raw)
        expect = _archived_bytes(raw, writer.secrets)
        if written.read_bytes() != expect:  # the listing says what was stored; keep them in step
            raise ToolkitError(f"{FILES}/{rel} was stored differently than listed ({by_path[rel].ref})",
                               hint="a toolkit bug: report it with the file")
    return writer


# -- replay

def _bad(arch: Archive, rel: str, what: str, hint: str) -> ToolkitError:
    return ToolkitError(f"archived input {what}", file=arch.path / rel, hint=hint)


def check_inputs(arch: Archive) -> list[ToolkitError]:
    """Every archived input that is missing, edited or not the original's bytes (empty: all good)."""
    rec = arch.manifest.inputs
    problems = []
    for f in rec.files if rec else []:
        if not f.archived:
            continue
        p = stored_at(arch.path, f)
        rel = os.path.relpath(stored(p), arch.path).replace(os.sep, "/")
        if not exists(p):
            problems.append(_bad(arch, rel, f"is missing: the run read it as {f.source} ({f.ref})",
                                 "the archive is incomplete; restore the run folder from a copy"))
        elif f.scrubbed:
            problems.append(_bad(arch, rel, f"had secret-looking text masked when it was archived ({f.ref}), "
                                 "so these are not the bytes the run read",
                                 "a replay needs the original file; archives never keep secrets"))
        elif (digest := content_sha256(p)) != f.sha256:
            got = f"sha256 {digest[:12]}" if digest else "not a valid gzip file"
            problems.append(_bad(arch, rel, f"was edited after the run: {got}, the manifest "
                                 f"lists {f.sha256[:12]} ({f.ref})", "restore the run folder from a copy"))
    return problems


def _check_reference(f: InputFile) -> str | None:
    """Why a referenced file or directory cannot be used where the run read it (None: it can)."""
    src = Path(f.source or "")
    if f.role == "model":
        if not src.is_dir():
            return f"model directory {src} is not there (its weights are not archived)"
        for name, digest in f.files.items():
            if not (src / name).is_file() or sha256_file(src / name) != digest:
                return f"{src / name} differs from the run's (sha256 {digest[:12]})"
        return None
    if not src.is_file():
        return f"{src} is not there ({f.role}: archives keep its path and sha256, never its bytes)"
    if sha256_file(src) != f.sha256:
        return f"{src} differs from the file the run read (sha256 {f.sha256[:12]})"
    return None


def materialize(arch: Archive, tree: Path) -> Path:
    """Lay the run's files out under `tree` (archived bytes copied, references linked where the run read
    them) and return the Matrix spec's path there. Raises ToolkitError (exit 2) naming the first file
    that is missing, edited, or (a reference) not what the run read."""
    rec = arch.manifest.inputs
    if rec is None:
        raise ToolkitError(f"run {arch.run_id} has no inputs/ listing", file=arch.path / "manifest.json")
    problems = check_inputs(arch)
    if problems:
        raise problems[0]
    for f in rec.files:
        dest = tree / f.path
        if f.role == "model_file":
            continue  # checked in the model directory itself (its reference entry)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if f.archived:  # the bytes the run read, decompressed where its session stores them as .gz
            dest.write_bytes(read_bytes(stored_at(arch.path, f)))
            continue
        why = _check_reference(f)
        if why:
            raise ToolkitError(f"{f.ref}: {why}", file=arch.path / "manifest.json",
                               hint=f"put the {f.role.replace('_', ' ')} back at {f.source}, then run reproduce again")
        os.symlink(f.source, dest)
    return tree / rec.matrix


def check_outside(arch: Archive, specs: dict[str, LoadedSpec], tree: Path) -> None:
    """A file a replayed spec names by absolute path is read outside the tree: it must be the run's bytes."""
    listed = {f.ref: f for f in (arch.manifest.inputs.files if arch.manifest.inputs else [])}
    for name, spec in specs.items():
        for key, p in referenced_files(spec).items():
            f = listed.get(f"{name}:{key}")
            inside = Path(_abs(p)).is_relative_to(_abs(tree))
            if f is None or inside or not f.sha256:
                continue
            if not Path(p).is_file() or sha256_file(Path(p)) != f.sha256:
                raise ToolkitError(f"{name} {key} names {p} by absolute path, and the file there is not the one "
                                   f"the run read (archived as {FILES}/{f.path})", file=arch.path / FILES / f.path,
                                   hint=f"copy the archived file to {p}, or write the spec with a relative path")
