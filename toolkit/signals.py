"""The toolkit's own signal handlers: where they are installed (`catch`), and closing writes that a signal
cannot cut in half (`signals_held`).

`catch` installs a handler unless the signal was ignored when it came to be installed: a job started in the
background by a non-interactive shell, or under nohup, inherits SIGINT or SIGHUP ignored, which is what
whoever started it asked for; a handler over it would let a stray Ctrl-C stop a run that was meant to go on.

A run archive or a tune session is finalized by several files in a row (summary.json, report.md, then
SHA256SUMS over them). Ctrl-C landing between two of them left a folder that says it is finalized and does
not verify ("SHA256SUMS: missing although the run was finalized"). Inside `signals_held()` SIGINT and
SIGTERM only wait; when the block ends, the first one that came is raised again and reaches whatever handler
was there before (the matrix's stopping flag, toolkit.serve.base's cleanup, Python's KeyboardInterrupt).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HELD = (signal.SIGINT, signal.SIGTERM)


def catch(signals, handler) -> dict:  # data-keyed: signal
    """Install `handler` for each of `signals` that is not ignored now (main thread only); the handlers it
    replaced, by signal (an ignored signal is not in it: it stays ignored), for `restore`."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for sig in signals:
        old = signal.getsignal(sig)
        if old is not signal.SIG_IGN:
            previous[sig] = old
            signal.signal(sig, handler)
    return previous


def restore(previous: dict) -> None:
    """Put back what `catch` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT/SIGTERM arriving in the block are delivered when it ends (main thread only: elsewhere Python runs
    no handler, so there is nothing to hold)."""
    pending: list[int] = []

    def wait(signum, frame):  # noqa: ARG001
        pending.append(signum)

    previous = catch(HELD, wait)
    try:
        yield
    finally:
        restore(previous)
        if pending:
            signal.raise_signal(pending[0])
