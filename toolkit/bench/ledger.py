"""What a matrix run has measured so far, shared by the arms that run side by side: every cell goes
to the archive first, then into the ledger, under one lock. A run that is stopping records nothing
more (the cells it cut short are not archived, and --resume runs them again)."""

from __future__ import annotations

import threading
from typing import Any

from toolkit.bench.plan import Cell
from toolkit.schema.manifest import ArmState, AutoStop, LaunchRecord, Timing, Window
from toolkit.schema.records import CellSummary, RequestRecord


class Ledger:
    def __init__(self, writer, progress: Any = None, stopping: threading.Event | None = None):
        self.writer = writer  # toolkit.results.archive.ArchiveWriter
        self.progress = progress  # a toolkit.schema.progress.RunProgress (MatrixProgress draws it) or None
        self.lock = threading.Lock()
        self.stopping = stopping or threading.Event()  # set by SIGINT/SIGTERM (toolkit.bench.matrix)
        self.cells: list[CellSummary] = []
        self.records: dict[tuple, list[RequestRecord]] = {}  # (arm, domain, concurrency) -> records, repeats and
        # launches pooled (each record carries its repeat and launch)
        self.arm_info: dict[str, ArmState] = {}  # arm -> what its server said about itself
        self.flushed: dict[str, bool] = {}  # arm -> every /flush_cache before its cells worked
        self.windows: dict[str, Window] = {}  # arm (+ __l<launch>) -> when it was measured (epoch s), on what hardware
        self.launches: dict[str, list[LaunchRecord]] = {}  # arm -> its server launches, by launch
        self.warmups: dict[str, LaunchRecord] = {}  # arm -> its warm-up launch (warmup true)
        self.auto: AutoStop | None = None  # launches_auto: why and after which round the run stopped
        # the fields set here (and each kind add_time adds) are the ones summary.json holds (exclude_unset)
        self.timing = Timing(launch_s={}, stop_s={}, cells_s=0.0, arm_cells_s={})
        self.closed = False  # set before the archive is finalized: a slot thread still stopping a job writes nothing

    def reload(self, archive) -> None:
        """The cells a resumed run already has (toolkit.results.archive.Archive), and the launches that
        measured them."""
        for c in archive.cells:
            key = (c.arm, c.domain, c.level)
            self.cells.append(c)
            self.records[key] = self.records.get(key, []) + list(archive.iter_records(c.key))
        for arm, recs in archive.derived.launches.items():
            self.launches[arm] = list(recs)
        self.warmups.update(archive.derived.warmup_launches)

    def record(self, cell: Cell, summary: CellSummary, records: list[RequestRecord]) -> None:
        with self.lock:
            if self.stopping.is_set():
                return
            self.writer.write_cell(summary, records)
            self.cells.append(summary)
            key = (cell.arm, cell.domain, cell.level)
            self.records[key] = self.records.get(key, []) + records
        if self.progress:
            self.progress.cell_done(cell, summary)

    def is_done(self, cell: Cell) -> bool:
        return cell.key in self.writer.done_cells()

    def write_file(self, relpath: str, data: str) -> None:
        self.writer.write_file(relpath, data)

    def add_time(self, kind: str, arm: str, seconds: float) -> None:
        """Seconds an arm spent on `kind` (a Timing field): launch_s, launch_failed_s, stop_s, warmup_launch_s
        (summed over its launches)."""
        with self.lock:
            d = getattr(self.timing, kind)
            setattr(self.timing, kind, {**d, arm: d.get(arm, 0.0) + seconds})  # set: summary.json holds it

    def add_launch(self, record: LaunchRecord) -> None:
        """One server launch of an arm, as it went (a resumed launch replaces the record of its number)."""
        with self.lock:
            runs = [r for r in self.launches.get(record.arm, []) if r.launch != record.launch]
            self.launches[record.arm] = sorted(runs + [record], key=lambda r: r.launch)

    def add_warmup(self, record: LaunchRecord) -> None:
        """An arm's warm-up launch (a resumed run that warms up again keeps the latest)."""
        with self.lock:
            self.warmups[record.arm] = record

    def amend_manifest(self, change) -> None:
        """`change(manifest)`: (field, new value) or None, applied to the manifest at once, under the lock (a
        target's launch record: a batch job is named the moment it is submitted, so --resume can cancel it); once
        SHA256SUMS is being written, nothing (the launch record keeps it)."""
        with self.lock:
            if self.closed:
                return
            got = change(self.writer.manifest)
            if got is not None:
                self.writer.amend_manifest(*got)

    def close(self) -> None:
        """No more manifest changes: the run is being finalized."""
        with self.lock:
            self.closed = True

    def cell_time(self, arm: str, seconds: float) -> None:
        with self.lock:
            self.timing.cells_s += seconds
            self.timing.arm_cells_s[arm] = self.timing.arm_cells_s.get(arm, 0.0) + seconds

    def set_flushed(self, arm: str, ok: bool) -> None:
        with self.lock:
            self.flushed[arm] = self.flushed.get(arm, True) and ok

    def set_arm(self, arm: str, info: ArmState | None = None, window: Window | None = None,
                label: str | None = None) -> None:
        """What an arm's server said (a later launch keeps the cells' states of the earlier ones), and when a
        launch measured (`label`: arm + launch suffix)."""
        with self.lock:
            if info is not None:
                before = self.arm_info.get(arm)
                info.cells = {**(before.cells if before else {}), **info.cells}  # set: summary.json holds it
                self.arm_info[arm] = info
            if window is not None:
                self.windows[label or arm] = window

    def cell_state(self, arm: str, key: str, state: dict) -> None:
        with self.lock:
            self.arm_info[arm].cells[key] = state

    def stop_warnings(self, arm: str, warnings: list[str]) -> None:
        """A stop that needed a harsher signal: a warning on the arm (a methodology check)."""
        with self.lock:
            info = self.arm_info.setdefault(arm, ArmState(cells={}))
            info.stop_warnings = [*info.stop_warnings, *warnings]
