"""Terminal output: rich when it is a terminal, plain text otherwise (and with NO_COLOR); JSON on request."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

from rich.console import Console

from toolkit.settings import settings


def _console(stderr: bool) -> Console:
    plain = not (sys.stderr if stderr else sys.stdout).isatty() or settings().no_color
    return Console(stderr=stderr, no_color=plain, highlight=False, soft_wrap=plain, emoji=False,
                   force_terminal=None if not plain else False, width=200 if plain else None)


out = _console(stderr=False)
err = _console(stderr=True)


def json_option(help: str = "print machine-readable JSON on stdout") -> Any:
    """The one `--json` flag of every command (its help may say what the JSON holds)."""
    import typer

    return Annotated[bool, typer.Option("--json", help=help)]


JsonOpt = json_option()


def emit_json(obj: Any) -> None:
    """Data on stdout, one JSON document, nothing else."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {message}" if not err.no_color else f"warning: {message}")
