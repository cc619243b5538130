"""Acceptance length from the server, for the cells whose wire carries no verification steps per request.

Per request is best: SGLang's /generate sends `spec_verify_ct` in meta_info, and a cell's accept_length
is then the registry's ratio of sums over its requests (source `requests`). Over chat/completions SGLang
0.5.17 sends none, and the embedded engine never does; the server still counts, so the cell gets the same
ratio of sums from the server's own counts over the cell's measured requests (toolkit.schema.metrics
ACCEPT_SOURCES names each source):

- `server-metrics` (SGLang with --enable-metrics): /metrics counters `sglang:generation_tokens_total` and
  `sglang:spec_verify_calls_total`, which the tokenizer manager adds every finished request's completion
  tokens and spec_verify_ct to (the same numbers meta_info carries). Read when the measured phase starts
  (after warmup) and when it ends; the difference is the measured requests' tokens / steps. Not reset by
  /flush_cache, so an external server works too, as long as no one else sends it requests meanwhile
  (the archived counts say how many requests the difference holds).
- `server-info` (SGLang without metrics): /server_info's internal_states[0].avg_spec_accept_length after
  the cell, cumulative since the /flush_cache before it. 0.5.17 folds its step counters in only when it
  writes a decode log line (every 40 decode steps): the figure covers whole log intervals, warmup
  included, and a cell shorter than one interval has none. Only used when the flush before the cell
  worked (never for external servers, which the toolkit does not flush).
- `server-log` (the embedded engine): `toolkit-serve: request done tokens=N steps=S`, one line per request
  (toolkit/serve/_tserve.py), read from the server's log between the offsets of the measured phase.
  A request's line is written before its last chunk leaves, so the lines of a phase are complete when
  the client has seen every request of it end.

A speculative arm whose cells get no figure from any source is a methodology warning (derive.py).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from toolkit import engines
from toolkit.engines.base import AcceptanceCounts

SETTLE_S = 5.0  # how long the counters may lag the last request the client saw end
LOG_LINE = re.compile(rb"toolkit-serve: request done tokens=(\d+) steps=(\d+)")


@dataclass
class ServerAcceptance:
    """One cell's acceptance as the server counted it."""

    source: str  # a key of toolkit.schema.metrics.ACCEPT_SOURCES
    value: float
    # the AcceptanceCounts behind it (when known), as the cell summary's accept_counts stores them
    counts: dict[str, float] = field(default_factory=dict)


class Probe:
    """Reads a server's counts around one cell: start() before its first request, measured() when the
    measured phase starts (after warmup), result(n) after the cell (n: its successful measured requests)."""

    def start(self) -> None:
        pass

    def measured(self) -> None:
        pass

    def result(self, n_requests: int) -> ServerAcceptance | None:
        return None


def _wait(read, done, deadline_s: float):
    """Read until done(value) or the deadline; the last value read."""
    end = time.monotonic() + deadline_s
    value = read()
    while not done(value) and time.monotonic() < end:
        time.sleep(0.05)
        value = read()
    return value


class MetricsProbe(Probe):
    """The engine's /metrics counters over the measured phase (Engine.acceptance_counts: SGLang's, vLLM's), else
    the average the server reports since the flush (/server_info, where the engine has one)."""

    def __init__(self, base_url: str, engine: str, flushed: bool, warmup: int):
        self.base_url, self.engine, self.flushed, self.warmup = base_url, engines.get(engine), flushed, warmup
        self.t0: AcceptanceCounts | None = None
        self.t1: AcceptanceCounts | None = None

    def _read(self) -> AcceptanceCounts | None:
        from toolkit.serve import metrics_snapshot

        try:
            return self.engine.acceptance_counts(metrics_snapshot(self.base_url))
        except Exception:  # noqa: BLE001 - no figure from this source; the others are tried
            return None

    def start(self) -> None:
        self.t0 = self._read()

    def measured(self) -> None:
        if self.t0 is None:
            return
        t0 = self.t0  # the warmup's requests must be counted before the measured phase's start is taken
        self.t1 = _wait(self._read, lambda c: c is None or c.requests - t0.requests >= self.warmup, SETTLE_S)

    def result(self, n_requests: int) -> ServerAcceptance | None:
        if self.t1 is not None:
            t1 = self.t1
            t2 = _wait(self._read, lambda c: c is None or c.requests - t1.requests >= n_requests, SETTLE_S)
            if t2 is not None:
                d = t2 - t1
                if d.steps > 0 and d.tokens >= 0:
                    return ServerAcceptance("server-metrics", d.tokens / d.steps, asdict(d))
        if not self.flushed:
            return None
        from toolkit.serve import server_info

        try:
            avg = self.engine.server_state(server_info(self.base_url)).avg_spec_accept_length
        except Exception:  # noqa: BLE001 - no figure
            return None
        return ServerAcceptance("server-info", float(avg)) if avg else None


class LogProbe(Probe):
    """The embedded engine's per-request tokens and steps, from its log between two offsets."""

    def __init__(self, log_path: Path):
        self.log_path = Path(log_path)
        self.offset: int | None = None

    def _size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def measured(self) -> None:
        self.offset = self._size()

    def _lines(self) -> list[tuple[int, int]]:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.offset or 0)
                data = f.read()
        except OSError:
            return []
        return [(int(t), int(s)) for t, s in LOG_LINE.findall(data)]

    def result(self, n_requests: int) -> ServerAcceptance | None:
        if self.offset is None:
            return None
        lines = _wait(self._lines, lambda ls: len(ls) >= n_requests, SETTLE_S if n_requests else 0)
        tokens, steps = sum(t for t, _ in lines), sum(s for _, s in lines)
        if not steps:
            return None
        return ServerAcceptance("server-log", tokens / steps,
                                asdict(AcceptanceCounts(float(tokens), float(steps), float(len(lines)))))


def probe_for(launcher, engine: str, *, speculative: bool, flushed: bool | None, warmup: int) -> Probe:
    """The probe for one cell of an arm: the engine's /metrics counters for a speculative arm of an engine that
    counts there (SGLang, vLLM), the log for the embedded engine (every arm: the baseline reads 1 token per step),
    nothing otherwise."""
    source = engines.get(engine).acceptance
    if source == "metrics" and speculative:
        return MetricsProbe(launcher.base_url, engine, flushed is True, warmup)
    if source == "log" and launcher.log_path is not None:
        return LogProbe(launcher.log_path)
    return Probe()
