"""Errors are data: every user-facing failure is a ToolkitError; only cli.py turns it into an exit."""

from __future__ import annotations

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

    def to_dict(self) -> dict:
        return {
            "error": self.message,
            "hint": self.hint,
            "file": str(self.file) if self.file is not None else None,
            "line": self.line,
            "column": self.column,
            **({"also": list(self.also)} if self.also else {}),
        }


class SpecError(ToolkitError):
    """A spec file is malformed or refers to something that is not there."""


class ToolFailure(ToolkitError):
    """An external tool (docker, ansible, a server) failed; exit code 1 unless given."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1, **kw):
        super().__init__(message, hint=hint, exit_code=exit_code, **kw)
