"""Runs that fail, against the real embedded engine (`transformers serve`): the status and exit code a
pipeline can trust (README "Exit codes"), the server's own error, no advice from zero data, and every
exception in a slot thread or a load-generator worker archived as failed cells with its reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.results import compact

pytestmark = pytest.mark.slow

ENV = textwrap.dedent("""\
    kind: Environment
    name: t-cpu
    engine: transformers
    model:
      dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}
    servers:
      baseline: {}
      ngram: {}
      broken: {no-such-flag: true}
      broken2: {no-such-flag: true}
    request_params:
      ngram:
        generation_config: {prompt_lookup_num_tokens: 4}
    """)


def matrix(tmp: Path, arms: str, *, workloads: str = "[coding]", concurrency: str = "[1, 2]", extra: str = "") -> Path:
    (tmp / "env.yaml").write_text(ENV)
    m = tmp / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: t
        environment: env.yaml
        arms: {arms}
        workloads: {workloads}
        concurrency: {concurrency}
        output_len: 8
        requests: 3
        warmup: 1
        """) + extra)
    return m


def test_every_arm_failing_to_start_is_a_failed_run_with_the_servers_error_and_no_advice(tmp_path: Path) -> None:
    m = matrix(tmp_path, "[broken, broken2]")
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--allow-failed-cells", timeout=600)
    assert r.returncode == 1, r.stderr[-3000:]  # --allow-failed-cells accepts failed cells, not a run without data
    assert "Traceback" not in r.stderr
    run = next((results / "t").iterdir())
    assert f"run failed (no cell succeeded: 4 of 4 cells failed): {run}" in r.stdout
    # the server's own words (transformers serve's option parser), not only its exit code
    assert "No such option '--no-such-flag'" in r.stdout and "No such option '--no-such-flag'" in r.stderr
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "failed" and summary["interrupted"] is False
    assert all("No such option" in c["reason"] for c in summary["cells"])
    d = summary["derived"]
    assert d["speedups"] == [] and d["crossovers"] == [] and d["recommended_disable_batch_threshold"] == {}
    report = (run / "report.md").read_text()
    for text in (r.stdout, report):  # no advice from zero data
        assert "Crossover" not in text and "threshold" not in text and "Speedup" not in text
    listed = json.loads(run_cli("results", "list", "--root", str(results), "--json").stdout)
    assert [x["status"] for x in listed] == ["failed"]
    verify = run_cli("results", "verify", str(run))
    assert verify.returncode == 0 and "run failed (no cell succeeded" in verify.stdout


def test_allow_failed_cells_accepts_a_partial_run(tmp_path: Path) -> None:
    m = matrix(tmp_path, "[baseline, broken]", concurrency="[1]")
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--allow-failed-cells", "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["status"] == "partial" and out["why"] == "1 of 2 cells failed" and out["exit_code"] == 0
    assert "--allow-failed-cells accepts" not in r.stderr  # the user already did


def _in_process(tmp_path: Path, m: Path):
    from toolkit.bench.matrix import run_matrix
    from toolkit.specs import load_spec

    logs: list[str] = []
    res = run_matrix(load_spec(m), results_root=tmp_path / "results", log=logs.append)
    return res, logs


def test_an_exception_in_a_cell_fails_that_cell_and_the_arm_goes_on(tmp_path: Path, monkeypatch, capfd) -> None:
    """A bug while summarising one cell (injected into the real run): that cell is archived as failed with the
    exception's type, message and traceback; the arm's other cells and the other arm still run."""
    import toolkit.loadgen.summary as metrics

    real = metrics.summarize

    def summarize(records, **kw):
        if kw["arm"] == "ngram" and kw["concurrency"] == 2:
            raise ZeroDivisionError("injected")
        return real(records, **kw)

    monkeypatch.setattr(metrics, "summarize", summarize)
    res, _ = _in_process(tmp_path, matrix(tmp_path, "[baseline, ngram]", extra="target: {kind: local, parallel: 2}\n"))
    by = {(c.arm, c.concurrency): c for c in res.cells}
    assert len(by) == 4 and res.status == "partial" and not res.interrupted
    bad = by[("ngram", 2)]
    assert bad.status == "failed" and bad.reason == "unexpected ZeroDivisionError in the runner: injected"
    assert "Traceback" in bad.log_tail and "ZeroDivisionError" in bad.log_tail
    assert all(c.status == "ok" for k, c in by.items() if k != ("ngram", 2))
    assert "Traceback" not in capfd.readouterr().err  # archived, never printed by a dying thread


def test_an_exception_escaping_an_arm_fails_its_cells_not_the_slot_thread(tmp_path: Path, monkeypatch, capfd) -> None:
    from toolkit.bench.arm import ArmRunner

    real = ArmRunner._run_cells

    def run_cells(self, cells):
        if self.arm == "baseline":
            raise KeyError("injected")
        return real(self, cells)

    monkeypatch.setattr(ArmRunner, "_run_cells", run_cells)
    res, _ = _in_process(tmp_path, matrix(tmp_path, "[baseline, ngram]"))
    by = {(c.arm, c.concurrency): c for c in res.cells}
    assert len(by) == 4 and res.status == "partial" and res.why == "2 of 4 cells failed"
    assert {by[("baseline", c)].reason for c in (1, 2)} == {"unexpected KeyError in the runner: 'injected'"}
    assert by[("ngram", 1)].status == by[("ngram", 2)].status == "ok"  # the slot went on to its next arm
    assert "Traceback" not in capfd.readouterr().err


def _workers_of(pid: int) -> list[int]:
    """pids of `python -m toolkit.loadgen.workers` processes whose parent is pid."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"toolkit.loadgen.workers" in cmd:
            out.append(int(p))
    return out


def test_a_load_worker_that_dies_fails_its_cell_with_the_reason(tmp_path: Path) -> None:
    """A load-generator worker killed during a cell: that cell fails naming the worker and its exit, the
    server is alive so the next cell runs, and the run is partial with exit 1."""
    m = matrix(tmp_path, "[baseline]", workloads="[coding, math]", concurrency="[2]",
               extra="workers: 2\n").read_text().replace("requests: 3", "requests: 100")
    (tmp_path / "m.yaml").write_text(m)
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "bench", "matrix", str(tmp_path / "m.yaml"),
                             "--results", str(results), "--json"], cwd=ROOT, env=dict(os.environ, NO_COLOR="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: list[int] = []

    def kill_one() -> None:  # the first worker seen, once its cell is under way
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and not killed:
            ws = _workers_of(proc.pid)
            if ws:
                os.kill(ws[0], signal.SIGKILL)
                killed.append(ws[0])
            time.sleep(0.05)

    t = threading.Thread(target=kill_one)
    t.start()
    stdout, stderr = proc.communicate(timeout=900)
    t.join()
    assert killed, "no load worker was seen"
    assert proc.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr
    out = json.loads(stdout)
    failed = [c for c in out["cells"] if c["status"] == "failed"]
    assert out["status"] == "partial" and len(out["cells"]) == 2 and len(failed) == 1, out["cells"]
    assert "load worker" in failed[0]["reason"] and "exited with code -9" in failed[0]["reason"], failed[0]["reason"]
    assert "server died" not in failed[0]["reason"]  # the server was fine: the other cell ran on it
