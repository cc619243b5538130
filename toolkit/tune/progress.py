"""Live progress of a tune. The session is handed its progress (it imports no display): SearchProgress is
the interface, every call a no-op, so a caller's display that leaves one out cannot crash a session;
TuneProgress draws it (the CLI's): one bar over trial evaluations (every rung's arms, then the
confirmation) with the current best, and one over the requests of the cell running now. Both speak the
matrix runner's interface too (toolkit.schema.progress.RunProgress), so each run of the session reports
into the same bars."""

from __future__ import annotations

import threading
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toolkit.schema.progress import RunProgress


class SearchProgress(RunProgress):
    """The session's calls, beside the runner's: each does nothing here."""

    def begin_session(self, total: int) -> None:
        """The session's trial evaluations: every rung's arms (and A/A twins), then the confirmation."""

    def set_stage(self, stage: str) -> None:
        """`rung k/n` or `confirmation`."""

    def set_best(self, text: str) -> None:
        """The leader after a rung, formatted."""

    def skip(self, n: int) -> None:
        """Evaluations already done (a resumed session) or no longer planned (an early stop)."""

    def begin(self, units: list, levels: int = 0, launches: int = 1) -> None:
        """The runs of one rung: (name, arms, workloads, concurrency levels) each."""

    def reused(self, arms: list[str], cells: int) -> None:
        """A run finished before (a resumed session): its cells count as done."""

    def finish(self) -> None:
        """The session is over."""


class TuneProgress(SearchProgress):
    def __init__(self, console) -> None:
        self.console = console
        self.plain = not console.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console,
                                 disable=self.plain)
        self._lock = threading.Lock()
        self.stage = ""
        self.best = "best: -"
        self.trials = None
        self._left: dict[str, int] = {}
        self._cell = None

    # -- the session's calls
    def begin_session(self, total: int) -> None:
        self.progress.start()
        self.trials = self.progress.add_task("trials", total=total, info=self.best)

    def set_stage(self, stage: str) -> None:
        self.stage = stage
        self._refresh()

    def set_best(self, text: str) -> None:
        self.best = f"best: {text}"
        self._refresh()
        if self.plain:
            self.console.print(f"{self.stage}: {self.best}", markup=False)

    def skip(self, n: int) -> None:
        self.progress.update(self.trials, advance=n)

    def finish(self) -> None:
        self.progress.stop()

    def _refresh(self) -> None:
        self.progress.update(self.trials, description=f"trials {self.stage}".strip(), info=self.best)

    def begin(self, units: list, _levels: int = 0, launches: int = 1) -> None:
        """The runs of one rung: (name, arms, workloads, concurrency levels) each, `launches` rounds of them; a
        trial is done when all its cells over these runs are."""
        self._left = {}
        for _, arms, workloads, conc in units:
            for arm in arms:
                self._left[arm] = self._left.get(arm, 0) + len(workloads) * len(conc) * launches

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
        self.matrix = matrix
        planned = len(matrix.workloads) * len(matrix.concurrency) * matrix.repeats * matrix.launches
        for arm, cells in todo.items():
            if planned - len(cells):
                self._cells_done(arm, planned - len(cells))

    def on_record(self, cell):
        with self._lock:
            if self._cell is not None:
                self.progress.remove_task(self._cell)
            self._cell = self.progress.add_task(f"  {cell.arm} {cell.domain} c={cell.concurrency}",
                                                total=self.matrix.sent_at(cell.concurrency), info="")
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
