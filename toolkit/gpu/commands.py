"""CLI commands of this stage (a thin shell over the library)."""

import typer

from toolkit.errors import ToolkitError

app = typer.Typer(no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Not built yet (issue 9)."""


def _not_built() -> None:
    raise ToolkitError("`toolkit env validate` is not built yet", hint="see issue 9")
