"""`python -m toolkit.gpu validate ...`: `toolkit gpu validate` without loading the other stages
(for an image or host that lacks their dependencies). Exit codes as `toolkit`'s (toolkit/exits.py)."""

import sys

from toolkit.exits import run_command
from toolkit.gpu.commands import app


def main() -> int:
    return run_command(app, sys.argv[1:], "python -m toolkit.gpu")


if __name__ == "__main__":
    sys.exit(main())
