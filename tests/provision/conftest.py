"""Container hosts for the provisioning tests: sshd on 127.0.0.1:PORT (host networking), a user `ops`
with passwordless sudo, reached with an SSH key made for this test session. Started once per session."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import subprocess
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import need

SSHD_DOCKERFILE = """\
FROM {base}
# A stand-in for a fresh GPU host: sshd, python3 for Ansible, sudo for `become`, no init system.
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      openssh-server python3 python3-apt sudo ca-certificates \\
 && mkdir -p /run/sshd \\
 && useradd --create-home --shell /bin/bash ops \\
 && echo 'ops ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/ops && chmod 0440 /etc/sudoers.d/ops \\
 && install -d -o ops -g ops -m 0700 /home/ops/.ssh
"""


@dataclass
class SSHHost:
    name: str
    port: int
    container: object

    def sh(self, script: str) -> tuple[int, str]:
        """Run a shell script on the host as root (docker exec) and return (exit code, output)."""
        rc, out = self.container.exec_run(["bash", "-c", script])
        return rc, out.decode(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ssh(port: int, deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError as exc:
            last = exc
        time.sleep(0.2)  # polling interval of a condition with a deadline, not a synchronisation sleep
    raise TimeoutError(f"sshd on 127.0.0.1:{port} did not answer within {deadline_s} s ({last})")


@pytest.fixture(scope="session")
def sshd_image(docker_client, base_image) -> str:
    text = SSHD_DOCKERFILE.format(base=base_image)
    base_id = docker_client.images.get(base_image).id
    tag = "toolkit/test-sshd:" + hashlib.sha256((text + base_id).encode()).hexdigest()[:12]
    try:
        docker_client.images.get(tag)
        return tag
    except Exception:  # noqa: BLE001 - not there yet: build it
        pass
    ctx = io.BytesIO()
    with tarfile.open(fileobj=ctx, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    ctx.seek(0)
    docker_client.images.build(fileobj=ctx, custom_context=True, tag=tag, network_mode="host", rm=True)
    return tag


@pytest.fixture(scope="session")
def ssh_key(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ssh")
    key = d / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "toolkit-test", "-f", str(key)], check=True)
    return key


@pytest.fixture(scope="session")
def ssh_hosts(docker_client, sshd_image, ssh_key):
    """Two container hosts, started in parallel, removed at the end of the session."""
    need(subprocess.run(["which", "ssh"], capture_output=True).returncode == 0, "the ssh client is needed")
    pub = (ssh_key.with_suffix(".pub")).read_text().strip()
    tag = uuid.uuid4().hex[:6]
    hosts = []
    try:
        for name in ("node-a", "node-b"):
            port = _free_port()
            script = (f"echo {pub!r} > /home/ops/.ssh/authorized_keys && chown ops:ops /home/ops/.ssh/authorized_keys"
                      f" && exec /usr/sbin/sshd -D -e -p {port} -o ListenAddress=127.0.0.1")
            c = docker_client.containers.run(sshd_image, ["bash", "-c", script], detach=True, network_mode="host",
                                             name=f"toolkit-test-{name}-{tag}", hostname=name,
                                             labels={"dev.toolkit.test": "provision"})
            hosts.append(SSHHost(name=name, port=port, container=c))
        for h in hosts:
            _wait_ssh(h.port)
        yield hosts
    finally:
        for h in hosts:
            try:
                h.container.remove(force=True)
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass


def write_hosts_spec(path: Path, hosts: list[SSHHost], key: Path, extra: dict | None = None,
                     host_vars: dict | None = None, extra_hosts: dict | None = None) -> Path:
    """A Hosts spec for the container hosts: GPU roles and system services off, with the reason.
    extra: top-level vars; host_vars: {host: vars}; extra_hosts: more host entries (e.g. a dead port)."""
    spec = {
        "kind": "Hosts",
        "name": "test-containers",
        "defaults": {"user": "ops", "key": str(key)},
        "hosts": {h.name: {"address": "127.0.0.1", "port": h.port, "groups": ["serving"],
                           "vars": dict((host_vars or {}).get(h.name, {}))} for h in hosts},
        "vars": {
            "toolkit_gpu_roles": False,
            "toolkit_manage_system": False,
            "toolkit_skip_reason": "container test host: no GPU, no init system",
            **(extra or {}),
        },
    }
    spec["hosts"].update(extra_hosts or {})
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def toolkit_env(tmp_path_factory) -> dict:
    """Environment for `toolkit provision`: private known_hosts, runs and fingerprints in a temp folder."""
    d = tmp_path_factory.mktemp("toolkit-home")
    return {"TOOLKIT_SSH_KNOWN_HOSTS": str(d / "known_hosts"), "TOOLKIT_RUNS_DIR": str(d / "runs"),
            "TOOLKIT_HOSTS_DIR": str(d / "hosts"), "NO_COLOR": "1", "PATH": os.environ.get("PATH", "")}
