"""Launcher failure handling with real processes: a server that exits during start fails fast with
its log tail; a server killed mid-cell gives errored requests and a clear cell failure (no hang);
SIGTERM or SIGKILL of the toolkit never leaves the server behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import FAKE_SGLANG, mock_server
from toolkit.loadgen import CellFailed, CellLoad, run, run_cell
from toolkit.schema.records import Prompt
from toolkit.errors import ToolFailure
from toolkit.serve import ProcessLauncher, TransformersLauncher

pytestmark = pytest.mark.slow


def _gone(pid: int, deadline_s: float = 20) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:  # a zombie counts as gone
                if f.read().split(") ")[1].startswith("Z"):
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_exit_during_start_fails_fast_with_log_tail(tmp_path):
    srv = ProcessLauncher([sys.executable, "-c", "import sys; print('loading weights'); print('CUDA error: boom');"
                           " sys.exit(3)"], log_path=tmp_path / "s.log")
    t = time.monotonic()
    with pytest.raises(ToolFailure) as exc:
        srv.wait_healthy(timeout_s=300)
    assert time.monotonic() - t < 10
    assert "exited with code 3 during start-up" in exc.value.message and "CUDA error: boom" in exc.value.hint


def test_transformers_bad_flag_fails_fast(tserver, tmp_path):
    srv = TransformersLauncher(tserver.model_dir, args={"no-such-flag": 1}, log_path=tmp_path / "t.log")
    with pytest.raises(ToolFailure) as exc:
        srv.wait_healthy(timeout_s=300)
    assert "exited with code 2 during start-up" in exc.value.message and "--help" in exc.value.hint
    assert "no-such-flag" in srv.log_tail(200)


def test_server_killed_mid_cell_fails_clearly(tmp_path):
    srv = mock_server(tmp_path, ttft_ms=10, itl_ms=5, tokens=200)  # ~1 s per request
    prompts = [Prompt(id="a", domain="d", prompt="hi")]
    done = []

    def kill_after_first(rec):
        done.append(rec)
        if len(done) == 2:
            os.killpg(srv.proc.pid, signal.SIGKILL)

    t = time.monotonic()
    with pytest.raises(CellFailed) as exc:
        run(asyncio.wait_for(run_cell(srv.base_url, CellLoad(concurrency=4, requests=200, output_len=200), prompts,
                                      model="m", on_record=kill_after_first, check_alive=srv.check_alive), 120))
    assert time.monotonic() - t < 60
    assert "exited with code -9" in exc.value.message
    errored = [r for r in exc.value.records if r.error]
    assert errored and len(exc.value.records) < 200
    srv.stop()


CHILD = """
import sys, time
from toolkit.serve import ProcessLauncher
srv = ProcessLauncher([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}"],
                      log_path=__import__("pathlib").Path(sys.argv[1]), port={port})
srv.health_path = "/"
srv.wait_healthy(60)
print(srv.proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_no_orphan_when_the_toolkit_is_stopped(tmp_path, sig):
    from toolkit.serve import free_port

    code = CHILD.format(port=free_port())
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "c.log")], stdout=subprocess.PIPE, text=True)
    server_pid = int(child.stdout.readline())
    os.kill(child.pid, sig)
    child.wait(30)
    assert _gone(server_pid), f"server {server_pid} outlived the toolkit after {sig.name}"


def test_sglang_process_launcher_runs_the_preset(tmp_path):
    """A plain process where 'SGLang' is installed: the fake launch_server of tests/data/fake_sglang."""
    from toolkit.serve import SGLangProcessLauncher, free_port

    port = free_port()
    preset = {"model-path": "/models/t", "tp-size": 2, "trust-remote-code": True, "host": "127.0.0.1", "port": port}
    with SGLangProcessLauncher(preset, log_path=tmp_path / "s.log", env={"PYTHONPATH": str(FAKE_SGLANG)}) as srv:
        info = srv.info().model_dump()
        assert info["command"] == [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/t",
                                   "--tp-size", "2", "--trust-remote-code", "--host", "127.0.0.1", "--port", str(port)]
        assert info["engine_version"] == "0.5.17-fake" and info["max_running_requests"] is None
        assert srv.model == "/models/t" and srv.base_url == f"http://127.0.0.1:{port}"
        pid = srv.proc.pid
    assert _gone(pid)
