"""What of a server's log the archive keeps: its head (the start-up: flags, what the engine adjusted, up to
the first answered health check) and its tail (the end: how it ran and stopped), and the lines of the head
the report quotes (SGLang's own cap on running requests)."""

from __future__ import annotations

import re

from toolkit.engines.sglang import CAP_LINE

TAIL_LINES = 400
HEAD_MAX_LINES = 1500  # a start-up longer than this is cut (the tail still holds the end)
# the first health check the server answered: uvicorn's access line for GET /health with 200, or
# SGLang's "ready" line (a server that logs no access lines)
_READY = re.compile(r'"GET /health(?:_generate)? HTTP/[0-9.]+" 200|The server is fired up and ready to roll')


def head_end(lines: list[str]) -> int:
    """How many lines the start-up takes: through the first answered health check (HEAD_MAX_LINES at most,
    and all of them when there is none yet: a start that failed)."""
    for i, line in enumerate(lines[:HEAD_MAX_LINES]):
        if _READY.search(line):
            return i + 1
    return min(len(lines), HEAD_MAX_LINES)


def head_and_tail(text: str, tail: int = TAIL_LINES) -> str:
    """The log's head and its last `tail` lines; one marker line says how many lines between them were left
    out. A log shorter than both is kept whole."""
    lines = text.splitlines()
    n_head = head_end(lines)
    if n_head + tail >= len(lines):
        return "\n".join(lines)
    gap = len(lines) - n_head - tail
    return "\n".join([*lines[:n_head], f"[toolkit: {gap} log lines left out between the start-up and the last "
                                       f"{tail}]", *lines[-tail:]])


def cap_line(text: str) -> str | None:
    """SGLang's own line saying it capped the running requests ("Max running requests is reset to 48 ..."),
    from the start-up part of the log; None when it printed none."""
    lines = text.splitlines()
    for line in lines[:head_end(lines)]:
        if CAP_LINE.search(line):
            return line.strip()[:400]
    return None
