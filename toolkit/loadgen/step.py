"""`python -m toolkit.loadgen.step CELL.json`: one cell, run where the runner placed this process (a Slurm job step
beside the server: toolkit.slurm.step), talking to the runner only through files next to CELL.json on the file
system both share.

    CELL.json      written by the runner: {"url", "load": CellLoad's fields, "prompts": [...], "who": {model, arm,
                   domain, repeat}}
    CELL.events    written here, one JSON line each, flushed at once: {"record": ...} as each request completes
                   (the runner's progress display), {"measure": true} between warmup and the measured phase (the
                   runner reads the server's counters, then creates CELL.go; this process waits for it, so nothing
                   is in flight meanwhile, as in the runner's own process), and last {"done": ...} or {"failed": ...}
    CELL.records   every record in run_cell's order (JSON lines), written whole before the last event: the cell's
                   records, exactly those run_cell returned

Exit 0 when the cell ran (its requests may have failed: they are records too), 1 when it could not.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import NamedTuple

from toolkit.errors import ToolFailure
from toolkit.loadgen.cell import run_cell
from toolkit.loadgen.load import CellLoad
from toolkit.loadgen.share import run
from toolkit.schema.records import Prompt, RequestRecord

GO_WAIT_S = 300.0  # the runner answers a `measure` event within this; else it is gone and the step ends


class StepFiles(NamedTuple):
    """The files of one cell step, beside its CELL.json: the events it streams, the records it writes last, and
    the marker the runner touches when the measured phase may start."""

    events: Path
    records: Path
    go: Path


def paths(cell: Path) -> StepFiles:
    """The files of one cell step, beside its CELL.json (the runner's side reads the same names)."""
    base = str(cell.with_suffix(""))
    return StepFiles(*(Path(f"{base}.{name}") for name in StepFiles._fields))


def step_id() -> str | None:
    """JOBID.STEPID of the Slurm step this runs in (None outside Slurm)."""
    job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")
    return f"{job}.{step}" if job and step else None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m toolkit.loadgen.step CELL.json", file=sys.stderr)
        return 2
    cell = Path(args[0])
    doc = json.loads(cell.read_text())
    files = paths(cell)
    load = CellLoad(**doc["load"])
    prompts = [Prompt.model_validate(p) for p in doc["prompts"]]
    with open(files.events, "a", buffering=1) as events:  # line-buffered: each event is seen as it happens
        def say(event: dict) -> None:
            events.write(json.dumps(event) + "\n")
            events.flush()

        def measured() -> None:
            say({"measure": True})
            deadline = time.monotonic() + GO_WAIT_S
            while not files.go.exists():
                if time.monotonic() > deadline:
                    raise ToolFailure(f"the runner did not answer the measure event within {GO_WAIT_S:.0f} s")
                time.sleep(0.05)

        where = {"step": step_id(), "host": socket.gethostname(), "workers": load.processes}
        records: list[RequestRecord] = []
        try:
            records = run(run_cell(doc["url"], load, prompts, **doc["who"], on_measure=measured,
                                   on_record=lambda r: say({"record": r.model_dump(mode="json")})))
            outcome: dict = {"done": True, **where}
            code = 0
        except ToolFailure as exc:
            records = getattr(exc, "records", records)
            outcome, code = {"failed": exc.message, "hint": exc.hint, **where}, 1
        tmp = files.records.with_name(files.records.name + ".tmp")
        tmp.write_text("".join(r.model_dump_json() + "\n" for r in records))
        tmp.replace(files.records)
        say(outcome)
    return code


if __name__ == "__main__":
    sys.exit(main())
