"""`python -m toolkit.gpu validate ...`: `toolkit gpu validate` without loading the other stages
(for an image or host that lacks their dependencies)."""

import sys

import click
import typer

from toolkit.console import err
from toolkit.errors import ToolkitError
from toolkit.gpu.commands import app

# typer >= 0.24 vendors click: its usage errors are not click.ClickException
CLICK_ERRORS = tuple({click.ClickException, *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")})


def main() -> int:
    try:
        rv = typer.main.get_command(app).main(args=sys.argv[1:], prog_name="python -m toolkit.gpu",
                                              standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except ToolkitError as exc:
        err.print(f"error: {exc}", markup=False)
        return exc.exit_code
    except (click.exceptions.Exit, typer.Exit) as exc:
        return exc.exit_code
    except CLICK_ERRORS as exc:
        exc.show()
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
