"""Fixtures of the bench area: guidellm mock servers and the embedded transformers engine, started
once per session through the toolkit's own launchers."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from toolkit.serve import ProcessLauncher, free_port

ROOT = Path(__file__).resolve().parents[2]


def guidellm_bin() -> str | None:
    exe = Path(sys.executable).with_name("guidellm")
    return str(exe) if exe.is_file() else shutil.which("guidellm")


def mock_server(tmp: Path, *extra: str, ttft_ms: float = 20, itl_ms: float = 2, tokens: int = 32) -> ProcessLauncher:
    from tests.conftest import need

    exe = guidellm_bin()
    need(exe is not None, "guidellm is not installed (pip install -e '.[test]')")
    port = free_port()
    cmd = [exe, "mock-server", "--host", "127.0.0.1", "--port", str(port), "--ttft-ms", str(ttft_ms),
           "--itl-ms", str(itl_ms), "--output-tokens", str(tokens), *extra]
    srv = ProcessLauncher(cmd, log_path=tmp / f"mock-{port}.log", port=port)
    srv.name = "guidellm mock-server"
    srv.wait_healthy(120)
    return srv


@pytest.fixture(scope="session")
def mock(tmp_path_factory):
    srv = mock_server(tmp_path_factory.mktemp("mock"))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def local_env():
    from toolkit.spec import load_spec

    return load_spec(ROOT / "envs" / "local-cpu.yaml")


@pytest.fixture(scope="session")
def tserver(local_env):
    from toolkit.serve import launcher_for

    srv = launcher_for(local_env, "baseline")
    srv.wait_healthy(300)
    yield srv
    srv.stop()
