"""Atomic file writes (a reader never sees half a file, and a crash never leaves one), and the tail of a
file that another process is still writing (a server's log). A file-system error a command lets through
becomes `path: what is wrong` at the command line's boundary (toolkit.errors.os_error)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def folder_not_file(path: Path) -> str | None:
    """What is wrong with reading `path` as a file when it is a folder (None when it is not one): the one
    wording of the mistake, for spec keys and options that name files."""
    return f"{path} is a folder, expected a file" if Path(path).is_dir() else None


def same_file(out: str | Path, *inputs: str | Path) -> Path | None:
    """The input that `out` would overwrite (the same file under another name too), else None: a command
    refuses to write its output over what it reads (`trace-import t.jsonl -o t.jsonl` lost the original)."""
    for src in inputs:
        if os.path.realpath(out) == os.path.realpath(src):  # `sub/../t.jsonl` too, `sub` not there yet
            return Path(src)
        try:
            if Path(out).exists() and Path(src).exists() and os.path.samefile(out, src):  # a hard link
                return Path(src)
        except OSError:
            continue
    return None


def write_atomic(path: str | Path, data: bytes | str, mode: int = 0o644) -> Path:
    """Write a file whole or not at all. A folder at `path` is an IsADirectoryError naming it (the rename
    onto it said "device or resource busy" of the temporary file's name), worded by toolkit.errors.os_error."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_json(path: str | Path, obj: Any) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def tail_lines(path: str | Path | None, n: int) -> str:
    """The last n lines of a text file, read from its last 64 KiB (a log may be large and still growing);
    "" where there is no such file."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def folder_digest(path: Path) -> str:
    """One sha256 for a model's weights (an Environment's `weights:` pins): of a file, its bytes; of a folder,
    its listing, one line `<relative path>\\t<sha256 of the file>\\n` per regular file, sorted by path (hidden
    files and __pycache__ left out)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    lines = []
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if p.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            lines.append(f"{rel.as_posix()}\t{sha256_file(p)}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()
