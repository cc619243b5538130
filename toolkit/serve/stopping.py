"""How a launched server process is stopped: the engine's cleanest signal first, then harsher ones, each
after a bounded wait, and nothing of its process group left behind. What was sent, and every escalation,
is returned for the archive (ProcessLauncher.stop_info)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

KILL_WAIT_S = 10.0
GROUP_GRACE_S = 5.0  # for what the leader left in its group after it exited


def stop_process(proc: subprocess.Popen, name: str, first: int, to_group: bool, wait_s: float) -> dict:
    """`first` to the leader (or its group), wait_s; then SIGTERM to the group (unless that was the first),
    wait_s; then SIGKILL to the group. {signals: [what was sent], warnings: [one per escalation], exit_code}."""
    notes: dict = {"signals": [], "warnings": []}
    steps = [(first, to_group, wait_s)]
    if (first, to_group) != (signal.SIGTERM, True):
        steps.append((signal.SIGTERM, True, wait_s))
    steps.append((signal.SIGKILL, True, KILL_WAIT_S))
    for i, (sig, group, wait) in enumerate(steps):
        said = f"{signal.Signals(sig).name} to the {'process group' if group else 'leader'}"
        if not _send(proc.pid, sig, group):
            break
        notes["signals"].append(said)
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            later = steps[i + 1] if i + 1 < len(steps) else None
            notes["warnings"].append(f"{name} did not exit within {wait:g} s of {said}"
                                     + (f"; sent {signal.Signals(later[0]).name} to the process group" if later
                                        else "; gave up on it"))
    if reap_group(proc.pid):
        notes["warnings"].append(f"{name} exited but left processes in its group: killed")
    notes["exit_code"] = proc.poll()
    return notes


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
        time.sleep(0.1)
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
