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

from tests.helpers import FAKE_SGLANG, ROOT
from toolkit.serve import SGLangProcessLauncher, kept_cache, launcher_for
from toolkit.serve.jitcache import KEPT, JitCache, gpu_model
from toolkit.serve.logs import cap_line, head_and_tail, startup_phases
from toolkit.serve.sglang import SHUTDOWN_DONE
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
    assert a.prepare() is True and a.info().warm is True
    # what a start compiled: kernel files added since prepare(), the bytecode aside
    (a.folder / "bytecode" / "x").mkdir(parents=True)
    (a.folder / "bytecode" / "x" / "m.cpython-312.pyc").write_bytes(b"x")
    assert a.compiled_since_prepare() == 0 and "compiled" in a.info().model_fields_set and a.info().compiled == 0
    (a.folder / "deep_gemm" / "kernel.cubin").write_bytes(b"x")
    (a.folder / "triton" / "h" / "k.json").parent.mkdir()
    (a.folder / "triton" / "h" / "k.json").write_text("{}")
    assert a.compiled_since_prepare() == 2 and a.info().compiled == 2
    assert JitCache.for_env(tmp_path, "ef" * 32, "x").compiled_since_prepare() is None  # never prepared


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
            assert srv.info().jit_cache.warm is want
            assert ("reusing " if want else "compiling ") + str(cache.folder / "triton") in srv.log_text()
        finally:
            srv.stop()


def test_bytecode_is_kept_only_for_a_server_that_would_write_none(tmp_path):
    a = JitCache.for_env(tmp_path, "ab" * 32, "NVIDIA H200")
    keep = {"PYTHONPYCACHEPREFIX": f"{a.folder}/bytecode", "PYTHONDONTWRITEBYTECODE": ""}
    assert a.bytecode_env({"PATH": "/bin"}, {}) == {} and "bytecode" not in a.info().model_fields_set  # Python writes its own
    assert a.bytecode_env({"PYTHONDONTWRITEBYTECODE": ""}, {}) == {}  # empty is unset, for Python too
    assert a.bytecode_env({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/p"}, {}) == {}  # one of its own
    assert a.bytecode_env({"PYTHONDONTWRITEBYTECODE": "1"}, {"PYTHONDONTWRITEBYTECODE": "1"}) == {}  # asked for
    assert a.bytecode_env({"PYTHONDONTWRITEBYTECODE": "1"}, {"PYTHONPYCACHEPREFIX": "/mine"}) == {}
    assert a.bytecode_env({"PYTHONDONTWRITEBYTECODE": "1"}, {"PYTHONPATH": "/x"}) == keep
    assert a.info().bytecode == f"{a.folder}/bytecode"
    a.inside = "/toolkit-jit"
    assert a.bytecode_env({"PYTHONDONTWRITEBYTECODE": "x"}, {})["PYTHONPYCACHEPREFIX"] == "/toolkit-jit/bytecode"


@pytest.mark.slow
def test_a_server_that_inherits_no_bytecode_writes_it_once_into_the_kept_folder(tmp_path, monkeypatch):
    """PYTHONDONTWRITEBYTECODE from the controller: the first start compiles into <folder>/bytecode (not into
    the site), the second reads what the first wrote; without the variable the folder is not used."""
    cache = JitCache.for_env(tmp_path / "cache", "ef" * 32, "no-gpu")
    pyc = cache.folder / "bytecode" / Path(FAKE).relative_to("/") / "sglang" / \
        f"__init__.{sys.implementation.cache_tag}.pyc"
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    stamps = []
    for i in range(2):
        srv = _fake(tmp_path, f"b{i}", cache)
        try:
            srv.wait_healthy(120)
            assert srv.info().jit_cache.bytecode == str(cache.folder / "bytecode")
            assert pyc.is_file(), sorted(str(p) for p in (cache.folder / "bytecode").rglob("*.pyc"))[:5]
            stamps.append(pyc.stat().st_mtime_ns)
        finally:
            srv.stop()
    assert stamps[0] == stamps[1]  # read again, not written again
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    other = JitCache.for_env(tmp_path / "cache2", "ef" * 32, "no-gpu")
    srv = _fake(tmp_path, "b2", other)
    try:
        srv.wait_healthy(120)
        assert "bytecode" not in srv.info().jit_cache.model_fields_set and not (other.folder / "bytecode").exists()
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
    # uvicorn waits for a background task and offers a force quit: the second SIGINT takes it
    assert info.signals == ["SIGINT to the leader", "SIGINT to the leader again (uvicorn's force quit)"]
    assert info.warnings == [] and info.exit_code == 0
    assert 0 < info.leader_exit_s <= info.group_empty_s
    log = srv.log_text()
    assert "Finished server process" in log and "SIGQUIT" not in log and "crashed" not in log
    assert "(CTRL+C to force quit)" in log and "Application shutdown complete" not in log  # skipped by force_exit
    assert _all_gone(children)


@pytest.mark.slow
def test_the_leader_is_killed_once_its_own_shutdown_is_done(tmp_path):
    """On the H200 the main process spent 2.2 s leaving the interpreter after launch_server's shutdown (the
    stop's whole excess over 2 s): the fake's --exit-s holds its exit the same way (an atexit handler). The
    stop kills the leader alone SHUTDOWN_DONE.grace_s after the log says the shutdown was done: no warning,
    nothing of the group left. Without that line (another engine, or SGLang changing it) the exit is waited
    out as before."""
    srv = _fake(tmp_path, "slow-exit", **{"exit-s": 30.0})
    srv.wait_healthy(120)
    children = _children(srv.proc.pid)
    srv.stop()
    info = srv.stop_info()
    assert info.signals == ["SIGINT to the leader", "SIGINT to the leader again (uvicorn's force quit)",
                            f"SIGKILL to the leader, 0.5 s after {SHUTDOWN_DONE.what}"], info
    assert info.warnings == [] and info.exit_code == -signal.SIGKILL
    assert info.group_empty_s < 10 and _all_gone(children)
    assert f"include_parent=False, pid={srv.proc.pid}" in srv.log_text()
    patient = _fake(tmp_path, "slow-exit-2", **{"exit-s": 2.0})
    patient.shutdown_done = None
    patient.wait_healthy(120)
    patient.stop()
    info = patient.stop_info()
    assert info.exit_code == 0 and info.leader_exit_s >= 2.0 and "SIGKILL" not in " ".join(info.signals)


@pytest.mark.slow
def test_the_force_quit_cuts_uvicorns_wait_short(tmp_path):
    """The fake's background task holds uvicorn's shutdown HOLD_S: with the force quit the stop ends well
    before; without it (a launcher that names none) the stop waits the task out."""
    hold = 30.0
    srv = _fake(tmp_path, "long", **{"background-task-s": hold})
    srv.wait_healthy(120)
    srv.stop()
    quick = srv.stop_info()
    assert quick.signals[-1] == "SIGINT to the leader again (uvicorn's force quit)" and not quick.warnings
    assert quick.group_empty_s < hold and quick.leader_exit_s <= quick.group_empty_s
    slow = _fake(tmp_path, "patient", **{"background-task-s": 3.0})
    slow.force_quit = None
    slow.wait_healthy(120)
    slow.stop()
    info = slow.stop_info()
    assert info.signals == ["SIGINT to the leader"] and not info.warnings and info.exit_code == 0
    assert info.leader_exit_s >= 3.0  # the task was waited for, then the lifespan shutdown ran
    assert "Application shutdown complete" in slow.log_text()


@pytest.mark.slow
def test_no_second_signal_when_uvicorn_does_not_ask_for_it(tmp_path):
    srv = _fake(tmp_path, "idle", **{"background-task-s": 0})
    srv.wait_healthy(120)
    # an old line asking for a force quit, written before the stop began, does not count
    with open(srv.log_path, "a") as f:
        f.write("INFO:     Waiting for connections to close. (CTRL+C to force quit)\n")
    srv.stop()
    info = srv.stop_info()
    assert info.signals == ["SIGINT to the leader"] and info.exit_code == 0 and not info.warnings


@pytest.mark.slow
def test_a_server_that_ignores_stop_signals_still_ends_with_a_warning(tmp_path):
    srv = _fake(tmp_path, "stubborn", **{"ignore-stop-signals": True})
    srv.stop_timeout_s = 1.0  # the bounded wait, short for the test
    srv.wait_healthy(120)
    children = _children(srv.proc.pid)
    srv.stop()
    info = srv.stop_info()
    assert info.signals == ["SIGINT to the leader", "SIGTERM to the process group", "SIGKILL to the process group"]
    assert info.exit_code == -signal.SIGKILL
    assert len(info.warnings) == 2 and "did not exit within 1 s of SIGINT to the leader" in info.warnings[0]
    assert info.leader_exit_s >= 2.0 and info.leader_exit_s <= info.group_empty_s  # after SIGKILL
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


def test_tracebacks_a_force_quit_repeats_are_folded_so_the_tail_keeps_the_run():
    # as 0.5.17 logged it on the H200 (tune rung 1, t01): every cancelled abort task prints the same traceback
    trace = ["Traceback (most recent call last):", '  File "/tmp/site-tune/sglang/srt/managers/tokenizer_manager.py"'
             ", line 2137, in abort_request", "    await asyncio.sleep(2)", "asyncio.exceptions.CancelledError"]
    head = ["[2026-12-04 21:20:39] The server is fired up and ready to roll!"]
    run = [f"[2026-12-04 21:20:4{i}] Decode batch, #running-req: 8" for i in range(5)]
    stop = ["[2026-12-04 21:20:52] INFO:     Shutting down",
            "[2026-12-04 21:20:52] INFO:     Waiting for background tasks to complete. (CTRL+C to force quit)"]
    errors = [line for i in range(70) for line in (f"[2026-12-04 21:20:5{i % 3}] ERROR:    Exception in ASGI "
                                                   "application", *trace)]
    end = ["[2026-12-04 21:20:52] kill_process_tree called: parent_pid=1340, include_parent=False, pid=1340"]
    kept = head_and_tail("\n".join(head + run + stop + errors + end), tail=40).splitlines()
    assert kept == head + run + stop + errors[:5] + [
        "[toolkit: the 5-line block above came 69 more time(s), left out]"] + end  # the run's lines are kept
    # blocks that differ are all kept, and a log without stamps is left as it was
    other = errors[:5] + ["[2026-12-04 21:20:53] ERROR:    Exception in ASGI application", *trace[:-1], "KeyError"]
    assert head_and_tail("\n".join(head + other), tail=40).splitlines() == head + other
    plain = ["x"] * 10 + ["Traceback (most recent call last):", "y"] * 3
    assert head_and_tail("\n".join(plain), tail=400).splitlines() == plain


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
    assert info.signals == ["SIGTERM to the process group"] and info.exit_code == -signal.SIGTERM
    assert info.warnings == ["server exited but left processes in its group: killed"]
    assert children and _all_gone(children)


def _local(stamp: str) -> float:
    """Epoch seconds of a log stamp read as this machine's local time (as the server's host wrote it)."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))


def test_startup_phases_are_read_from_sglangs_own_log():
    # the head of a warm start of SGLang 0.5.17 on the H200 (results/sglang-h200-noise/20261204T145230Z-150555,
    # logs/baseline__l1.log, the CUDA-graph capture's progress lines cut); it began at 14:58:45.6
    head = (ROOT / "tests" / "data" / "sglang" / "startup_head.log").read_text()
    started = _local("2026-12-04 14:58:45") + 0.6
    phases = startup_phases(head, started, startup_s=51.0)
    assert phases == {"first_line": 18.9, "server_args": 21.9, "scheduler": 41.9, "memory_pool": 43.9, "ready": 49.9}
    assert list(phases) == ["first_line", "server_args", "scheduler", "memory_pool", "ready"]
    # the same marks in a log read against another clock (an hour off: another time zone): not this start's
    assert startup_phases(head, started + 3600, startup_s=51.0) is None
    assert startup_phases(head, started - 3600, startup_s=51.0) is None
    # a log without the marks (another engine): none
    assert startup_phases("INFO: loading model\nINFO: Uvicorn running on http://127.0.0.1:8000", started) is None
    # a start cut short keeps the marks it reached
    cut = head.split("[2026-12-04 14:59:27] Init torch")[0]
    assert startup_phases(cut, started) == {"first_line": 18.9, "server_args": 21.9}
