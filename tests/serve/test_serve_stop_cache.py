"""Kept JIT caches, clean stops and the archived log, with real processes: the fake launch_server of
tests/data/fake_sglang, which handles SIGINT/SIGTERM/SIGQUIT as SGLang 0.5.17 does and writes a kernel
into TRITON_CACHE_DIR as a real start compiles one."""

from __future__ import annotations

import os
import signal
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import FAKE_SGLANG
from toolkit.serve import SGLangProcessLauncher, kept_cache, launcher_for
from toolkit.serve.jitcache import KEPT, JitCache, gpu_model
from toolkit.serve.logs import cap_line, head_and_tail
from toolkit.specs import load_spec

FAKE = str(FAKE_SGLANG)
ENV = textwrap.dedent("""\
    kind: Environment
    name: sg-cache
    engine: sglang
    base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
    sglang: {version: 0.5.17}
    servers:
      ngram: {model-path: /models/target, served-model-name: target, speculative-algorithm: NGRAM}
    """)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return not f.read().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return False


def _all_gone(pids: list[int], deadline_s: float = 30) -> bool:
    """Every pid has ended (a SIGKILL takes effect when the process is next scheduled)."""
    end = time.monotonic() + deadline_s
    while any(_alive(p) for p in pids):
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _fake(tmp: Path, name: str, cache: JitCache | None = None, **flags) -> SGLangProcessLauncher:
    args = {"model-path": "/models/target", "served-model-name": "target", "speculative-algorithm": "NGRAM", **flags}
    return SGLangProcessLauncher(args, env={"PYTHONPATH": FAKE}, log_path=tmp / f"{name}.log", jit_cache=cache)


def test_the_cache_folder_is_keyed_by_gpu_model_and_environment_hash(tmp_path):
    a = JitCache.for_env(tmp_path, "ab" * 32, "NVIDIA H200")
    assert a.folder == tmp_path / "jit" / "nvidia-h200" / ("ab" * 8)
    assert JitCache.for_env(tmp_path, "cd" * 32, "NVIDIA H200").folder != a.folder  # another environment
    assert JitCache.for_env(tmp_path, "ab" * 32, "NVIDIA H100 80GB HBM3").folder.parent.name == "nvidia-h100-80gb-hbm3"
    env = a.env()
    assert env["TRITON_CACHE_DIR"] == f"{a.folder}/triton" and env["CUDA_CACHE_PATH"] == f"{a.folder}/cuda"
    # SGLang overwrites DG_JIT_CACHE_DIR with SGLANG_DG_CACHE_DIR: both point at the same folder
    assert env["SGLANG_DG_CACHE_DIR"] == env["DG_JIT_CACHE_DIR"] == f"{a.folder}/deep_gemm"
    a.inside = "/toolkit-jit"  # in a container: the mount point
    assert a.env()["TORCHINDUCTOR_CACHE_DIR"] == "/toolkit-jit/inductor"
    assert a.prepare() is False and all((a.folder / sub).is_dir() for sub in KEPT)
    assert a.prepare() is False  # empty folders are no warm cache
    (a.folder / "triton" / "k.bin").write_bytes(b"x")
    assert a.prepare() is True and a.info()["warm"] is True


def test_gpu_model_is_read_from_nvidia_smi_for_the_visible_gpus(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"  # what `nvidia-smi --query-gpu=index,name --format=csv,noheader` prints
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200\\n1, NVIDIA H100 80GB HBM3\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert gpu_model("1") == "NVIDIA H100 80GB HBM3"
    assert gpu_model("0") == "NVIDIA H200"
    assert gpu_model(None) == "NVIDIA H100 80GB HBM3+NVIDIA H200"
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert gpu_model(None) == "no-gpu"


def test_launcher_for_points_sglang_at_the_kept_folder_unless_told_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "env.yaml").write_text(ENV)
    spec = load_spec(tmp_path / "env.yaml")
    srv = launcher_for(spec, "ngram", kind="process", env={"PYTHONPATH": FAKE})
    assert srv.jit_cache.folder.parent.parent == tmp_path / "cache" / "jit"
    assert srv.jit_cache.folder == kept_cache(spec).folder  # one folder per environment and GPU model
    # the Environment's own variables win over the kept folders
    (tmp_path / "env2.yaml").write_text(ENV + "env: {TRITON_CACHE_DIR: /mine}\n")
    mine = launcher_for(load_spec(tmp_path / "env2.yaml"), "ngram", kind="process", env={"PYTHONPATH": FAKE})
    assert mine.jit_cache.folder != srv.jit_cache.folder  # another environment hash
    mine.jit_cache.prepare()
    assert {**mine.jit_cache.env(), **mine.env}["TRITON_CACHE_DIR"] == "/mine"
    monkeypatch.setenv("TOOLKIT_JIT_CACHE", "off")
    assert launcher_for(spec, "ngram", kind="process").jit_cache is None


@pytest.mark.slow
def test_the_second_start_is_warm_and_reuses_what_the_first_compiled(tmp_path):
    cache = JitCache.for_env(tmp_path / "cache", "ef" * 32, "no-gpu")
    for i, want in enumerate((False, True)):
        srv = _fake(tmp_path, f"s{i}", cache)
        try:
            srv.wait_healthy(120)
            assert srv.info()["jit_cache"]["warm"] is want
            assert ("reusing " if want else "compiling ") + str(cache.folder / "triton") in srv.log_text()
        finally:
            srv.stop()


@pytest.mark.slow
def test_a_stop_takes_sglangs_clean_path(tmp_path):
    srv = _fake(tmp_path, "clean")
    srv.wait_healthy(120)
    children = _children(srv.proc.pid)
    assert children  # the fake's scheduler
    srv.stop()
    info = srv.stop_info()
    assert info == {"signals": ["SIGINT to the leader"], "warnings": [], "exit_code": 0}
    log = srv.log_text()
    assert "Finished server process" in log and "SIGQUIT" not in log and "crashed" not in log
    assert _all_gone(children)


@pytest.mark.slow
def test_a_server_that_ignores_stop_signals_still_ends_with_a_warning(tmp_path):
    srv = _fake(tmp_path, "stubborn", **{"ignore-stop-signals": True})
    srv.stop_timeout_s = 1.0  # the bounded wait, short for the test
    srv.wait_healthy(120)
    children = _children(srv.proc.pid)
    srv.stop()
    info = srv.stop_info()
    assert info["signals"] == ["SIGINT to the leader", "SIGTERM to the process group", "SIGKILL to the process group"]
    assert info["exit_code"] == -signal.SIGKILL
    assert len(info["warnings"]) == 2 and "did not exit within 1 s of SIGINT to the leader" in info["warnings"][0]
    assert _all_gone([srv.proc.pid, *children])


def test_the_archived_log_keeps_the_start_up_and_the_tail():
    head = ["FAKE-SGLANG-ARGV [...]", "[t] Max running requests is reset to 48 for speculative decoding. You can "
            "override this by explicitly setting --max-running-requests.", "loading", 'INFO: 127.0.0.1:1 - "GET '
            '/health HTTP/1.1" 503 Service Unavailable', 'INFO: 127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK']
    body = [f"Decode batch {i}" for i in range(1000)]
    text = "\n".join(head + body + ["Finished server process [1]"])
    kept = head_and_tail(text, tail=100).splitlines()
    assert kept[:5] == head and kept[-1] == "Finished server process [1]"
    assert kept[5] == "[toolkit: 901 log lines left out between the start-up and the last 100]" and len(kept) == 106
    assert head_and_tail("\n".join(head + body[:50]), tail=100) == "\n".join(head + body[:50])  # short: whole
    assert cap_line(text).startswith("[t] Max running requests is reset to 48")
    assert cap_line("\n".join(head[2:] + head[1:2])) is None  # printed after the start-up: not SGLang's cap line
    # a start that never answered: the whole head (up to the cap) is start-up
    assert head_and_tail("\n".join(["x"] * 300), tail=100).count("x") == 300


@pytest.mark.slow
def test_processes_the_leader_leaves_in_its_group_are_killed_with_a_warning(tmp_path):
    from toolkit.serve import ProcessLauncher

    child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('child-ready', flush=True); " \
            "time.sleep(600)"
    srv = ProcessLauncher([sys.executable, "-c", f"import subprocess, sys, time; subprocess.Popen([sys.executable, "
                           f"'-c', {child!r}]); time.sleep(600)"], log_path=tmp_path / "p.log")
    srv.start()
    deadline = time.monotonic() + 60
    while "child-ready" not in (srv.log_text() or ""):
        assert time.monotonic() < deadline, srv.log_text()
        time.sleep(0.1)
    children = _children(srv.proc.pid)
    srv.stop()
    info = srv.stop_info()
    assert info["signals"] == ["SIGTERM to the process group"] and info["exit_code"] == -signal.SIGTERM
    assert info["warnings"] == ["server exited but left processes in its group: killed"]
    assert children and _all_gone(children)
