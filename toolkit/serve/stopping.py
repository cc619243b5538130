"""How a launched server process is stopped: the engine's cleanest signal first, then harsher ones, each
after a bounded wait, and nothing of its process group left behind. What was sent, every escalation, and
how long the leader and its group took are returned for the archive (ProcessLauncher.stop_info).

An engine whose clean stop waits on something it offers to skip (uvicorn: "Waiting for background tasks to
complete. (CTRL+C to force quit)") names that as a ForceQuit: the line in its log, and the signal that skips
it. The signal is sent once, only when the line was written after the stop began: sent at another moment
it could land where the engine no longer expects it (uvicorn re-raises a signal it caught after it returned)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.schema.manifest import StopRecord

KILL_WAIT_S = 10.0
GROUP_GRACE_S = 5.0  # for what the leader left in its group after it exited
POLL_S = 0.03  # the leader's exit and the log are watched this often (the stop times' resolution)


@dataclass(frozen=True)
class ForceQuit:
    """The engine asks for a second signal to skip a wait: `marker` in its log, `sig` to the leader."""

    marker: str
    sig: int
    what: str  # said in the record: "SIGINT to the leader again (<what>)"


@dataclass(frozen=True)
class ShutdownDone:
    """The engine's log line saying its own shutdown is done (its children ended; `marker` may name the leader's
    `{pid}`): from there the leader only leaves the interpreter (atexit handlers, module teardown), which
    matters to nothing the stop must keep. It gets `grace_s` for that, then SIGKILL to the leader alone: its
    group (multiprocessing's resource tracker) still cleans up after it."""

    marker: str
    grace_s: float
    what: str  # said in the record: "SIGKILL to the leader, <grace_s> s after <what>"


class _LogWatch:
    """New lines of a log file since a byte offset, read once for all the markers watched: which appeared."""

    def __init__(self, path: Path | None, markers: dict[str, str]):
        self.path, self.seen = path, b""
        self.pending = {name: marker.encode() for name, marker in markers.items()}
        self.keep = max(map(len, self.pending.values()), default=0)
        try:
            self.offset = os.path.getsize(path) if path else None
        except OSError:
            self.offset = 0

    def found(self) -> set[str]:
        """The names of the markers that appeared since the last call (each is reported once)."""
        if self.offset is None or not self.pending:
            return set()
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                new = f.read()
        except OSError:
            return set()
        self.offset += len(new)
        self.seen = self.seen[-self.keep:] + new  # a marker split between two reads is still found
        hits = {name for name, marker in self.pending.items() if marker in self.seen}
        for name in hits:
            del self.pending[name]
        return hits


def stop_process(proc: subprocess.Popen, name: str, first: int, to_group: bool, wait_s: float,
                 log_path: Path | None = None, force_quit: ForceQuit | None = None,
                 done: ShutdownDone | None = None) -> StopRecord:
    """`first` to the leader (or its group), wait_s (meanwhile the force quit, when the log asks for it, and
    SIGKILL to the leader `done.grace_s` after the log says its shutdown is done); then SIGTERM to the group
    (unless that was the first), wait_s; then SIGKILL to the group.
    {signals: [what was sent], warnings: [one per escalation], exit_code, leader_exit_s, group_empty_s}:
    seconds from the first signal until the leader exited (None if it never did) and until no process of
    its group was left."""
    t0 = time.monotonic()
    notes: dict = {"signals": [], "warnings": []}
    steps = [(first, to_group, wait_s)]
    if (first, to_group) != (signal.SIGTERM, True):
        steps.append((signal.SIGTERM, True, wait_s))
    steps.append((signal.SIGKILL, True, KILL_WAIT_S))
    markers = {**({"force_quit": force_quit.marker} if force_quit else {}),
               **({"done": done.marker.format(pid=proc.pid)} if done else {})}
    watch = _LogWatch(log_path, markers) if markers else None  # from where the log is now
    exited = None
    for i, (sig, group, wait) in enumerate(steps):
        said = f"{signal.Signals(sig).name} to the {'process group' if group else 'leader'}"
        if not _send(proc.pid, sig, group):
            break
        notes["signals"].append(said)
        exited = _wait(proc, wait, watch if i == 0 else None, force_quit, done, notes["signals"])
        if exited is not None:
            break
        later = steps[i + 1] if i + 1 < len(steps) else None
        notes["warnings"].append(f"{name} did not exit within {wait:g} s of {said}"
                                 + (f"; sent {signal.Signals(later[0]).name} to the process group" if later
                                    else "; gave up on it"))
    if exited is None and proc.poll() is not None:  # gone before a signal reached it
        exited = time.monotonic()
    if reap_group(proc.pid):
        notes["warnings"].append(f"{name} exited but left processes in its group: killed")
    notes["exit_code"] = proc.poll()
    notes["leader_exit_s"] = exited - t0 if exited is not None else None
    notes["group_empty_s"] = time.monotonic() - t0
    return StopRecord(**notes)


def _wait(proc: subprocess.Popen, wait_s: float, watch: _LogWatch | None, force_quit: ForceQuit | None,
          done: ShutdownDone | None, signals: list[str]) -> float | None:
    """Wait up to wait_s for the leader to exit, sending the force quit once when the log asks for it, and
    SIGKILL to the leader once its shutdown has been done for done.grace_s. The moment it exited
    (monotonic), None if it did not."""
    deadline = time.monotonic() + wait_s
    kill_at = None
    while True:
        if proc.poll() is not None:
            return time.monotonic()
        hits = watch.found() if watch is not None else ()
        if "force_quit" in hits and _send(proc.pid, force_quit.sig, False):  # each marker is found once
            signals.append(f"{signal.Signals(force_quit.sig).name} to the leader again ({force_quit.what})")
        if "done" in hits:
            kill_at = time.monotonic() + done.grace_s
        if kill_at is not None and time.monotonic() >= kill_at:
            kill_at = None
            if _send(proc.pid, signal.SIGKILL, False):
                signals.append(f"SIGKILL to the leader, {done.grace_s:g} s after {done.what}")
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def _send(pid: int, sig: int, group: bool) -> bool:
    """False when there is nothing left to signal."""
    try:
        (os.killpg if group else os.kill)(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def reap_group(pgid: int, grace_s: float = GROUP_GRACE_S) -> bool:
    """Processes left in the group (the leader's children, when it did not end them): a short grace, then
    SIGKILL. True when some had to be killed."""
    deadline = time.monotonic() + grace_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            _send(pgid, signal.SIGKILL, True)
            return True
        time.sleep(POLL_S)
    return False


def group_alive(pgid: int) -> bool:
    """Does a process of the group still run? Zombies waiting for a reaper do not count."""
    if not _send(pgid, 0, True):
        return False
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True  # no /proc: the kill probe is all there is
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state, _ppid, pgrp = f.read().rsplit(") ", 1)[1].split()[:3]
        except (OSError, ValueError, IndexError):
            continue
        if int(pgrp) == pgid and state != "Z":
            return True
    return False
