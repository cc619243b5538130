"""CLI command of the workloads stage (registered as `toolkit bench representativeness`)."""

from toolkit.errors import ToolkitError


def representativeness() -> None:
    """Not built yet (issue 7)."""
    raise ToolkitError("`toolkit bench representativeness` is not built yet", hint="see issue 7")
