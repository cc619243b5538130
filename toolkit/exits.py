"""Exit codes: the table of README "Exit codes" as code, and the one place that turns what a command
raised into its exit (`toolkit` and `python -m toolkit.gpu` both run through `run_command`).

    0    ok: the run is complete, every cell ok (reproduce: reproduced)
    1    a run with no successful cell (status failed), or with failed cells without --allow-failed-cells
         (status partial); a regression beyond --fail-on-regression; reproduce `differs`; --strict with
         methodology errors; a tool that failed (ToolFailure); the machine failed a file operation (disk or
         quota full, an I/O error: toolkit.errors.ENVIRONMENT_ERRNOS)
    2    bad input (ToolkitError): a spec, an option, an archive that does not verify; a path that cannot
         be written or read (toolkit.errors.os_error: permission, no such folder, a name too long)
    3    reproduce `inconclusive`; bench tune: keep the preset (the winner did not beat it), nothing written
    130  interrupted (Ctrl-C, SIGTERM): --resume completes the run
"""

from __future__ import annotations

import re

from toolkit.errors import ToolkitError, did_you_mean, os_error

OK = 0
FAILED = 1
BAD_INPUT = 2
INCONCLUSIVE = 3
INTERRUPTED = 130


def run_exit(status: str, interrupted: bool, *, allow_failed_cells: bool = False, strict_errors: bool = False) -> int:
    """The exit of a command that ran a matrix: its status (toolkit.schema.keys.STATUSES), whether a signal
    stopped it, whether the user accepts failed cells, and whether --strict found methodology errors."""
    if interrupted:
        return INTERRUPTED
    if status == "failed" or (status != "complete" and not allow_failed_cells) or strict_errors:
        return FAILED
    return OK


def _click_flavours() -> list:
    """click itself and the copy typer >= 0.20 vendors (typer._click): usage errors come from either."""
    mods = []
    for name in ("typer._click", "click"):
        try:
            mods.append(__import__(name, fromlist=["exceptions"]))
        except ImportError:
            pass
    return mods


def run_command(app, argv: list[str] | None, prog_name: str) -> int:
    """Run a Typer app as a command line and return its exit code: a ToolkitError prints without a traceback
    and exits with its code (2 bad input, 1 a tool failed); a usage error is click's (2); Ctrl-C is 130."""
    import typer

    from toolkit.console import err

    flavours = _click_flavours()
    usage_errors = tuple(m.exceptions.ClickException for m in flavours)
    exits = tuple(getattr(m.exceptions, "Exit", typer.Exit) for m in flavours) + (typer.Exit,)
    aborts = tuple(getattr(m.exceptions, "Abort", typer.Abort) for m in flavours) + (typer.Abort,)
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
        return rv if isinstance(rv, int) else OK
    except ToolkitError as exc:
        err.print(f"error: {exc}", markup=False)
        return exc.exit_code
    except OSError as exc:
        if exc.filename is None:  # not a file's (a socket's, a pipe's): not for a path message
            raise
        fs = os_error(exc)  # the one place a file-system error is worded: `path: what is wrong`, 2 or 1
        err.print(f"error: {fs}", markup=False)
        return fs.exit_code
    except exits as exc:
        return getattr(exc, "exit_code", OK)
    except usage_errors as exc:
        _choice_hint(exc)
        exc.show()
        return exc.exit_code
    except (KeyboardInterrupt, *aborts):
        err.print("interrupted", markup=False)
        return INTERRUPTED


def _choice_hint(exc: Exception) -> None:
    """An option of fixed values (an Enum-typed Typer option) given another: Typer's words are pydantic's
    ("Value error, 'rule' is not one of 'rules', 'embedding', 'both'."); the one place that words it as every
    other error, with a did-you-mean (or the values) as its hint."""
    message = getattr(exc, "message", None)
    if not isinstance(message, str):
        return
    message = message.removeprefix("Value error, ")
    m = re.fullmatch(r"'(.*)' is not one of (.*?)\.?", message, flags=re.S)
    if m:
        choices = re.findall(r"'((?:[^'\\]|\\.)*)'", m.group(2))
        message += "\n  hint: " + (did_you_mean(m.group(1), choices) or f"write one of: {', '.join(choices)}")
    exc.message = message
