"""`--help` that teaches keeps its tables: a docstring's indented block (a table of verdicts, exit codes,
examples) reaches the terminal line for line, not rewrapped into one paragraph (click rewraps any
paragraph that is not marked with a `\\b` line)."""

from __future__ import annotations

import inspect

import typer.main
from typer.testing import CliRunner

from toolkit.cli import app


def _commands(group, path: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer carries its own click)
            yield from _commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd


def _indented_lines(cmd) -> list[str]:
    doc = inspect.cleandoc(cmd.help or "")
    return [line.strip() for line in doc.splitlines() if line.startswith("  ") and line.strip()]


def test_every_indented_docstring_block_survives_in_help() -> None:
    root = typer.main.get_command(app)
    runner, checked, mangled = CliRunner(), 0, []
    for path, cmd in _commands(root):
        lines = _indented_lines(cmd)
        if not lines:
            continue
        out = runner.invoke(app, [*path, "--help"], terminal_width=200).output
        shown = {line.strip() for line in out.splitlines()}
        checked += 1
        mangled += [f"{' '.join(path)}: {line!r}" for line in lines if line not in shown]
    assert checked >= 2, "no command has an indented block: the test checks nothing"
    assert not mangled, "rewrapped by click (add a `\\b` line before the block):\n" + "\n".join(mangled)
