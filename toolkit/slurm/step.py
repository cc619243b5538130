"""A cell's load generator as a step of its arm's job (`slurm: {loadgen: job-step}`, the default): srun --overlap
on the server's node runs `python -m toolkit.loadgen.step CELL.json` (toolkit.loadgen.step), so no network hop
between the submitting host and the node is measured. This side writes the cell's file into the job's workdir
(the shared file system), feeds the runner's progress from the step's events, answers its measure event (the
runner reads the server's counters there), watches the job as the in-process path does, and reads back the
step's records: the cell's records, exactly those run_cell returned on the node.

    records, step = run_cell_in_job(launcher, load, prompts, n=0, model="m", arm="baseline", domain="coding",
                                    repeat=0, on_record=..., on_measure=..., check_alive=...)
    step     # {"step": "42.0", "host": "node1", "workers": 1}

The step needs the toolkit's Python (sys.executable) at the same path on the node: a venv on the shared file
system. Where it is not, `loadgen: submit-host` runs the load from this host instead (docs/slurm.md).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from toolkit.errors import ToolFailure
from toolkit.fsutil import tail_lines
from toolkit.loadgen.load import CellLoad
from toolkit.loadgen.share import CellFailed, cell_failed
from toolkit.loadgen.step import paths
from toolkit.schema.records import Prompt, RequestRecord
from toolkit.slurm import tools

POLL_S = 0.2
CHECK_EVERY_S = 0.5  # the launcher's own check_alive asks slurmctld at most every launcher.POLL_S
SETTLE_S = 10.0  # after the step exits, its last writes may take this long to show on a shared file system
STEP_STOP_S = 30.0


class _Events:
    """The step's events file, read on as it grows (opened afresh each time: close-to-open consistency)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


def run_cell_in_job(launcher, load: CellLoad, prompts: list[Prompt], *, n: int, model: str | None, arm: str,
                    domain: str, repeat: int, on_record: Callable[[RequestRecord], None] | None = None,
                    on_measure: Callable[[], None] | None = None,
                    check_alive: Callable[[], None] | None = None) -> tuple[list[RequestRecord], dict]:
    """Run one cell as a step of `launcher`'s job (a running toolkit.slurm.launcher.SlurmLauncher); `n` numbers
    the launch's cells (file names). Returns the records and where the step ran; raises CellFailed (with the
    records measured so far) when the job ends or the step fails, like run_cell does."""
    job = launcher.job
    cell = job.workdir / f"{job.job_name}-{launcher.job_id}.cell{n}.json"
    files, log_path = paths(cell), cell.with_suffix(".log")
    for f in (*files, log_path):
        f.unlink(missing_ok=True)
    who = {"model": model, "arm": arm, "domain": domain, "repeat": repeat}
    load = replace(load, workers=load.processes)  # as the cell's summary records it
    cell.write_text(json.dumps({"url": launcher.base_url, "load": asdict(load), "who": who,
                                "prompts": [p.model_dump(mode="json") for p in prompts]}))
    events, streamed, outcome = _Events(files.events), [], None
    try:
        with open(log_path, "wb") as log:
            proc = tools.step(launcher.job_id, launcher.node, [sys.executable, "-m", "toolkit.loadgen.step", str(cell)],
                              log=log, cpus=launcher.cpus_per_node)
            try:
                outcome = _follow(proc, events, streamed, files.go, on_record, on_measure, check_alive)
            except ToolFailure as exc:  # the job ended (or its server stopped listening) during the cell
                raise cell_failed(exc, streamed, who, load.concurrency) from None
            finally:
                _end(proc, 10.0 if outcome is not None else 0.0)
        if outcome is None:
            tail = tail_lines(log_path, 20)
            said = tail.splitlines()[-1] if tail else "no output"
            raise CellFailed(f"cell {arm}/{domain}/c{load.concurrency} failed: its load generator's job step ended "
                             f"(srun exit {proc.returncode}) before the cell did: {said}", streamed,
                             hint=f"the step's output ({log_path}):\n{tail}")
        records = _records(files.records)
        if "failed" in outcome:
            raise CellFailed(outcome["failed"], records, hint=outcome.get("hint"))
        return records, {k: outcome.get(k) for k in ("step", "host", "workers")}
    finally:
        for f in (cell, *files, log_path):
            f.unlink(missing_ok=True)


# json-edge: the step's last JSON event
def _follow(proc, events: _Events, streamed: list, go: Path, on_record, on_measure, check_alive) -> dict | None:
    """Until the step's last event (returned) or its exit without one (None)."""
    next_check, exited_at = 0.0, None
    while True:
        for ev in events.read():
            if "record" in ev:
                rec = RequestRecord.model_validate(ev["record"])
                streamed.append(rec)
                if on_record is not None:
                    on_record(rec)
            elif "measure" in ev:
                if on_measure is not None:
                    on_measure()
                go.touch()
            else:
                return ev
        if proc.poll() is not None:
            exited_at = exited_at or time.monotonic()
            if time.monotonic() - exited_at > (SETTLE_S if proc.returncode == 0 else 2.0):
                if check_alive is not None:
                    check_alive()  # a job that ended is the reason its step did
                return None
        elif check_alive is not None and time.monotonic() >= next_check:
            check_alive()
            next_check = time.monotonic() + CHECK_EVERY_S
        time.sleep(POLL_S)


def _records(path: Path) -> list[RequestRecord]:
    deadline = time.monotonic() + SETTLE_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(POLL_S)
    try:
        return [RequestRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        raise ToolFailure(f"the load generator's job step said it was done but wrote no records ({path})",
                          hint="the shared file system did not show the file within "
                               f"{SETTLE_S:.0f} s") from None


def _end(proc, grace_s: float) -> None:
    """A step still running `grace_s` after the cell is over for this side (done, the job ended, a failure
    here): SIGTERM to srun (it ends the step's task), SIGKILL after a bound."""
    try:
        proc.wait(grace_s)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it is ended below
        pass
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STEP_STOP_S)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: the harder way
            proc.kill()
            proc.wait(10)


