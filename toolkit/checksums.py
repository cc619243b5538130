"""SHA256SUMS: every folder the toolkit keeps (run archives, tune sessions, provisioning run folders, the
benchmark scripts' capture folders) lists the sha256 of each of its files, in `sha256sum -c` format, so
`toolkit results verify` (and `sha256sum -c SHA256SUMS`) names a truncated or edited file.

A run archive nested in another folder (the runs of a tune session) keeps its own SHA256SUMS: the outer
folder's list leaves its files out, and verify checks it on its own.

A compacted folder (toolkit.results.compact: large text files stored as NAME.gz) lists the stored bytes,
and keeps in SHA256SUMS.orig the original digest of each NAME it compressed: check_sums also checks that
each NAME.gz decompresses to exactly those bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

from toolkit.fsutil import write_atomic
from toolkit.specs import sha256_file

NAME = "SHA256SUMS"
ORIG = "SHA256SUMS.orig"


def is_run_archive(path: Path) -> bool:
    """A run folder (toolkit.results.archive): manifest.json beside cells/."""
    return (path / "manifest.json").is_file() and (path / "cells").is_dir()


def folder_files(root: Path, *, nested: bool = False) -> list[str]:
    """Every regular file under root except SHA256SUMS files and half-written temp files, as sorted relative
    POSIX paths; files of run archives nested below root are left out unless `nested`."""
    root = Path(root)
    out: list[str] = []
    stack = [root]
    while stack:
        d = stack.pop()
        for p in d.iterdir():
            if p.is_dir() and not p.is_symlink():
                if nested or not is_run_archive(p):
                    stack.append(p)
            elif p.is_file() and p.name != NAME and not is_temp(p.name):
                out.append(p.relative_to(root).as_posix())
    return sorted(out)


def is_temp(name: str) -> bool:
    """A temp file of toolkit.fsutil.write_atomic (`.<name>.<random>.tmp`), left by an interrupted write."""
    return name.startswith(".") and name.endswith(".tmp")


def write_sums(root: Path, files: list[str] | None = None) -> Path:
    """root/SHA256SUMS over `files` (default: folder_files(root)), written atomically."""
    root = Path(root)
    rels = folder_files(root) if files is None else files
    return write_atomic(root / NAME, "".join(f"{sha256_file(root / rel)}  {rel}\n" for rel in rels))


def check_sums(root: Path, files: list[str] | None = None) -> list[tuple[str, str]]:
    """(file, what is wrong) for each listed file that is missing or differs, each of `files` (default:
    folder_files(root)) that SHA256SUMS does not list, and each malformed line. Empty: all match.
    Call only where root/SHA256SUMS exists."""
    root = Path(root)
    problems: list[tuple[str, str]] = []
    listed: dict[str, str] = {}
    for i, line in enumerate((root / NAME).read_text(errors="replace").splitlines(), 1):
        digest, _, rel = line.partition("  ")
        if len(digest) != 64 or not rel:
            problems.append((NAME, f"line {i} is malformed"))
            continue
        listed[rel] = digest
    for rel, digest in listed.items():
        f = root / rel
        if not f.is_file():
            problems.append((rel, f"listed in {NAME} but missing"))
        elif sha256_file(f) != digest:
            problems.append((rel, f"sha256 differs from {NAME}: the file was truncated or edited after it was written"))
    for rel in folder_files(root) if files is None else files:
        if rel not in listed:
            problems.append((rel, f"not covered by {NAME} (added after the folder was finished)"))
    if (root / ORIG).is_file():
        problems += _check_orig(root)
    return problems


def _check_orig(root: Path) -> list[tuple[str, str]]:
    """Each file SHA256SUMS.orig lists, stored as NAME.gz (or NAME again), holds the bytes it first had."""
    problems: list[tuple[str, str]] = []
    for line in (root / ORIG).read_text(errors="replace").splitlines():
        digest, _, rel = line.partition("  ")
        gz, plain = root / (rel + ".gz"), root / rel
        try:
            data = gzip.decompress(gz.read_bytes()) if gz.is_file() else plain.read_bytes()
        except FileNotFoundError:
            problems.append((rel, f"listed in {ORIG} but missing (neither {rel} nor {rel}.gz)"))
            continue
        except (OSError, EOFError, zlib.error) as exc:
            problems.append((rel + ".gz", f"not a valid gzip file ({exc}): truncated or edited"))
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            problems.append((rel + ".gz" if gz.is_file() else rel,
                             f"content differs from the original sha256 in {ORIG}: edited after it was written"))
    return problems

