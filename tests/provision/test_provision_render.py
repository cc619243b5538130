"""Inventory rendering, spec errors and the playbook lint: no SSH needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, need
from toolkit.specs import load_spec
from toolkit.provision.inventory import render_inventory


def _spec(tmp_path: Path, body: dict) -> Path:
    p = tmp_path / "hosts.yaml"
    p.write_text(yaml.safe_dump({"kind": "Hosts", "name": "t", **body}, sort_keys=False))
    return p


def test_inventory_from_blackwell_spec_is_deterministic():
    spec = load_spec(ROOT / "envs/hosts/blackwell.yaml")
    one, two = render_inventory(spec), render_inventory(load_spec(ROOT / "envs/hosts/blackwell.yaml"))
    assert one.text == two.text
    inv = yaml.safe_load(one.text)["all"]
    host = inv["hosts"]["gpu-01"]
    assert host["ansible_user"] == "ubuntu" and host["ansible_port"] == 22
    assert host["ansible_ssh_private_key_file"] == str(Path("~/.ssh/id_ed25519").expanduser())
    assert host["toolkit_gpus"] == {"model": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "count": 8,
                                    "driver_branch": 580}
    assert inv["children"]["gpu"]["hosts"] == {"gpu-01": {}}
    assert inv["vars"]["cuda_version"] == "13.0"


def test_relative_key_and_quoting(tmp_path):
    p = _spec(tmp_path, {"hosts": {"a": {"address": "10.0.0.1", "key": "keys/id", "vars": {
        "note": "it's \"quoted\": {x}", "sglang_host_image": "img:1"}}}})
    inv = yaml.safe_load(render_inventory(load_spec(p)).text)["all"]
    assert inv["hosts"]["a"]["ansible_ssh_private_key_file"] == str((tmp_path / "keys/id").resolve())
    assert inv["hosts"]["a"]["note"] == "it's \"quoted\": {x}"


def test_bad_var_name_names_file_and_line(cli, tmp_path):
    p = _spec(tmp_path, {"hosts": {"a": {"address": "10.0.0.1", "vars": {"bad-name": 1}}}})
    r = cli("render", "hosts", str(p))
    assert r.returncode == 2 and f"{p}:" in r.stderr and "not a valid Ansible variable name" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_key_and_unknown_limit_are_clear_errors(cli, tmp_path):
    p = _spec(tmp_path, {"hosts": {"gpu-01": {"address": "10.0.0.1", "key": "nope/id"}}})
    r = cli("provision", "host", str(p), env={"TOOLKIT_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 2 and "SSH key" in r.stderr and "gpu-01" in r.stderr and f"{p}:" in r.stderr
    r = cli("provision", "host", str(p), "--limit", "gpu-1", env={"TOOLKIT_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 2 and "did you mean 'gpu-01'" in r.stderr
    r = cli("provision", "host", str(p), "--tags", "common,dockre", env={"TOOLKIT_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 2 and "did you mean 'docker'" in r.stderr
    assert not (tmp_path / "runs").exists()  # nothing started


def test_render_hosts_command_writes_inventory(cli, tmp_path):
    out = tmp_path / "inv.yml"
    r = cli("render", "hosts", str(ROOT / "envs/hosts/blackwell.yaml"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(out.read_text())["all"]["hosts"]["gpu-01"]["ansible_host"] == "192.0.2.10"


def test_ansible_lint_production_profile():
    lint = shutil.which("ansible-lint", path=str(Path(sys.executable).parent)) or shutil.which("ansible-lint")
    need(lint is not None, "ansible-lint is not installed (pip install -e '.[test]')")
    env = {**os.environ, "NO_COLOR": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    r = subprocess.run([lint, "--format=pep8", "playbooks/"], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Profile 'production' was required, and it passed" in r.stdout + r.stderr


def test_load_fingerprint_rejects_corrupt_file(tmp_path, monkeypatch):
    from toolkit.errors import ToolkitError
    from toolkit.provision.fingerprint import load_fingerprint

    monkeypatch.setenv("TOOLKIT_HOSTS_DIR", str(tmp_path))
    (tmp_path / "h.json").write_text("{not json")
    with pytest.raises(ToolkitError, match="not valid JSON"):
        load_fingerprint("h")
    (tmp_path / "g.json").write_text('{"host": "g"}')
    assert load_fingerprint("g").host == "g"
