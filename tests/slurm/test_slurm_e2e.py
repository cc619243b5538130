"""The quickstart's arms (embedded CPU engine) as Slurm jobs on the real one-node cluster of conftest.slurm:
a whole matrix that verifies and compares with a local run, two arms as two jobs at once, a job that fails to
start, a job cancelled mid-cell, a time limit hit, and Ctrl-C (with a job still pending) leaving no job in
squeue, which --resume then completes by submitting only the missing arm; and after `kill -9` of the toolkit,
the job ends itself once its heartbeat stops, or --resume cancels it first."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.slurm.conftest import matrix
from toolkit.bench.matrix import run_matrix
from toolkit.results.archive import open_archive
from toolkit.specs import load_spec
from toolkit.results import compact

pytestmark = pytest.mark.slow


def _ours(cluster, name: str) -> list[dict]:
    return [j for j in cluster.squeue() if j["name"].startswith(f"tk-{name}-")]


def _launches(run: Path) -> dict:
    return json.loads(compact.read_text(run / "summary.json"))["derived"]["launches"]


def _start(spec: Path, results: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ, NO_COLOR="1", **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "toolkit.cli", "bench", "matrix", str(spec), "--results",
                             str(results), *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_whole_matrix_verifies_and_diffs_with_a_local_run(slurm, tmp_path):
    spec = matrix(tmp_path, "slurm-whole")
    result = run_matrix(load_spec(spec), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "complete", result.why
    assert not _ours(slurm, "slurm-whole"), "a job outlived the run"
    verify = run_cli("results", "verify", str(result.path))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    launches = _launches(result.path)
    jobs = {arm: runs[0]["slurm"] for arm, runs in launches.items()}
    assert set(jobs) == {"baseline", "ngram"} and jobs["baseline"]["job_id"] != jobs["ngram"]["job_id"]
    manifest = open_archive(result.path).manifest
    assert manifest.slurm.loadgen == "job-step"  # the default: no network hop between host and node measured
    assert manifest.slots[0].target.loadgen == "job-step"
    listed = {j.arm: j for j in manifest.slurm.jobs}
    assert len(manifest.slurm.jobs) == 2 and set(listed) == {"baseline", "ngram"}
    for arm, job in jobs.items():
        assert job["node"] == slurm.node
        assert job["state"].startswith("CANCELLED")  # ended by the toolkit's scancel after its last cell
        script = (result.path / job["script"]).read_text()
        assert f"--job-name=tk-slurm-whole-{arm}" in script and "NCCL_NVLS_ENABLE=0" in script
        assert manifest.slurm.scripts[arm] == script
        # the manifest names the job Slurm knows: its id, name and node (scontrol keeps ended jobs MinJobAge)
        m = listed[arm]
        assert (m.job_id, m.node, m.state) == (job["job_id"], slurm.node, job["state"])
        known = slurm.job(m.job_id)
        assert (known["JobId"], known["JobName"], known["NodeList"]) == (m.job_id, f"tk-slurm-whole-{arm}", m.node)
        # every cell's load generator ran as a step of that job
        cells = {c.key for c in result.cells if c.arm == arm}
        assert set(m.steps) == cells and job["steps"] == m.steps
        assert all(step.split(".")[0] == m.job_id and step.split(".")[1].isdigit() for step in m.steps.values())
        assert len(set(m.steps.values())) == len(cells)
    shown = run_cli("results", "show", str(result.path))
    assert shown.returncode == 0, shown.stderr
    assert "Slurm jobs" in shown.stdout and "Load generator: job-step" in shown.stdout
    assert all(j.job_id in shown.stdout for j in manifest.slurm.jobs) and slurm.node in shown.stdout
    # the archived scripts are the ones `toolkit render slurm` prints
    rendered = run_cli("render", "slurm", str(spec), "-o", str(tmp_path / "rendered"))
    assert rendered.returncode == 0, rendered.stderr
    assert (tmp_path / "rendered" / "tk-slurm-whole-baseline.sbatch").read_text() == \
        (result.path / "slurm" / "baseline.sbatch").read_text()
    # the same matrix on this machine: `results diff` matches the arms by name
    local = matrix(tmp_path, "slurm-whole-local", kind="local")
    here = run_matrix(load_spec(local), results_root=tmp_path / "results", log=lambda _: None)
    assert here.status == "complete", here.why
    diff = run_cli("results", "diff", str(here.path), str(result.path))
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "baseline" in diff.stdout and "ngram" in diff.stdout


def test_loadgen_on_the_submitting_host(slurm, tmp_path):
    spec = matrix(tmp_path, "slurm-submit-host", arms=("baseline",), slurm="loadgen: submit-host",
                  concurrency="[1]")
    result = run_matrix(load_spec(spec), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "complete", result.why
    manifest = open_archive(result.path).manifest
    assert manifest.slurm.loadgen == "submit-host" and manifest.slots[0].target.loadgen == "submit-host"
    [job] = manifest.slurm.jobs
    assert job.arm == "baseline" and job.node == slurm.node and job.steps == {}  # no step: the load came from here
    assert slurm.job(job.job_id)["JobName"] == "tk-slurm-submit-host-baseline"
    assert result.cells[0].n_requests == 6 and not _ours(slurm, "slurm-submit-host")


def test_two_arms_run_as_two_jobs_at_once(slurm, tmp_path):
    spec = matrix(tmp_path, "slurm-pair", slurm="jobs: 2")
    result = run_matrix(load_spec(spec), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "complete", result.why
    windows = result.derived.timing.arms
    a, b = windows["baseline"], windows["ngram"]
    assert a.start < b.end and b.start < a.end, "the two arms' jobs did not run at the same time"
    # both CPU jobs on the one node: the run says their figures include each other's load
    overlap = [c for c in result.derived.methodology if c.check == "arms-overlapped-on-shared-hardware"]
    assert overlap and slurm.node in overlap[0].message


def test_a_job_that_fails_to_start_names_its_log_tail(slurm, tmp_path):
    spec = matrix(tmp_path, "slurm-broken", arms=("baseline",), target="  python: /nonexistent/python3\n")
    result = run_matrix(load_spec(spec), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "failed"
    cell = result.cells[0]
    assert "Slurm job" in cell.reason and "FAILED" in cell.reason and "start-up" in cell.reason
    assert "/nonexistent/python3" in (cell.log_tail or "")
    job = _launches(result.path)["baseline"][0]["slurm"]
    assert job["state"].startswith("FAILED") and not _ours(slurm, "slurm-broken")


def test_a_job_cancelled_mid_cell_fails_its_cells_and_the_rest_completes(slurm, tmp_path):
    # each cell lasts 8 s: ample for the scancel below (polled every 0.5 s) to land mid-cell, and the ngram
    # arm's cell after it is not longer than it has to be
    spec = matrix(tmp_path, "slurm-scancel", cells="duration_s: 8", concurrency="[1]")
    proc = _start(spec, tmp_path / "results")
    try:
        def serving():  # the baseline job's server has answered a request of the first cell
            for f in (tmp_path / "jobs").glob("tk-slurm-scancel-baseline-*.out"):
                if "request done" in f.read_text(errors="replace"):
                    return f.name.rsplit("-", 1)[1].removesuffix(".out")
            return None
        job_id = slurm.wait(serving, "the baseline job to serve a request")
        subprocess.run(["scancel", job_id], check=True, timeout=60)
        out, _ = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 1, out
    run = Path(open_archive(next((tmp_path / "results" / "slurm-scancel").iterdir())).path)
    cells = {c.arm: c for c in open_archive(run).cells}
    assert cells["baseline"].status == "failed" and "CANCELLED" in cells["baseline"].reason
    assert cells["ngram"].status == "ok"
    assert not _ours(slurm, "slurm-scancel")


def test_a_time_limit_hit_fails_the_cell_with_timeout(slurm, tmp_path):
    spec = matrix(tmp_path, "slurm-timeout", arms=("baseline",), slurm="time_limit: '1'",
                  cells="duration_s: 300", concurrency="[1]")
    result = run_matrix(load_spec(spec), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "failed"
    assert "TIMEOUT" in result.cells[0].reason, result.cells[0].reason
    assert not _ours(slurm, "slurm-timeout")


def test_ctrl_c_leaves_no_job_and_resume_submits_only_what_is_missing(slurm, tmp_path):
    spec = matrix(tmp_path, "slurm-interrupt")
    proc = _start(spec, tmp_path / "results")
    blocker = None
    try:
        # once the baseline job runs, a job that wants the whole node queues behind it, so the ngram job
        # that follows waits in PENDING: Ctrl-C lands on a run with a job queued
        slurm.wait(lambda: list((tmp_path / "jobs").glob("tk-slurm-interrupt-baseline-*.endpoint")),
                   "the baseline job to start")
        blocker = subprocess.run(["sbatch", "--parsable", "--exclusive", "-J", "blocker", "-o", "/dev/null",
                                  "--wrap", "sleep 600"], capture_output=True, text=True, check=True,
                                 timeout=60).stdout.strip()
        slurm.wait(lambda: [j for j in _ours(slurm, "slurm-interrupt")
                            if j["name"].endswith("-ngram") and j["state"] == "PENDING"], "the ngram job to queue")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
        if blocker:
            subprocess.run(["scancel", blocker], timeout=60)
    assert proc.returncode == 130, out
    assert not _ours(slurm, "slurm-interrupt"), "Ctrl-C left a job in squeue"
    run = next((tmp_path / "results" / "slurm-interrupt").iterdir())
    assert {c.arm for c in open_archive(run).cells} == {"baseline"}
    resumed = run_cli("bench", "matrix", str(spec), "--results", str(tmp_path / "results"), "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    submitted = [j.arm for j in open_archive(run).manifest.slurm.jobs]
    # baseline's one job; ngram's cancelled while it queued, and the one the resume submitted (baseline: none)
    assert sorted(submitted) == ["baseline", "ngram", "ngram"]
    cells = open_archive(run).cells
    assert len(cells) == 4 and {c.arm for c in cells} == {"baseline", "ngram"} and all(c.status == "ok" for c in cells)
    assert not _ours(slurm, "slurm-interrupt")


def test_kill_9_the_job_ends_itself_or_resume_cancels_it(slurm, tmp_path):
    # the toolkit is killed as soon as the job's server is up (polled every 0.5 s), long before its cell of
    # 8 s (after a warm-up request) could end; the last resume runs that one cell to the end
    spec = matrix(tmp_path, "slurm-kill", arms=("baseline",), cells="duration_s: 8", concurrency="[1]")
    jobs = tmp_path / "jobs"

    def running_job(after: set[str]) -> str | None:
        for f in jobs.glob("tk-slurm-kill-baseline-*.endpoint"):
            job_id = f.name.rsplit("-", 1)[1].removesuffix(".endpoint")
            if job_id not in after:
                return job_id
        return None

    # a toolkit that dies with SIGKILL cancels nothing: its job notices the heartbeat stop and ends itself
    proc = _start(spec, tmp_path / "results", env={"TOOLKIT_SLURM_ORPHAN_S": "10"})
    first = slurm.wait(lambda: running_job(set()), "the first job to start")
    proc.kill()
    proc.wait(60)
    assert [j for j in _ours(slurm, "slurm-kill") if j["id"] == first], "the job ended before its heartbeat stopped"
    slurm.wait(lambda: not _ours(slurm, "slurm-kill"), "the orphaned job to end itself", timeout=180)
    log = next(jobs.glob(f"tk-slurm-kill-baseline-{first}.out")).read_text()
    assert "no heartbeat from the toolkit that submitted this job" in log
    # killed again (default heartbeat timeout, so the job still runs): --resume cancels it before it submits
    run = next((tmp_path / "results" / "slurm-kill").iterdir())
    proc = _start(spec, tmp_path / "results", "--resume", str(run))
    second = slurm.wait(lambda: running_job({first}), "the resumed run's job to start")
    proc.kill()
    proc.wait(60)
    assert [j for j in _ours(slurm, "slurm-kill") if j["id"] == second]
    resumed = run_cli("bench", "matrix", str(spec), "--results", str(tmp_path / "results"), "--resume", str(run))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"cancelled Slurm job {second}, left running by the run being resumed" in resumed.stdout + resumed.stderr
    assert not _ours(slurm, "slurm-kill")


def test_vllm_arms_as_slurm_jobs(slurm, tmp_path):
    """An `engine: vllm` Matrix on the cluster (the fake vLLM of tests/data/fake_vllm as the job's server,
    launcher process): each arm's job runs the engine's own command (Engine.server_command), and the ngram
    arm's acceptance is read from the job's vLLM /metrics counters, as on a local target."""
    from tests.serve.test_serve_vllm import ENV, FAKE_ENV

    (tmp_path / "env.yaml").write_text(ENV)
    target = json.dumps({"kind": "slurm", "launcher": "process", "python": sys.executable, "env": FAKE_ENV,
                         "slurm": {"workdir": str(tmp_path / "jobs")}})
    spec = tmp_path / "vs.yaml"
    spec.write_text(f"kind: Matrix\nname: slurm-vllm\nenvironment: env.yaml\narms: [baseline, ngram]\n"
                    f"target: {target}\nworkloads: [coding]\napi: chat\nconcurrency: [1]\noutput_len: 12\n"
                    "requests: 6\nwarmup: 1\nseed: 0\n")
    result = run_matrix(load_spec(spec), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "complete", result.why
    manifest = open_archive(result.path).manifest
    scripts = manifest.slurm.scripts
    assert f"exec {sys.executable} -m vllm.entrypoints.cli.main serve /models/target" in scripts["ngram"]
    assert "--speculative-config" in scripts["ngram"] and "--speculative-config" not in scripts["baseline"]
    summary = json.loads(compact.read_text(result.path / "summary.json"))
    acc = {c["arm"]: (c["metrics"].get("accept_length") or {}).get("mean") for c in summary["cells"]}
    assert acc["ngram"] and acc["ngram"] > 1 and acc["baseline"] is None, acc
    assert not _ours(slurm, "slurm-vllm")
