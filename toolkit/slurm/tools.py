"""The one wrapper around Slurm's commands (sbatch, srun, scontrol, sacct, scancel, squeue): nothing else in the
toolkit runs them. Each call has a deadline; a command that is missing is a ToolkitError naming it.

    job_id = sbatch(Path("job.sbatch"))
    state = job_state(job_id)          # JobState(state="PENDING", reason="Resources", nodes="", exit_code=None)
    scancel(job_id)
    proc = step(job_id, "node1", ["python3", "-m", "toolkit.loadgen.step", "cell.json"], log=f)  # a job step
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from toolkit.errors import ToolFailure, ToolkitError

CALL_TIMEOUT_S = 60.0
# a job in one of these will not serve again (COMPLETING: its processes are being ended)
ENDED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT"}
_PAIR = re.compile(r"(\w[\w/:]*)=(\S*)")


@dataclass(frozen=True)
class JobState:
    """What Slurm says about a job now. `state`: its JobState (UNKNOWN once Slurm has forgotten it)."""

    state: str
    reason: str = ""
    nodes: str = ""
    exit_code: str | None = None  # "CODE:SIGNAL", as Slurm writes it
    stdout: str | None = None
    cpus: int | None = None  # the job's CPUs (NumCPUs), all its nodes together

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == "UNKNOWN"

    def describe(self) -> str:
        """`TIMEOUT (exit 0:15) on node1`, `PENDING (Resources)`."""
        out = self.state
        if self.state == "PENDING" and self.reason and self.reason != "None":
            out += f" ({self.reason})"
        elif self.ended and self.exit_code and self.exit_code != "0:0":
            out += f" (exit {self.exit_code})"
        if self.nodes and self.nodes != "(null)" and self.state != "PENDING":
            out += f" on {self.nodes}"
        return out


def _run(argv: list[str], timeout: float = CALL_TIMEOUT_S) -> subprocess.CompletedProcess:
    if shutil.which(argv[0]) is None:
        raise ToolkitError(f"{argv[0]} is not on PATH: a Slurm target runs `toolkit bench matrix` on a host that "
                           "submits jobs (a login node)", hint="install Slurm's client commands and its "
                           "configuration (SLURM_CONF), or run from the cluster's login node (docs/slurm.md)")
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ToolFailure(f"`{' '.join(argv)}` did not answer within {timeout:.0f} s",
                          hint="slurmctld is slow or down: `scontrol ping` says which") from None


def sbatch(script: Path, export: dict[str, str] | None = None) -> str:
    """Submit a batch script (`export`: variables added to the job's environment); the job id."""
    more = [f"--export=ALL,{','.join(f'{k}={v}' for k, v in export.items())}"] if export else []
    r = _run(["sbatch", "--parsable", *more, str(script)])
    if r.returncode != 0:
        raise ToolFailure(f"sbatch refused {script.name}: {(r.stderr or r.stdout).strip()[:500]}",
                          hint=f"the script is {script}: `sbatch {script}` by hand says the same")
    return r.stdout.strip().split(";")[0]


def job_state(job_id: str) -> JobState:
    """The job's state from slurmctld (scontrol), or from accounting (sacct) once slurmctld forgot it."""
    r = _run(["scontrol", "show", "job", "-o", job_id])
    if r.returncode == 0 and "JobState=" in r.stdout:
        f = dict(_PAIR.findall(r.stdout))
        cpus = f.get("NumCPUs", "")
        return JobState(f.get("JobState", "UNKNOWN"), f.get("Reason", ""), f.get("NodeList", ""),
                        f.get("ExitCode"), f.get("StdOut"), int(cpus) if cpus.isdigit() else None)
    acct = sacct_state(job_id)
    if acct:
        state, _, exit_code = acct.partition(" ")
        return JobState(state.split()[0], exit_code=exit_code.strip() or None)
    return JobState("UNKNOWN", reason=(r.stderr or r.stdout).strip()[:200])


def sacct_state(job_id: str) -> str | None:
    """`STATE EXITCODE` from Slurm's accounting, or None where the cluster keeps none (or sacct is missing)."""
    try:
        r = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"], timeout=20)
    except ToolkitError:
        return None
    line = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
    return line.replace("|", " ") or None


def step(job_id: str, node: str, argv: list[str], *, log: IO, cpus: int | None = None) -> subprocess.Popen:
    """Start `argv` as a step of a running job, one task on `node`, beside the job's own processes (--overlap:
    it takes none of their CPUs, GPUs or memory away and waits for none). Its output goes to `log`; it runs in
    a session of its own, so a Ctrl-C reaches the toolkit alone, which then cancels the job (and the step)."""
    if shutil.which("srun") is None:
        _run(["srun"])  # the error naming it
    opts = [f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            "--job-name=toolkit-loadgen", "--kill-on-bad-exit=1", *([f"--cpus-per-task={cpus}"] if cpus else [])]
    return subprocess.Popen(["srun", *opts, *argv], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def scancel(job_id: str, signal: str | None = None) -> None:
    """Cancel a job (or send it a signal); a job Slurm no longer knows is not an error."""
    argv = ["scancel", *([f"--signal={signal}"] if signal else []), job_id]
    r = _run(argv)
    if r.returncode != 0 and "Invalid job id" not in r.stderr and "already completing" not in r.stderr:
        raise ToolFailure(f"scancel {job_id} failed: {r.stderr.strip()[:300]}")


def alive(job_ids: list[str]) -> list[str]:
    """Those of job_ids that are pending or running (squeue lists them)."""
    if not job_ids:
        return []
    r = _run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)])
    if r.returncode != 0:  # squeue refuses the whole list when one id is unknown: ask one by one
        return [j for j in job_ids if not job_state(j).ended]
    return [line.strip() for line in r.stdout.splitlines() if line.strip()]


def require_client() -> None:
    """sbatch is here and slurmctld answers (before a run makes its archive)."""
    for name in ("sbatch", "scontrol", "scancel"):
        if shutil.which(name) is None:
            _run([name])  # the error naming it
    r = _run(["scontrol", "ping"], timeout=30)
    if r.returncode != 0 or "UP" not in r.stdout:
        said = (r.stdout + r.stderr).strip().splitlines()
        raise ToolkitError(f"Slurm's controller does not answer: {said[-1] if said else 'scontrol ping failed'}",
                           hint="check SLURM_CONF and that slurmctld runs (`scontrol ping`)")
