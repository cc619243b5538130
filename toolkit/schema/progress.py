"""What a run tells the one watching it: the matrix runner's progress interface, as a base class whose
every method does nothing. A display subclasses it and overrides what it shows, so a display that leaves
a call out (a test's, a caller's, one written before the runner gained a call) cannot crash a run.

    start(todo, matrix)          the cells still to run, per arm; the Matrix
    arm_starting(arm)            its server is being launched
    arm_waiting(arm, text)       not up yet: what its health check answers
    on_record(cell)              a cell begins: a callback per request record, or None
    cell_done(cell, summary)     a cell's CellSummary
    stop()                       the run is over (finished or interrupted)

toolkit.bench.progress.MatrixProgress draws it for `bench matrix`; toolkit.tune.progress.TuneProgress
draws every run of a tune session into one bar over trials (and adds the session's calls).
"""

from __future__ import annotations

from typing import Any, Callable


class RunProgress:
    def start(self, todo: dict, matrix: Any) -> None:
        pass

    def arm_starting(self, arm: str) -> None:
        pass

    def arm_waiting(self, arm: str, text: str) -> None:
        pass

    def on_record(self, cell: Any) -> Callable[[Any], None] | None:
        return None

    def cell_done(self, cell: Any, summary: Any) -> None:
        pass

    def stop(self) -> None:
        pass
