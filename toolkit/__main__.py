"""`python -m toolkit`: the same CLI as the `toolkit` command, with its exit code."""

import sys

from toolkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
