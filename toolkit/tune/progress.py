"""Live progress of a tune: one bar over trial evaluations (every rung's arms, then the confirmation) with
the current best, and one over the requests of the cell running now. It speaks the matrix runner's
progress interface (start, arm_starting, on_record, cell_done, stop), so each run of the session reports
into the same bars."""

from __future__ import annotations

import threading
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class TuneProgress:
    def __init__(self, console, total: int) -> None:
        self.console = console
        self.plain = not console.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console,
                                 disable=self.plain)
        self._lock = threading.Lock()
        self.stage = ""
        self.best = "best: -"
        self.progress.start()
        self.trials = self.progress.add_task("trials", total=total, info=self.best)
        self._left: dict[str, int] = {}
        self._cell = None

    # -- the session's calls
    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self._refresh()

    def set_best(self, text: str) -> None:
        self.best = f"best: {text}"
        self._refresh()
        if self.plain:
            self.console.print(f"{self.stage}: {self.best}", markup=False)

    def skip(self, n: int) -> None:
        """Evaluations already done (a resumed session) or no longer planned (an early stop)."""
        self.progress.update(self.trials, advance=n)

    def finish(self) -> None:
        self.progress.stop()

    def _refresh(self) -> None:
        self.progress.update(self.trials, description=f"trials {self.stage}".strip(), info=self.best)

    def begin(self, units: list, _levels: int = 0) -> None:
        """The runs of one rung: (name, arms, workloads, concurrency levels) each; a trial is done when all its
        cells over these runs are."""
        self._left = {}
        for _, arms, workloads, conc in units:
            for arm in arms:
                self._left[arm] = self._left.get(arm, 0) + len(workloads) * len(conc)

    def reused(self, arms: list[str], cells: int) -> None:
        """A run finished before (a resumed session): its cells count as done."""
        for arm in arms:
            self._cells_done(arm, cells)

    def _cells_done(self, arm: str, n: int) -> None:
        with self._lock:
            before = self._left.get(arm, 0)
            self._left[arm] = before - n
        if before > 0 >= before - n:
            self.progress.update(self.trials, advance=1)
            if self.plain:
                self.console.print(f"{self.stage}: {arm} done", markup=False)

    # -- the matrix runner's interface
    def start(self, todo: dict, matrix) -> None:
        self.per_cell = matrix.warmup + (matrix.requests or 0)
        planned = len(matrix.workloads) * len(matrix.concurrency) * matrix.repeats
        for arm, cells in todo.items():
            if planned - len(cells):
                self._cells_done(arm, planned - len(cells))

    def arm_starting(self, arm: str) -> None:
        pass

    def arm_waiting(self, arm: str, text: str) -> None:
        pass

    def on_record(self, cell):
        with self._lock:
            if self._cell is not None:
                self.progress.remove_task(self._cell)
            self._cell = self.progress.add_task(f"  {cell.arm} {cell.domain} c={cell.concurrency}",
                                                total=self.per_cell or None, info="")
        task, t0, tokens = self._cell, time.monotonic(), [0]

        def cb(rec) -> None:
            if not rec.warmup:
                tokens[0] += rec.output_tokens
            el = time.monotonic() - t0
            self.progress.update(task, advance=1, info=f"{tokens[0] / el:.0f} tok/s" if el > 0 else "")

        return cb

    def cell_done(self, cell, summary) -> None:
        self._cells_done(cell.arm, 1)

    def stop(self) -> None:
        with self._lock:
            if self._cell is not None:
                self.progress.remove_task(self._cell)
                self._cell = None
