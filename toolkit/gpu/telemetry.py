"""GPU telemetry sampled in the background while a benchmark cell runs.

    tel = Telemetry(interval_s=0.5).start()
    ...                       # the cell's load
    samples = tel.stop()      # [GpuSample(t, gpu, util_gpu_pct, mem_used_mib, power_w, sm_clock_mhz, ...), ...]
    summarize(samples)        # per GPU: n, mean and max of each figure

One `nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N` process prints a line per GPU
every N ms; a reader thread parses each line as it comes (`parse_query_line`, pure) and stamps
it with this host's wall clock (`t`, seconds since the epoch) so samples line up with request
records. Where nvidia-smi is absent, start() leaves the sampler inert with `reason` set, and
stop() returns [] (the CPU engine runs cells too); a sampler that fails sets `error`.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from toolkit.errors import ToolFailure

# (nvidia-smi query field, our key, converter); order is the CSV column order.
FIELDS: list[tuple[str, str, type]] = [
    ("timestamp", "smi_time", str),
    ("index", "gpu", int),
    ("uuid", "uuid", str),
    ("utilization.gpu", "util_gpu_pct", float),
    ("utilization.memory", "util_mem_pct", float),
    ("memory.used", "mem_used_mib", float),
    ("memory.total", "mem_total_mib", float),
    ("power.draw", "power_w", float),
    ("clocks.sm", "sm_clock_mhz", float),
    ("clocks.mem", "mem_clock_mhz", float),
    ("temperature.gpu", "temp_c", float),
]
QUERY = ",".join(f for f, _, _ in FIELDS)
NUMERIC = [key for _, key, conv in FIELDS if conv is float]


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment: a line of the query (FIELDS names each figure), stamped with this host's clock `t`
    (seconds since the epoch; None for captured text). None: a figure the GPU does not report. The archive keeps
    a cell's samples as telemetry/<cell>.json (dataclasses.asdict, one object each)."""

    t: float | None
    smi_time: str | None
    gpu: int
    uuid: str | None
    util_gpu_pct: float | None
    util_mem_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    temp_c: float | None


def gpu_present() -> bool:
    """True where nvidia-smi is on PATH (the sampler's source)."""
    return shutil.which("nvidia-smi") is not None


def query_command(interval_s: float) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", f"-lms={max(1, round(interval_s * 1000))}"]


def parse_query_line(line: str, t: float | None = None) -> GpuSample | None:
    """One CSV line of the query above -> a sample; None for a blank or foreign line. Pure.

    `[N/A]` / `[Not Supported]` become None, so a figure the GPU does not report never reads as 0."""
    cells = [c.strip() for c in line.strip().split(",")]
    if len(cells) != len(FIELDS):
        return None
    figures: dict[str, Any] = {}
    for (_, key, conv), cell in zip(FIELDS, cells):
        if cell.startswith("[") or cell.lower() in ("n/a", ""):
            figures[key] = None
            continue
        try:
            figures[key] = conv(cell)
        except ValueError:
            return None
    if figures["gpu"] is None:
        return None
    return GpuSample(t=t, **figures)


def parse_query_output(text: str) -> list[GpuSample]:
    """Every sample in captured output (t left None: captured text carries no host clock). Pure."""
    return [s for s in (parse_query_line(ln) for ln in text.splitlines()) if s is not None]


def summarize(samples: list[GpuSample]) -> dict[str, dict[str, Any]]:  # data-keyed: GPU index
    """Per GPU (key: its index as a string): n, and mean/max of each numeric figure present."""
    by_gpu: dict[int, list[GpuSample]] = {}
    for s in samples:
        by_gpu.setdefault(s.gpu, []).append(s)
    out: dict[str, dict[str, Any]] = {}
    for gpu, rows in sorted(by_gpu.items()):
        entry: dict[str, Any] = {"n": len(rows), "uuid": rows[0].uuid}
        for key in NUMERIC:
            vals = [getattr(r, key) for r in rows if getattr(r, key) is not None]
            if vals:
                entry[key] = {"mean": round(fmean(vals), 3), "max": max(vals)}
        ts = [r.t for r in rows if r.t is not None]
        if len(ts) > 1:
            entry["span_s"] = round(max(ts) - min(ts), 3)
        out[str(gpu)] = entry
    return out


class Telemetry:
    """Background sampler. `command` replaces the nvidia-smi argv (it must print the same CSV)."""

    def __init__(self, interval_s: float = 1.0, command: list[str] | None = None):
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.command = command or query_command(interval_s)
        self.samples: list[GpuSample] = []
        self.reason: str | None = None   # why it is inert (no nvidia-smi)
        self.error: str | None = None    # why it failed (set by stop())
        self.stderr = ""
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._first = threading.Event()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "Telemetry":
        if self._proc is not None:
            raise ToolFailure("telemetry sampler already started")
        if shutil.which(self.command[0]) is None:
            self.reason = f"{self.command[0]} is not on PATH: no GPU telemetry"
            return self
        self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, bufsize=1)
        self._thread = threading.Thread(target=self._read, name="gpu-telemetry", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            sample = parse_query_line(line, t=time.time())
            if sample is not None:
                with self._lock:
                    self.samples.append(sample)
                self._first.set()

    def wait_first(self, timeout: float) -> bool:
        """Block until the first sample arrived (or timeout); True if it did."""
        return self._first.wait(timeout)

    def snapshot(self) -> list[GpuSample]:
        with self._lock:
            return list(self.samples)

    def stop(self, timeout: float = 10) -> list[GpuSample]:
        """Stop sampling; every sample taken. A sampler that died with an error and took no sample
        sets `error` (a benchmark cell never fails for want of telemetry); `check()` raises it."""
        if self._proc is None:
            return []
        died = self._proc.poll()
        if died is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
        if self._proc.stderr is not None:
            self.stderr = self._proc.stderr.read()
            self._proc.stderr.close()
        if died not in (None, 0) and not self.samples:
            self.error = f"GPU telemetry ({self.command[0]}) exited {died}: {self.stderr.strip()[:300]}"
        return self.snapshot()

    def check(self) -> None:
        """Raise ToolFailure if the sampler failed (see stop())."""
        if self.error:
            raise ToolFailure(self.error)

    def __enter__(self) -> "Telemetry":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
