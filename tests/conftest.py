"""Shared fixtures. Real parts (dockerd, the debootstrap base image, sshd hosts, engines, the guidellm mock
server) start once per session. Locally a part that cannot start skips its tests with the reason; under CI=true it fails."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI") == "true"

# A suite started in the background by a non-interactive shell (`bash tests/run.sh &`, nohup) inherits SIGINT
# ignored (POSIX), and so would every process it starts: Python then installs no KeyboardInterrupt, and the
# tests that press Ctrl-C would test nothing. They are about a user's terminal, where Ctrl-C interrupts:
# restore that here, and through exec (a caught signal is reset to the default) in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# -- two test processes (tests/run.sh: pytest -n 2 --dist loadgroup --no-loadscope-reorder, pytest-xdist)
# Each worker runs whole groups. A module is one group (its module-scoped fixtures are made once); the modules
# whose tests use one machine-wide real part share that part's group, so one worker owns it: the Docker engine
# (image builds and prunes, containers, sshd hosts) and the one-node Slurm cluster (one munged, one node name).
# Groups are handed out heaviest first (real parts, then modules with slow tests, then the rest in file order), so
# the many quick modules fill in at the end instead of one long module running alone after everything else.
# (xdist's own xdist_group marks do nothing on pytest 9, which keeps node ids elsewhere: the scheduler below
# groups by these names instead.)
SHARED_PARTS = {"docker_client": "docker", "slurm": "slurm"}  # a fixture (direct or inherited) -> its group
PART_MODULES = {
    "tests/image/test_build_base.py": "docker",
    "tests/image/test_build_env_docker.py": "docker",
    "tests/provision/test_provision_hosts.py": "docker",
    "tests/serve/test_serve_sglang_docker.py": "docker",
    "tests/serve/test_serve_vllm.py": "docker",
    "tests/slurm/test_slurm_e2e.py": "slurm",
}


def group_of(nodeid: str) -> str:
    module = nodeid.split("::")[0]
    return PART_MODULES.get(module, module)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:  # a module that starts a shared part without its group would race the other worker for it
        module = item.nodeid.split("::")[0]
        for fixture, part in SHARED_PARTS.items():
            if fixture in item.fixturenames and PART_MODULES.get(module) != part:
                raise pytest.UsageError(f"{item.nodeid} uses the fixture {fixture}: add {module!r}: {part!r} to "
                                        "PART_MODULES in tests/conftest.py, so that one test process owns it")
    if not getattr(config.option, "loadgroup", False):  # what an xdist worker of --dist loadgroup is told
        return
    slow = {group_of(i.nodeid) for i in items if i.get_closest_marker("slow")}
    rank = {g: 0 if g in SHARED_PARTS.values() else 1 if g in slow else 2 for g in map(group_of, (i.nodeid for i in items))}
    items.sort(key=lambda i: rank[group_of(i.nodeid)])  # stable: file order within a rank


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is in the test extra; without it the suite runs in one process
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class GroupScheduling(LoadScopeScheduling):
        """--dist loadgroup with the groups of group_of: a worker gets whole groups, in collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config, log):
        return GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def need(condition: bool, reason: str) -> None:
    """Skip locally, fail under CI=true: CI must never pass by skipping a real part."""
    if not condition:
        if IN_CI:
            pytest.fail(f"required part unavailable under CI=true: {reason}")
        pytest.skip(reason)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600,
            input: str | None = None) -> subprocess.CompletedProcess:
    """Run the real `toolkit` console entry point as a user would."""
    e = dict(os.environ)
    e.setdefault("NO_COLOR", "1")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], cwd=cwd or ROOT, env=e,
                          capture_output=True, text=True, timeout=timeout, input=input)


@pytest.fixture(scope="session")
def docker_client():
    try:
        import docker

        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no engine
        need(False, f"no Docker engine answers ({exc}); tests/run.sh starts one as root")
    return client


@pytest.fixture(scope="session")
def base_image(docker_client) -> str:
    """Tag of the local debootstrap base image (toolkit/base:bookworm), made once and then cached.

    Needs root and debootstrap (tests/run.sh installs it); build test envs and sshd hosts FROM it."""
    from toolkit.docker_api import local_image_id
    from toolkit.image.base import DEFAULT_NAME, ensure_base_image

    if local_image_id(docker_client, DEFAULT_NAME) is None:
        need(have("debootstrap") and os.geteuid() == 0, "debootstrap as root is needed for the base image")
    ensure_base_image(docker_client, DEFAULT_NAME)
    return DEFAULT_NAME


@pytest.fixture
def cli():
    return run_cli


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


# -- servers the bench, serve and tune areas share, started once per session through the toolkit's launchers

@pytest.fixture(scope="session")
def mock(tmp_path_factory):
    """guidellm's mock server (tests/helpers.py: mock_server)."""
    from tests.helpers import mock_server

    srv = mock_server(tmp_path_factory.mktemp("mock"))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def local_env():
    from toolkit.specs import load_spec

    return load_spec(ROOT / "envs" / "local-cpu.yaml")


@pytest.fixture(scope="session")
def tserver(local_env):
    """The embedded transformers engine serving envs/local-cpu.yaml's baseline."""
    from toolkit.serve import launcher_for

    srv = launcher_for(local_env, "baseline")
    srv.wait_healthy(300)
    yield srv
    srv.stop()
