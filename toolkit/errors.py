"""Errors are data: every user-facing failure is a ToolkitError; only cli.py turns it into an exit.

A file-system error (OSError with a path) is one too, worded in one place (`os_error`; toolkit/exits.py
applies it to whatever a command lets through): `path: what is wrong` and a hint, with the exit

    2  the path given is the problem: permission denied, no such folder, a file where a folder must be,
       a read-only file system, a name too long: choose another path (or fix the one given)
    1  the machine is the problem: the disk or quota is full, an I/O error, too many open files
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ToolkitError(Exception):
    """A failure the user can fix. Printed as `file:line:col: message` plus a hint; exit code 2."""

    message: str
    hint: str | None = None
    file: str | Path | None = None
    line: int | None = None
    column: int | None = None
    exit_code: int = 2  # toolkit/exits.py: 2 bad input
    also: list[str] | None = None  # further problems found at once (every error of a spec, not only the first)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def where(self) -> str:
        if self.file is None:
            return ""
        where = str(self.file)
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        for line in self.also or []:
            text += f"\n  also: {line}"
        return text

    def to_dict(self) -> dict:  # json-edge: --json error entry
        return {
            "error": self.message,
            "hint": self.hint,
            "file": str(self.file) if self.file is not None else None,
            "line": self.line,
            "column": self.column,
            **({"also": list(self.also)} if self.also else {}),
        }


def did_you_mean(word: object, choices: "list[str] | tuple[str, ...]", cutoff: float = 0.6) -> str | None:
    """`did you mean 'concurrency'?` for a misspelt value among `choices` (an enum's or a Literal's values, the
    keys of a mapping, an environment's presets), case aside; None when nothing is close."""
    import difflib

    text = str(word)
    folded = {str(c).lower(): str(c) for c in choices}
    if text.lower() in folded and folded[text.lower()] != text:
        return f"did you mean {folded[text.lower()]!r}?"  # only the case differs
    close = difflib.get_close_matches(text.lower(), list(folded), n=1, cutoff=cutoff)
    return f"did you mean {folded[close[0]]!r}?" if close else None


class SpecError(ToolkitError):
    """A spec file is malformed or refers to something that is not there."""


KeyPath = tuple  # keys and list indices below a model, e.g. ("dummy_models", "/models/t", "vocab_size")


class SpecValueError(ValueError):
    """A spec model's own check (a pydantic model validator) that failed: what is wrong, the key it is about
    and how to fix it. Pydantic keeps the exception (its error's ctx["error"]); the spec loader
    (toolkit/specs validation_error) reports it at that key's file:line with the hint, exit 2.

    `key`: a key of the model that raised it, or a key path below it (a tuple), or a list of such in order
    of preference: the first the file has gives the line (`["eagle3_draft_of", "architecture"]`), else the
    nearest mapping above the first that the file has."""

    def __init__(self, message: str, *, key: "str | KeyPath | list[str | KeyPath]" = (), hint: str):
        super().__init__(message)
        keys = key if isinstance(key, list) else [key]
        self.keys: list[KeyPath] = [(k,) if isinstance(k, str) else tuple(k) for k in keys] or [()]
        self.hint = hint


class ToolFailure(ToolkitError):
    """An external tool (docker, ansible, a server) failed; exit code 1 unless given."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1, **kw):
        super().__init__(message, hint=hint, exit_code=exit_code, **kw)


# the machine's fault, not the path's: exit 1 (a tool or the environment failed), the rest exit 2
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM}

_HINTS = {
    errno.EACCES: "choose a folder you may write to (or read from), or fix its permissions",
    errno.EPERM: "choose a folder you may write to (or read from), or fix its permissions",
    errno.EROFS: "the file system is read-only: choose a folder on a writable one",
    errno.ENOENT: "the file or a folder above it does not exist: create it, or check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.EISDIR: "the path is a folder: give a file name",
    errno.EEXIST: "something is already there: choose another path, or remove it",
    errno.ENAMETOOLONG: "shorten the name (a file name has at most 255 bytes on most file systems)",
    errno.ENOSPC: "the disk is full: free some space (or choose a folder on another disk) and run again",
    errno.EDQUOT: "the disk quota is used up: free some space and run again",
    errno.EIO: "the disk reported an I/O error: check the device",
}


def os_error(exc: OSError, doing: str | None = None) -> ToolkitError:
    """An OSError as the user should read it: `path: what is wrong` (what was being done, where said) with a
    hint, exit 2 when the path is the problem and 1 when the machine is (ENVIRONMENT_ERRNOS)."""
    what = (exc.strerror or str(exc)).rstrip(".")
    what = what[:1].lower() + what[1:]
    if doing:
        what = f"cannot {doing}: {what}"
    where = exc.filename if exc.filename is not None else None
    hint = _HINTS.get(exc.errno)
    if exc.errno == errno.EEXIST and where is not None and Path(where).exists() and not Path(where).is_dir():
        what, hint = "is a file, where a folder must be", _HINTS[errno.ENOTDIR]  # mkdir(exist_ok=True) on a file
    if exc.filename2 is not None:
        what += f" (-> {exc.filename2})"
    return ToolkitError(what, hint=hint, file=where,
                        exit_code=1 if exc.errno in ENVIRONMENT_ERRNOS else 2)
