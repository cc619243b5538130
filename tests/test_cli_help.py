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


def test_a_command_shown_under_another_group_is_declared_beside_its_code() -> None:
    """`results reproduce` (the runner's), `bench tune` and `bench representativeness` are declared where their
    code lives, each in a Typer of its own package; toolkit/cli.py only merges those groups and names no
    command of a stage (so a new one needs no edit there)."""
    root = typer.main.get_command(app)
    homes = {("results", "reproduce"): "toolkit.bench.commands", ("bench", "tune"): "toolkit.tune.commands",
             ("bench", "representativeness"): "toolkit.workloads.commands"}
    for (group, name), module in homes.items():
        assert root.commands[group].commands[name].callback.__module__ == module, (group, name)
    import toolkit.cli

    src = inspect.getsource(toolkit.cli)
    assert ".command(\"reproduce\")" not in src and "reproduce_cmd" not in src and "tune_cmd" not in src


def test_one_json_flag() -> None:
    """`--json` is declared once (toolkit.console.json_option); every command's flag is made there."""
    import ast
    from pathlib import Path

    pkg = Path(__file__).resolve().parent.parent / "toolkit"
    where = [f"{p.relative_to(pkg)}:{n.lineno}" for p in sorted(pkg.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Constant) and n.value == "--json"]
    assert len(where) == 1 and where[0].startswith("console.py:"), where
    root = typer.main.get_command(app)
    flags = [cmd for _, cmd in _commands(root) if any("--json" in p.opts for p in cmd.params)]
    assert len(flags) >= 9
