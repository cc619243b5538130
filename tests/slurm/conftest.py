"""A real one-node Slurm cluster on this machine, once per test session: munged (started only where none
answers), slurmctld and slurmd as root, with a slurm.conf written here (its own ports, state and spool folders
under the session's tmp). Clients find it through SLURM_CONF, set for the session. tests/run.sh installs
Debian's slurm-wlm and munge; locally a missing part skips these tests, under CI=true it fails them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import need

ROOT = Path(__file__).resolve().parents[2]
CONF = """\
ClusterName=toolkit-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName={node} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Cluster:
    conf: Path
    dir: Path
    node: str

    def squeue(self) -> list[dict]:
        """Every job slurmctld lists as pending or running: {id, name, state, reason}."""
        r = subprocess.run(["squeue", "-h", "-o", "%i|%j|%T|%r"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [dict(zip(("id", "name", "state", "reason"), line.split("|"))) for line in r.stdout.splitlines()]

    def job(self, job_id: str) -> dict:
        r = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=60)
        return dict(p.split("=", 1) for p in r.stdout.split() if "=" in p)

    def wait(self, condition, what: str, timeout: float = 240.0, every: float = 0.5):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = condition()
            if got:
                return got
            time.sleep(every)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _munge_answers() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        return cred.returncode == 0 and subprocess.run(["unmunge"], input=cred.stdout, capture_output=True,
                                                       timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_munge() -> subprocess.Popen | None:
    """munged, unless one answers already (one per machine: its socket is /run/munge)."""
    if _munge_answers():
        return None
    run_dir = Path("/run/munge")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir, "munge", "munge")
    if not Path("/etc/munge/munge.key").is_file():
        subprocess.run(["runuser", "-u", "munge", "--", "mungekey", "--create"], check=True, timeout=60)
    proc = subprocess.Popen(["runuser", "-u", "munge", "--", "munged", "--foreground", "--force"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not _munge_answers():
        need(proc.poll() is None and time.monotonic() < deadline, "munged did not start")
        time.sleep(0.3)
    return proc


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "scontrol", "squeue", "scancel"):
        need(shutil.which(tool) is not None, f"{tool} is not installed (tests/run.sh installs Debian's slurm-wlm "
                                             "and munge as root)")
    need(os.geteuid() == 0, "slurmd runs jobs as root here: the Slurm tests need root")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    node = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(CONF.format(node=node, dir=d, ctld_port=_free_port(), slurmd_port=_free_port()))
    old_conf = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    munge = _start_munge()
    daemons = [subprocess.Popen([exe, "-D", "-f", str(conf), *extra], stdout=subprocess.DEVNULL,
                                stderr=open(d / f"{Path(exe).name}.stderr", "wb"), start_new_session=True)
               for exe, extra in ((shutil.which("slurmctld"), ["-i"]), (shutil.which("slurmd"), ["-N", node]))]
    cluster = Cluster(conf, d, node)
    try:
        def idle() -> bool:
            for p in daemons:
                if p.poll() is not None:
                    log = (d / "slurmctld.log").read_text(errors="replace")[-2000:] if (d / "slurmctld.log").exists() else ""
                    need(False, f"{p.args[0]} exited with {p.returncode}: {log}")
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=60)
            return r.returncode == 0 and r.stdout.strip() in ("idle", "mix", "alloc")
        try:
            cluster.wait(idle, "the Slurm node to come up idle", timeout=90, every=1.0)
        except AssertionError as exc:
            need(False, f"{exc}; slurmd log: {(d / 'slurmd.log').read_text(errors='replace')[-1500:]}")
        yield cluster
    finally:
        subprocess.run(["scancel", "--full", "--user", "root"], capture_output=True, timeout=60)
        for p in reversed(daemons):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if munge is not None:
            munge.terminate()
        if old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_conf


def matrix(tmp: Path, name: str, *, arms=("baseline", "ngram"), slurm: str = "", target: str = "",
           cells: str = "requests: 6", concurrency: str = "[1, 2]", kind: str = "slurm") -> Path:
    """A Matrix of the quickstart's arms on the embedded engine, one workload, small cells."""
    block = f"  slurm: {{workdir: {tmp / 'jobs'}{', ' + slurm if slurm else ''}}}\n" if kind == "slurm" else ""
    path = tmp / f"{name}.yaml"
    path.write_text(f"""kind: Matrix
name: {name}
environment: {ROOT / 'envs' / 'local-cpu.yaml'}
arms: [{', '.join(arms)}]
baseline: {arms[0]}
target:
  kind: {kind}
{target}{block}workloads: [coding]
api: chat
concurrency: {concurrency}
output_len: 32
{cells}
warmup: 1
seed: 0
""")
    return path
