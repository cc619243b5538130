"""The host's load while a cell runs, so that a cell measured beside other work says so (a busy-host
methodology warning, toolkit/schema/eligibility.py busy_check). Linux /proc only; elsewhere nothing.

- CPU demand of others, in cores: the runnable tasks the kernel counts (/proc/stat procs_running),
  sampled every INTERVAL_S in a daemon thread (never on the load generator's path: it only reads two
  small files), averaged, less the sampler itself and less the cores this run's own process tree used
  over the cell (CPU time of this process and every descendant: client workers, an embedded engine).
  Runnable tasks beyond the cores are waiting for a CPU: load that utilisation alone cannot show.
- CPU steal (/proc/stat): the share of CPU time the hypervisor gave to other guests.
- load average (/proc/loadavg), recorded for the reader.
- other toolkit runs on the host: each run registers a file under <cache>/active-runs/ while it runs
  (`active_run`); a file whose process is gone is stale and removed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from toolkit.schema.records import HostLoadRecord

INTERVAL_S = 0.5
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _stat() -> tuple[list[int], int] | None:
    """(the aggregate cpu line's counters, procs_running) from /proc/stat."""
    text = _read("/proc/stat")
    if text is None:
        return None
    cpu, running = [], 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            cpu = [int(x) for x in line.split()[1:]]
        elif line.startswith("procs_running"):
            running = int(line.split()[1])
    return (cpu, running) if cpu else None


def _proc_times() -> dict[int, tuple[int, int]]:  # data-keyed: pid
    """pid -> (parent pid, CPU ticks of the process and its reaped children) for every process."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        text = _read(f"/proc/{entry.name}/stat")
        if not text:
            continue
        fields = text[text.rfind(")") + 2:].split()  # after the command name, which may hold spaces
        try:
            out[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))  # ppid; u+s+cu+cs time
        except (IndexError, ValueError):
            continue
    return out


def own_cpu_s(root: int | None = None) -> float:
    """CPU seconds of this process's tree: itself and every live descendant, each with its reaped children
    (so a worker that ended is counted once, in its parent)."""
    root = os.getpid() if root is None else root
    procs = _proc_times()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0))[1]
        todo += kids.get(pid, [])
    return total / _TICK


class HostLoad:
    """start() before a cell, stop() after it: the host's load over the cell, as a dict for its summary."""

    def __init__(self, interval_s: float = INTERVAL_S, registry: Path | None = None):
        self.interval_s, self.registry = interval_s, registry
        self._running: list[int] = []
        self._others: dict[int, dict] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "HostLoad":
        self._t0, self._s0, self._own0 = time.monotonic(), _stat(), own_cpu_s()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="toolkit-hostload", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        st = _stat()
        if st is not None:
            self._running.append(st[1])
        for r in other_runs(self.registry):
            self._others[r["pid"]] = r

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> HostLoadRecord | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._sample()
        s1, wall = _stat(), time.monotonic() - self._t0
        if self._s0 is None or s1 is None or wall <= 0:
            return None
        d = [b - a for a, b in zip(self._s0[0], s1[0])]
        total = sum(d[:8]) or 1  # user nice system idle iowait irq softirq steal (guest is inside user)
        own = max(own_cpu_s() - self._own0, 0.0) / wall
        demand = sum(self._running) / len(self._running) - 1  # the sampler is running while it reads
        load = _read("/proc/loadavg")
        return HostLoadRecord(cpus=os.cpu_count(), samples=len(self._running), wall_s=round(wall, 3),
                              own_cores=round(own, 2), foreign_cores=round(max(demand - own, 0.0), 2),
                              busy_share=round(1 - (d[3] + d[4]) / total, 3),
                              steal=round(d[7] / total, 4) if len(d) > 7 else 0.0,
                              load1=float(load.split()[0]) if load else None, other_runs=list(self._others.values()))


# -- other toolkit runs on this host

def _registry(folder: Path | None) -> Path:
    if folder is not None:
        return folder
    from toolkit.settings import cache_dir

    return cache_dir() / "active-runs"


def _start_ticks(pid: int) -> str | None:
    text = _read(f"/proc/{pid}/stat")
    return text[text.rfind(")") + 2:].split()[19] if text else None  # starttime: tells a reused pid apart


def other_runs(folder: Path | None = None) -> list[dict]:
    """The toolkit runs registered on this host by other processes and still running."""
    d = _registry(folder)
    out = []
    try:
        entries = list(d.glob("*.json"))
    except OSError:
        return []
    for f in entries:
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        pid = info.get("pid")
        if pid == os.getpid():
            continue
        if not isinstance(pid, int) or _start_ticks(pid) != info.get("start"):
            f.unlink(missing_ok=True)  # stale: the run is gone
            continue
        out.append({"pid": pid, "matrix": info.get("matrix"), "run": info.get("run")})
    return out


@contextmanager
def active_run(run: Path, matrix: str, folder: Path | None = None) -> Iterator[None]:
    """Register this run on the host while it runs (one small file; removed at the end, ignored once its
    process is gone)."""
    d = _registry(folder)
    f = d / f"{os.getpid()}-{Path(run).name}.json"
    try:
        d.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps({"pid": os.getpid(), "start": _start_ticks(os.getpid()), "run": str(run),
                                 "matrix": matrix}))
    except OSError:
        f = None  # a read-only cache: the run goes on, unseen by others
    try:
        yield
    finally:
        if f is not None:
            f.unlink(missing_ok=True)
