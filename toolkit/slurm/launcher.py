"""An arm's server as a Slurm batch job: the Launcher protocol (toolkit.serve.base) over sbatch, scontrol and
scancel (toolkit.slurm.tools).

    start()         writes the rendered script to the shared workdir and submits it (sbatch --parsable)
    wait_healthy()  watches the job: PENDING (and its reason) is progress; FAILED, CANCELLED, TIMEOUT, NODE_FAIL...
                    end the wait at once with the job's state and log tail; RUNNING: reads the endpoint file the
                    job wrote (node, port, GPUs) and polls the server's health from this host
    cell_step       with `loadgen: job-step` (the default): runs a cell's load generator as a step of the job, on
                    the server's node (toolkit.slurm.step); None with `loadgen: submit-host`
    check_alive()   the job has ended (or its server stopped listening and the job then ended): ToolFailure
    stop()          scancel, then waits for the job to leave the queue; SIGKILL through scancel after a bound

Every launcher that submitted a job is registered with toolkit.serve.base's cleanup (atexit, SIGINT/SIGTERM), so
a Ctrl-C, SIGTERM or a crash of the toolkit cancels its job; the job ids are also archived the moment they
exist (archive_files), for --resume to cancel what a `kill -9` left.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable

from toolkit import engines
from toolkit.errors import ToolFailure
from toolkit.fsutil import tail_lines, write_atomic
from toolkit.schema.manifest import ArmState, Hardware, SlurmJobRecord, SlurmLaunch, StopRecord
from toolkit.serve.base import NOTE_EVERY_S, BaseLauncher, http_get, last_error_line
from toolkit.serve.sglang import SGLangMixin
from toolkit.slurm import tools
from toolkit.slurm.render import PORT, JobScript

POLL_S = 5.0  # at most one scontrol per launcher this often while cells run (slurmctld is shared); a server
# that stops listening is asked about at once
STOP_WAIT_S = 60.0
FINAL_STATE_WAIT_S = 45.0
HEARTBEAT_EVERY_S = 10.0  # the job ends itself once the file is TOOLKIT_SLURM_ORPHAN_S old (toolkit.settings)  # a job COMPLETING has its final state once Slurm's KillWait (default 30 s) is over  # scancel: SIGTERM, then Slurm's own KillWait; this long before SIGKILL from here


class SlurmLauncher(BaseLauncher):
    """One arm's server as one Slurm job (the embedded engine, or any engine without its own helpers)."""

    name = "server (Slurm job)"

    def __init__(self, job: JobScript, *, log_path: Path | None = None, stop_timeout_s: float = STOP_WAIT_S):
        super().__init__("127.0.0.1", 1)  # host and port: what the job says once it runs
        self.job = job
        self.command = [("$PORT" if a == PORT else a) for a in job.command]
        self.model = job.model
        self.stop_timeout_s = stop_timeout_s
        self.job_id: str | None = None
        self.node: str | None = None
        self.gpus: str | None = None
        self._url: str | None = None
        self._script: Path | None = None
        self._state: tools.JobState | None = None
        self._state_at = 0.0
        self._notes: StopRecord | None = None
        self._beating = threading.Event()
        self.steps: dict[str, str] = {}  # cell key -> JOBID.STEPID its load generator ran as

    # -- where the job is
    @property
    def base_url(self) -> str:
        return self._url or ""

    @property
    def log_path(self) -> Path | None:
        return self.job.workdir / f"{self.job.job_name}-{self.job_id}.out" if self.job_id else None

    @property
    def endpoint_path(self) -> Path | None:
        return self.job.workdir / f"{self.job.job_name}-{self.job_id}.endpoint" if self.job_id else None

    @property
    def hardware(self) -> Hardware | None:
        """What the job's server loads, as a slot's hardware: its node and GPUs (all: it got none of its own)."""
        return Hardware(host=self.node, gpus=self.gpus or "all") if self.node else None

    @property
    def cpus_per_node(self) -> int | None:
        """The CPUs the job holds on each node (a load generator step may use them all, beside the server)."""
        st = self.state()
        return st.cpus // self.job.nodes if st.cpus else None

    @property
    def cell_step(self) -> Callable[..., list] | None:
        """How the runner sends a cell when its load generator runs as a job step; None: from the runner's host."""
        return self._run_cell_step if self.job.loadgen == "job-step" else None

    def _run_cell_step(self, key: str, load, prompts, **who) -> list:
        from toolkit.slurm.step import run_cell_in_job

        records, where = run_cell_in_job(self, load, prompts, n=len(self.steps), **who)
        self.steps[key] = where.get("step") or "?"
        return records

    def state(self, fresh: bool = False) -> tools.JobState:
        if fresh or self._state is None or time.monotonic() - self._state_at >= POLL_S:
            if self.job_id is None:
                return tools.JobState("UNSUBMITTED")
            self._state, self._state_at = tools.job_state(self.job_id), time.monotonic()
        return self._state

    # -- BaseLauncher hooks
    @property
    def heartbeat_path(self) -> Path:
        return self.job.workdir / f"{self.job.job_name}.{os.getpid()}.{id(self):x}.heartbeat"

    def _spawn(self) -> None:
        from toolkit.settings import settings

        self.job.workdir.mkdir(parents=True, exist_ok=True)
        self._script = write_atomic(self.job.workdir / f"{self.job.job_name}.{os.getpid()}.sbatch", self.job.text,
                                    mode=0o755)
        self.heartbeat_path.touch()
        self._beating.set()
        threading.Thread(target=self._beat, name=f"heartbeat {self.job.job_name}", daemon=True).start()
        self.job_id = tools.sbatch(self._script, export={
            "TOOLKIT_HEARTBEAT": str(self.heartbeat_path),
            "TOOLKIT_HEARTBEAT_TIMEOUT_S": str(int(settings().slurm_orphan_s))})

    def _beat(self) -> None:
        """Touch the heartbeat file while this toolkit lives and the job is wanted (a daemon thread: it dies with
        the process, however the process dies)."""
        while self._beating.is_set():
            try:
                os.utime(self.heartbeat_path)
            except OSError:
                pass
            time.sleep(HEARTBEAT_EVERY_S)

    def _poll_exit(self) -> int | None:
        st = self.state()
        if not st.ended:
            return None
        code, _, sig = (st.exit_code or "").partition(":")
        if code.isdigit() and int(code):
            return int(code)
        if sig.isdigit() and int(sig):
            return 128 + int(sig)
        return 0 if st.state == "COMPLETED" else 1

    def _terminate(self) -> None:
        notes: dict = {"signals": [], "warnings": []}
        try:
            if self.job_id and not self.state(fresh=True).ended:
                tools.scancel(self.job_id)
                notes["signals"].append("scancel (SIGTERM to the job's processes, SIGKILL after Slurm's KillWait)")
                if not self._wait_ended(self.stop_timeout_s):
                    notes["warnings"].append(f"Slurm job {self.job_id} was still {self.state().state} "
                                             f"{self.stop_timeout_s:g} s after scancel; sent SIGKILL")
                    tools.scancel(self.job_id, "KILL")
                    notes["signals"].append("scancel --signal=KILL")
                    self._wait_ended(30.0)
        finally:
            st = self.state(fresh=True) if self.job_id else None
            notes["job_state"] = st.describe() if st else None
            self._notes = StopRecord(**notes)
            self._beating.clear()
            for path in (self.endpoint_path, self._script, self.heartbeat_path):
                if path is not None:
                    path.unlink(missing_ok=True)

    def _wait_ended(self, seconds: float) -> bool:
        """Until the job has left the queue (COMPLETING still holds its node): its final state is then known."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            st = self.state(fresh=True)
            if st.ended and st.state != "COMPLETING":
                return True
            time.sleep(0.5)
        return False

    # -- the interface
    def wait_healthy(self, timeout_s: float = 300.0, progress: Callable[[str], None] | None = None) -> None:
        """Wait for the job to run and its server to answer. A queued job waits as long as the queue takes
        (its state and reason go to `progress`); `timeout_s` counts from the moment the job runs."""
        self.start()
        t0, running_since, next_note = time.monotonic(), None, 0.0
        while True:
            st = self.state(fresh=True)
            if st.ended:
                raise self._ended(st, "start-up")
            said = f"Slurm job {self.job_id} {st.describe()}"
            if st.state == "RUNNING":
                running_since = running_since or time.monotonic()
                if self._url is None:
                    self._read_endpoint()
                if self._url is not None:
                    status, body = http_get(self._url + self.health_path, timeout=2.0)
                    if status == 200:
                        return
                    said += f", {self._url}: " + (f"HTTP {status}" if status else "not listening yet")
                if time.monotonic() - running_since > timeout_s:
                    raise ToolFailure(f"{said}: its server did not answer with 200 within {timeout_s:.0f} s of the "
                                      "job starting", hint=f"last lines of the job's log:\n{self.log_tail(20)}")
            if progress is not None and time.monotonic() >= next_note:
                progress(f"{said} ({time.monotonic() - t0:.0f} s)")
                next_note = time.monotonic() + NOTE_EVERY_S
            time.sleep(1.0)

    def _read_endpoint(self) -> None:
        try:
            words = self.endpoint_path.read_text().split()
        except OSError:
            return
        if len(words) >= 2 and words[1].isdigit():
            self.node, self.port = words[0], int(words[1])
            self.host = self.node
            self.gpus = words[2] if len(words) > 2 and words[2] != "all" else None
            self._url = f"http://{self.node}:{self.port}"

    def check_alive(self, during: str = "the cell") -> None:
        st = self.state()
        if not st.ended and self._url is not None and not self._listening():
            st = self.state(fresh=True)  # the server stopped listening: Slurm says why once the job ends
            deadline = time.monotonic() + 10.0
            while not st.ended and time.monotonic() < deadline:
                time.sleep(1.0)
                st = self.state(fresh=True)
        if st.ended:
            raise self._ended(st, during)

    def _listening(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=2.0):
                return True
        except OSError:
            return False

    def _ended(self, st: tools.JobState, during: str) -> ToolFailure:
        """The failure of a job that ended: its state (and sacct's, where the cluster keeps accounting), the
        server's last error line and the job log's tail. A job still COMPLETING is waited for (bounded): its
        final state (TIMEOUT, CANCELLED, NODE_FAIL, ...) is the reason."""
        if st.state == "COMPLETING" and self._wait_ended(FINAL_STATE_WAIT_S):
            st = self.state()
        acct = tools.sacct_state(self.job_id) if self.job_id else None
        text = self.log_tail(200)
        said = last_error_line(text)
        where = f" on {self.node or st.nodes}" if (self.node or st.nodes) else ""
        message = (f"Slurm job {self.job_id} (arm {self.job.arm}{where}) ended during {during}: {st.describe()}"
                   + (f"; sacct: {acct}" if acct else "") + (f": {said}" if said else ""))
        tail = "\n".join(text.splitlines()[-20:])
        return ToolFailure(message, hint=f"last lines of the job's log {self.log_path}:\n{tail}" if tail
                           else f"the job wrote no log ({self.log_path})")

    def log_tail(self, n: int = 40) -> str:
        return tail_lines(self.log_path, n)

    def stop_info(self) -> StopRecord | None:
        return self._notes

    def info(self) -> ArmState:
        return super().info().add(command_line=self.job.command_line, slurm=self.job_launch())

    def job_launch(self) -> SlurmLaunch:
        """What the launch record keeps: the job, where it ran, how it ended."""
        st = self._state
        return SlurmLaunch(job_id=self.job_id, job_name=self.job.job_name, node=self.node, gpus=self.gpus or "all",
                           state=st.describe() if st else None, script=f"slurm/{self.job.arm}.sbatch",
                           log=str(self.log_path) if self.log_path else None, loadgen=self.job.loadgen,
                           **({"steps": dict(self.steps)} if self.steps else {}))

    def job_record(self, launch: int) -> SlurmJobRecord | None:
        """The job as the manifest's slurm.jobs lists it; None before it was submitted."""
        if self.job_id is None:
            return None
        st = self._state
        return SlurmJobRecord(job_id=self.job_id, arm=self.job.arm, launch=launch, job_name=self.job.job_name,
                              node=self.node, gpus=(self.gpus or "all") if self.node else None,
                              state=st.describe() if st else None, steps=dict(self.steps))

    def archive_files(self) -> dict[str, str]:  # data-keyed: archive path
        """Written to the archive as soon as the job is submitted: its script (its id goes into the manifest's
        slurm.jobs at the same moment: --resume cancels a job a killed toolkit left)."""
        return {f"slurm/{self.job.arm}.sbatch": self.job.text} if self.job_id is not None else {}


class SGLangSlurmLauncher(SGLangMixin, SlurmLauncher):
    """SGLang in a Slurm job: /server_info and /flush_cache as for any SGLang server the toolkit starts."""

    name = "sglang (Slurm job)"


def slurm_launcher(env_spec, preset: str, *, job: JobScript, log_path: Path | None = None, **_) -> SlurmLauncher:
    """The launcher of one arm's job (toolkit.targets.slurm.Slurm.launcher_kwargs renders `job`)."""
    cls = SGLangSlurmLauncher if engines.get(env_spec.model.engine).reports_server_info else SlurmLauncher
    return cls(job, log_path=log_path)


def cancel_recorded(run_dir: Path, manifest) -> list[str]:
    """Cancel the jobs an earlier run of this archive submitted that still run (a toolkit killed with -9 could
    not cancel them): those its manifest lists (slurm.jobs), and those of slurm/jobs/*.json (where runs before
    the manifest listed them kept their ids); the ids cancelled."""
    ids = [j.job_id for j in manifest.slurm.jobs] if manifest.slurm is not None else []
    for f in sorted((run_dir / "slurm" / "jobs").glob("*.json")):
        try:
            ids.append(str(json.loads(f.read_text())["job_id"]))
        except (OSError, ValueError, KeyError):
            continue
    left = tools.alive(ids) if ids else []
    for job_id in left:
        tools.scancel(job_id)
    return left
