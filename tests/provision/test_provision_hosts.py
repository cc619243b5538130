"""`toolkit provision host` over real SSH against container hosts, with real Ansible.

Order matters only for speed: the check-mode test runs first on pristine hosts (it must change nothing,
which is verified on the hosts), then a real run, then the idempotency run, then failure cases."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.provision.conftest import write_hosts_spec

pytestmark = pytest.mark.slow

# What a real run writes on the hosts (looked at with docker exec, not through Ansible).
SNAPSHOT = ("find /etc /opt /usr/local /var/cache -xdev -printf '%p %m %s %T@\\n' 2>/dev/null | sort | sha256sum; "
            "dpkg-query -W | sha256sum")


def _provision(cli, env, spec, *args):
    r = cli("provision", "host", str(spec), "--json", *args, env=env, timeout=420)
    assert r.stdout.strip(), f"no JSON on stdout (rc {r.returncode}):\n{r.stderr[-3000:]}"
    return r, json.loads(r.stdout)


def test_check_mode_with_gpu_roles_changes_nothing(cli, toolkit_env, ssh_hosts, ssh_key, tmp_path):
    """--check runs every role, GPU roles included, and leaves the hosts exactly as they were."""
    spec = write_hosts_spec(tmp_path / "hosts.yaml", ssh_hosts, ssh_key, extra={"toolkit_gpu_roles": True})
    before = {h.name: h.sh(SNAPSHOT) for h in ssh_hosts}
    r = cli("provision", "host", str(spec), "--check", env=toolkit_env, timeout=420)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "check mode: nothing was changed" in r.stdout
    # The GPU roles ran in check mode; what they could not evaluate is reported, with the reason.
    # ... and shows the diff of what it would change.
    assert "/opt/models: state: absent -> directory" in r.stderr and "+blacklist nouveau" in r.stderr
    names = ", ".join(h.name for h in ssh_hosts)
    assert f"nvidia_driver on {names}: install nvidia-driver-pinning-580 nvidia-open" in r.stdout
    assert "why: check mode: the CUDA repository is not configured yet" in r.stdout
    assert f"cuda_toolkit on {names}: install cuda-toolkit-13-0" in r.stdout
    assert f"nvidia_container_toolkit on {names}: install nvidia-container-toolkit=1.18.0-1" in r.stdout
    for h in ssh_hosts:
        assert h.sh(SNAPSHOT) == before[h.name], f"--check changed {h.name}"
        rc, _ = h.sh("test -e /etc/docker/daemon.json || test -e /opt/models || test -e /etc/modprobe.d/blacklist-nouveau.conf")
        assert rc != 0, f"--check wrote files on {h.name}"


def test_provision_in_parallel_then_idempotent(cli, toolkit_env, ssh_hosts, ssh_key, tmp_path, monkeypatch):
    spec = write_hosts_spec(tmp_path / "hosts.yaml", ssh_hosts, ssh_key)
    r, first = _provision(cli, toolkit_env, spec)
    assert r.returncode == 0 and first["ok"], r.stderr[-3000:]
    assert set(first["hosts"]) == {h.name for h in ssh_hosts}
    for name, recap in first["hosts"].items():
        assert recap["changed"] > 0 and recap["failed"] == 0 and recap["unreachable"] == 0, (name, recap)
    # Every switched-off part is reported per host with its reason, never silently.
    skipped = {(s["host"], s["role"]) for s in first["skips"]}
    for h in ssh_hosts:
        for role in ("nvidia_driver", "cuda_toolkit", "nvidia_container_toolkit", "docker", "common"):
            assert (h.name, role) in skipped
    assert all("container test host" in s["reason"] for s in first["skips"] if s["role"] != "sglang_host")

    for h in ssh_hosts:  # look on the host itself
        rc, out = h.sh("cat /etc/docker/daemon.json; stat -c '%U %a' /opt/models /var/cache/sglang/huggingface; "
                       "cat /etc/security/limits.d/90-toolkit.conf /etc/sysctl.d/90-toolkit.conf; command -v jq numactl")
        assert rc == 0, out
        daemon = json.loads(out[: out.index("}\n}") + 3])
        assert daemon["default-ulimits"]["memlock"]["Hard"] == -1 and "runtimes" not in daemon
        assert "root 755" in out and "memlock unlimited" in out and "vm.max_map_count = 1048576" in out
        assert "/usr/bin/jq" in out

    # Host fingerprints on the controller, read through the function `toolkit bench` uses.
    monkeypatch.setenv("TOOLKIT_HOSTS_DIR", toolkit_env["TOOLKIT_HOSTS_DIR"])
    from toolkit.provision.fingerprint import load_fingerprint

    for h in ssh_hosts:
        fp = load_fingerprint(h.name)
        assert fp is not None and fp.host == h.name
        assert fp.os.startswith("Debian 12") and fp.hostname == h.name and fp.memory_bytes > 2**30
        assert fp.cpu_count >= 1 and fp.kernel == os.uname().release  # containers share this kernel
        assert fp.gpu is None and fp.docker is None and fp.docker_error == "docker not found"
        assert first["fingerprints"][h.name] == fp.path
    assert load_fingerprint("never-provisioned") is None

    r, second = _provision(cli, toolkit_env, spec)
    assert r.returncode == 0 and second["ok"], r.stderr[-3000:]
    assert {n: rec["changed"] for n, rec in second["hosts"].items()} == {h.name: 0 for h in ssh_hosts}


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_unreachable_and_failing_hosts_are_named_while_others_go_on(cli, toolkit_env, ssh_hosts, ssh_key, tmp_path):
    a, b = ssh_hosts[:2]
    spec = write_hosts_spec(tmp_path / "hosts.yaml", ssh_hosts, ssh_key,
                            host_vars={b.name: {"common_packages": ["toolkit-no-such-package"]}},
                            extra_hosts={"ghost": {"address": "127.0.0.1", "port": _dead_port()}})
    secret = "hf_toolkitTestSecret0123456789"
    env = {**toolkit_env, "HF_TOKEN": secret}
    r, result = _provision(cli, env, spec, "--tags", "common,facts")
    assert r.returncode == 1, r.stderr
    # Named on stderr, as a person reads it: host, task, message; no traceback.
    assert "UNREACHABLE ghost" in r.stderr
    assert f"FAILED {b.name}: task [common : Install base packages]" in r.stderr
    assert "toolkit-no-such-package" in r.stderr and "Traceback" not in r.stderr
    # The other host went on to the end.
    status = {h: rec["status"] for h, rec in result["hosts"].items()}
    assert status == {a.name: status[a.name], b.name: "failed", "ghost": "unreachable"}
    assert status[a.name] in ("ok", "changed") and result["hosts"][a.name]["ok"] > 3
    assert {(f["host"], f["unreachable"]) for f in result["failures"]} == {(b.name, False), ("ghost", True)}

    assert a.name in result["fingerprints"] and b.name not in result["fingerprints"]

    # The run's artifacts are kept, without secrets.
    run_dir = result["run_dir"]
    files = [p for p in Path(run_dir).rglob("*") if p.is_file()]
    assert any(p.name == "command" for p in files) and any(p.parent.name == "job_events" for p in files)
    key_text = ssh_key.read_text().strip().splitlines()[1]
    for p in files:
        text = p.read_text(errors="replace")
        assert secret not in text, f"secret left in {p}"
        assert key_text not in text, f"private key content in {p}"
    command = json.loads(next(p for p in files if p.name == "command").read_text())
    assert command["env"]["HF_TOKEN"] == "***"
