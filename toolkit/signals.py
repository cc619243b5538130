"""Closing writes that a signal cannot cut in half.

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


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT/SIGTERM arriving in the block are delivered when it ends (main thread only: elsewhere Python runs
    no handler, so there is nothing to hold)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in HELD}

    def wait(signum, frame):  # noqa: ARG001
        pending.append(signum)

    for sig in HELD:
        signal.signal(sig, wait)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])
