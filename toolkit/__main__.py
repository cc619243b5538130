"""`python -m toolkit`: the same CLI as the `toolkit` command."""

from toolkit.cli import main

if __name__ == "__main__":
    main()
