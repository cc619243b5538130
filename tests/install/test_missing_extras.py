"""A missing extra, or a tool it brings, is a one-line error that says what to install (exit 2), never an
ImportError traceback. Each case runs the real CLI with the module made unimportable (or the tool hidden)
by tests/install/blocker/sitecustomize.py, as on a machine where the extra was never installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

BLOCKER = Path(__file__).parent / "blocker"


def cli_without(*args: str, block: str = "", tools: str = "", env: dict | None = None):
    e = {"PYTHONPATH": os.pathsep.join(filter(None, [str(BLOCKER), os.environ.get("PYTHONPATH")])),
         "TOOLKIT_TEST_BLOCK": block, "TOOLKIT_TEST_NO_TOOLS": tools, **(env or {})}
    return run_cli(*args, env=e, timeout=300)


def one_line_error(r, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "ImportError" not in r.stderr and "ModuleNotFoundError" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def hosts_spec(tmp_path: Path) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("not a real key\n")
    spec = tmp_path / "hosts.yaml"
    spec.write_text(f"kind: Hosts\nname: t\nhosts:\n  gpu-01: {{address: 127.0.0.1, key: {key}}}\n")
    return spec


def test_provision_without_ansible_runner(hosts_spec: Path, tmp_path: Path) -> None:
    r = cli_without("provision", "host", str(hosts_spec), "--check", block="ansible_runner",
                    env={"TOOLKIT_RUNS_DIR": str(tmp_path / "runs")})
    one_line_error(r, "ansible_runner", "pip install 'toolkit[provision]'")
    assert not (tmp_path / "runs").exists()


def test_provision_without_ansible_playbook_on_path(hosts_spec: Path, tmp_path: Path) -> None:
    r = cli_without("provision", "host", str(hosts_spec), tools="ansible-playbook",
                    env={"TOOLKIT_RUNS_DIR": str(tmp_path / "runs")})
    one_line_error(r, "ansible-playbook on PATH", "pip install 'toolkit[provision]'")
    assert not (tmp_path / "runs").exists()


def test_build_without_the_docker_sdk() -> None:
    r = cli_without("build", "base", block="docker")
    one_line_error(r, "docker", "pip install 'toolkit[docker]'")


def test_build_with_no_docker_engine() -> None:
    r = run_cli("build", "base", env={"DOCKER_HOST": "unix:///nonexistent/toolkit-test.sock"})
    one_line_error(r, "no Docker engine answers at unix:///nonexistent/toolkit-test.sock", "start dockerd")


@pytest.mark.parametrize("module", ["torch", "transformers"])
def test_embedded_engine_without_the_local_extra(tmp_path: Path, module: str) -> None:
    r = cli_without("bench", "matrix", str(ROOT / "envs/matrices/quickstart.yaml"), "--results",
                    str(tmp_path / "results"), block=module)
    one_line_error(r, module, "the embedded CPU engine", "pip install 'toolkit[local]'")
    assert not (tmp_path / "results").exists()  # checked before any archive is made
