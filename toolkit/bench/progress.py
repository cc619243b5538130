"""Live progress of a matrix run: bars for arms, cells and requests, with live tok/s (rich)."""

from __future__ import annotations

import threading
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toolkit.schema.progress import RunProgress
from toolkit.schema.records import CellSummary, RequestRecord


def _label(cell) -> str:
    return f"{cell.arm} {cell.domain} {cell.label} r={cell.repeat}" + (f" l={cell.launch}" if cell.launch else "")


class MatrixProgress(RunProgress):
    def __init__(self, console) -> None:
        self.console = console
        self.progress = Progress(TextColumn("{task.description}", justify="left"), BarColumn(bar_width=24),
                                 MofNCompleteColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                                 console=console, transient=False, disable=console.no_color and not console.is_terminal)
        self._lock = threading.Lock()
        self._cell_tasks: dict[str, int] = {}
        self.plain = not console.is_terminal

    def start(self, todo: dict, matrix) -> None:
        total = sum(len(v) for v in todo.values())
        self.matrix = matrix
        self.progress.start()
        self.cells_task = self.progress.add_task("cells", total=total, rate="")
        self.arm_tasks = {arm: self.progress.add_task(f"arm {arm}", total=len(cells), rate="waiting")
                          for arm, cells in todo.items()}

    def arm_starting(self, arm: str) -> None:
        self.progress.update(self.arm_tasks[arm], rate="starting server")
        if self.plain:
            self.console.print(f"arm {arm}: starting server")

    def arm_waiting(self, arm: str, text: str) -> None:
        """A server that is not up yet: what its health check answers, every few seconds."""
        self.progress.update(self.arm_tasks[arm], rate=text)
        if self.plain:
            self.console.print(f"arm {arm}: {text}", markup=False, highlight=False)

    def on_record(self, cell):
        key = _label(cell)
        with self._lock:
            task = self.progress.add_task(f"  {key}", total=self.matrix.sent_at(cell.concurrency), rate="")
        t0 = time.monotonic()
        tokens = [0]

        def cb(rec: RequestRecord) -> None:
            if not rec.warmup:
                tokens[0] += rec.output_tokens
            el = time.monotonic() - t0
            self.progress.update(task, advance=1, rate=f"{tokens[0] / el:.0f} tok/s" if el > 0 else "")

        self._cell_tasks[key] = task
        return cb

    def cell_done(self, cell, summary: CellSummary) -> None:
        key = _label(cell)
        task = self._cell_tasks.pop(key, None)
        if task is not None:
            self.progress.remove_task(task)
        tput = summary.metrics.get("output_tok_s")
        rate = f"{tput.mean:.0f} tok/s" if tput and tput.mean else summary.status
        self.progress.update(self.arm_tasks[cell.arm], advance=1, rate=rate)
        self.progress.update(self.cells_task, advance=1)
        if self.plain:
            said = rate if summary.status == "ok" else (summary.reason or "")
            self.console.print(f"cell {key}: {summary.status} {said}".rstrip(), markup=False, highlight=False)

    def stop(self) -> None:
        self.progress.stop()
