"""What of a server's log the archive keeps: its head (the start-up: flags, what the engine adjusted, up to
the first answered health check) and its tail (the end: how it ran and stopped), and what of the head the
archive and the report take: SGLang's own cap on running requests, the start-up's phases."""

from __future__ import annotations

import re
import time

from toolkit.engines.sglang import CAP_LINE, LOG_STAMP, LOG_STAMP_FORMAT, STARTUP_MARKS

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


def fold_repeats(lines: list[str]) -> list[str]:
    """A block (a stamped line and the unstamped lines under it: a traceback) that repeats the block before it,
    stamp aside, is left out; one line says how many times it came again. A stop through uvicorn's force quit
    cancels every pending request task, and each logs the same 80-line traceback: the tail would hold nothing
    else."""
    blocks: list[list[str]] = []
    for line in lines:
        if blocks and not LOG_STAMP.match(line) and not line.startswith("[toolkit:"):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    out: list[str] = []
    prev, again = None, 0

    def flush() -> None:
        if again:
            out.append(f"[toolkit: the {len(prev)}-line block above came {again} more time(s), left out]")

    for block in blocks:
        key = [LOG_STAMP.sub("", block[0], count=1), *block[1:]]
        if len(block) > 2 and key == prev:
            again += 1
            continue
        flush()
        out += block
        prev, again = key, 0
    flush()
    return out


def head_and_tail(text: str, tail: int = TAIL_LINES) -> str:
    """The log's head and its last `tail` lines (after the head, repeated blocks folded: fold_repeats); one
    marker line says how many lines between them were left out. A log shorter than both is kept whole."""
    lines = text.splitlines()
    n_head = head_end(lines)
    lines = lines[:n_head] + fold_repeats(lines[n_head:])
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


# data-keyed: start-up mark
def startup_phases(text: str, started_at: float, startup_s: float | None = None) -> dict[str, float] | None:
    """Seconds from the launch (epoch `started_at`) to each of SGLang's start-up marks its log's head holds
    (engines.sglang.STARTUP_MARKS: {first_line, server_args, scheduler, memory_pool, ready}); None when it
    holds none (another engine). The log stamps whole seconds of the server host's local time, read here as
    this machine's (the launcher's server runs on it): each mark is taken at the middle of its second.
    Stamps that cannot be this start's (before it, or after it ended: another clock or time zone) give None."""
    lines = text.splitlines()
    out: dict[str, float] = {}
    for line in lines[:head_end(lines)]:
        m = LOG_STAMP.match(line)
        if not m:
            continue
        for name, needle, _ in STARTUP_MARKS:
            if name not in out and (needle is None or needle in line):
                out[name] = time.mktime(time.strptime(m.group(1), LOG_STAMP_FORMAT)) + 0.5 - started_at
    if not out:
        return None
    if min(out.values()) < -1 or (startup_s is not None and max(out.values()) > startup_s + 2):
        return None
    return {name: round(max(0.0, out[name]), 1) for name, _, _ in STARTUP_MARKS if name in out}
