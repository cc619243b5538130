"""Preflight against the real SGLang 0.5.23 source (the pinned wheel, fetched once into the user cache).

Every failing case runs with DOCKER_HOST pointing at nothing: the error it shows must be the preflight's,
which proves no Docker call happened before it.
"""

from __future__ import annotations

import json

import pytest
from buildutil import EAGLE, ROOT, SM120_PATCH, THRESHOLD_PATCH, line_of, write_env

NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent/toolkit-test-docker.sock"}


def build(cli, spec, *extra):
    return cli("build", "env", str(spec), *extra, env=NO_DOCKER)


@pytest.mark.parametrize("mode", ["static", "auto"])
def test_blackwell_spec_passes_check_against_real_0523(cli, mode):
    r = build(cli, ROOT / "envs" / "sglang-cu13-blackwell.yaml", "--check", "--json", "--flags", mode)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    pf = data["preflight"]
    assert pf["sglang_version"] == "0.5.23"
    assert [p["name"] for p in pf["patches"]] == [SM120_PATCH.name, THRESHOLD_PATCH.name]
    assert pf["flag_count"] > 500
    assert "--speculative-disable-batch-threshold" in pf["presets"]["eagle3-dynamic"]
    assert data["cache_hit"] is False and "record" not in data


def test_syntax_error_patch_names_file_line_and_compiler_message(cli, tmp_path):
    text = THRESHOLD_PATCH.read_text()
    broken = text.replace('+        "_handle_disable_batch_threshold",\n', '+        "_handle_disable_batch_threshold"\n', 1)
    assert broken != text
    spec = write_env(tmp_path, {"threshold.patch": broken})
    r = build(cli, spec, "--check")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "sglang/srt/arg_groups/speculative_hook.py:" in r.stderr
    assert "forgot a comma" in r.stderr
    bad_line = line_of(tmp_path / "threshold.patch", '+        "_handle_disable_batch_threshold"')
    assert f"{tmp_path / 'threshold.patch'}:{bad_line}:" in r.stderr, r.stderr
    assert "no Docker engine" not in r.stderr


def test_stale_context_patch_names_patch_file_and_hunk(cli, tmp_path):
    text = THRESHOLD_PATCH.read_text()
    stale = text.replace("\n     if cfg.speculative_adaptive:\n", "\n     if cfg.speculative_adaptive_v0:\n", 1)
    assert stale != text
    spec = write_env(tmp_path, {"stale.patch": stale})
    r = build(cli, spec, "--check")
    assert r.returncode == 2, r.stdout + r.stderr
    hunk_line = line_of(tmp_path / "stale.patch", "@@ -258,")
    assert f"stale.patch:{hunk_line}:" in r.stderr
    assert "of sglang/srt/arg_groups/speculative_hook.py" in r.stderr and "does not apply" in r.stderr
    assert "no Docker engine" not in r.stderr


def test_package_layout_patch_applies_like_git_layout(cli, tmp_path):
    pkg = THRESHOLD_PATCH.read_text().replace(" a/python/sglang/", " a/sglang/").replace(" b/python/sglang/", " b/sglang/")
    spec = write_env(tmp_path, {"pkg.patch": pkg})
    r = build(cli, spec, "--check", "--json", "--flags", "static")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["preflight"]["patches"][0]["layout"] == "package"


def test_patch_order_matters_second_copy_is_rejected(cli, tmp_path):
    text = THRESHOLD_PATCH.read_text()
    spec = write_env(tmp_path, {"a.patch": text, "b.patch": text + "\n"})
    r = build(cli, spec, "--check")
    assert r.returncode == 2
    assert "b.patch" in r.stderr and ("already carries" in r.stderr or "does not apply" in r.stderr)


@pytest.mark.parametrize("key,value,expect,hint", [
    ("speculative-disable-batch-treshold", 8, "unknown SGLang server flag --speculative-disable-batch-treshold",
     "did you mean 'speculative-disable-batch-threshold'"),
    ("cuda-graph-max-bs", 64, "removed in SGLang 0.5.23", "cuda-graph-max-bs-decode"),
    ("tp", 8, "names must be exact", "tp-size"),
    ("tp-size", "eight", "--tp-size takes an int, got 'eight'", None),
    ("speculative-algorithm", True, "--speculative-algorithm needs a value", None),
    ("trust-remote-code", "yes", "on/off flag", None),
    ("flashinfer-allreduce-fusion-backend", "autoo", "is not one of", "did you mean 'auto'"),
])
def test_bad_preset_argument_fails_at_its_spec_line(cli, tmp_path, key, value, expect, hint):
    servers = {"eagle3-dynamic": dict(EAGLE), "bad": {"model-path": "/m", key: value}}
    spec = write_env(tmp_path, {"threshold.patch": THRESHOLD_PATCH.read_text()}, servers=servers)
    r = build(cli, spec, "--check", "--flags", "static")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{spec}:{line_of(spec, key + ':', after='  bad:')}:" in r.stderr, r.stderr
    assert expect in r.stderr
    if hint:
        assert hint in r.stderr


def test_patched_flag_is_unknown_without_its_patch(cli, tmp_path):
    """The threshold flag exists only because of the patch: drop the patch and preflight rejects it."""
    spec = write_env(tmp_path, {}, servers={"eagle3-dynamic": dict(EAGLE)})
    r = build(cli, spec, "--check", "--flags", "static")
    assert r.returncode == 2
    assert "unknown SGLang server flag --speculative-disable-batch-threshold" in r.stderr


def test_speculative_without_max_running_requests_warns(cli, tmp_path):
    preset = {k: v for k, v in EAGLE.items() if k != "max-running-requests"}
    spec = write_env(tmp_path, {"threshold.patch": THRESHOLD_PATCH.read_text()}, servers={"e": preset})
    r = build(cli, spec, "--check", "--json", "--flags", "static")
    assert r.returncode == 0, r.stderr
    warnings = json.loads(r.stdout)["plan"]["warnings"]
    assert any("caps it at 48" in w for w in warnings)


def test_sha256_mismatch_is_rejected_before_fetching(cli, tmp_path):
    spec = write_env(tmp_path, {"threshold.patch": THRESHOLD_PATCH.read_text()})
    (tmp_path / "threshold.patch").write_text(THRESHOLD_PATCH.read_text() + "# one more line\n")
    r = build(cli, spec, "--check")
    assert r.returncode == 2
    assert "sha256 of threshold.patch is" in r.stderr


@pytest.mark.parametrize("spec", ["envs/sglang-cu13-blackwell.yaml", "envs/test/sglang-cpu-test.yaml"])
def test_rendered_dockerfiles_are_hadolint_clean(cli, tmp_path, spec):
    import shutil
    import sys
    from pathlib import Path

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    r = cli("render", "env", spec, "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    import subprocess

    lint = subprocess.run([hadolint, str(tmp_path / "Dockerfile")], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    text = (tmp_path / "Dockerfile").read_text()
    assert "find_spec(" in text and "patch --forward --batch -p2 --fuzz=0 " in text  # as strict as preflight


def test_build_env_help_teaches(cli):
    r = cli("build", "env", "--help")
    assert r.returncode == 0
    for word in ("--check", "--no-cache", "--push", "--json", "--flags", "preflight", "cache hit"):
        assert word in r.stdout, word


def test_git_source_is_cloned_at_its_tag_and_patched(cli, tmp_path):
    """source: git, through a real `git clone` of a local repository laid out like SGLang's (python/sglang/...)."""
    import shutil
    import subprocess

    import yaml

    from toolkit.image.source import fetch_sglang
    from toolkit.specs.environment import SGLang

    pristine = fetch_sglang(SGLang(version="0.5.23"), "3.11", log=lambda m: None) / "sglang"
    repo = tmp_path / "sglang-repo"
    pkg = repo / "python" / "sglang"
    for rel in ("srt/arg_groups", "srt/server_args.py", "srt/speculative/adaptive_runtime_state.py"):
        src, dst = pristine / rel, pkg / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "sglang subset"], check=True)
    subprocess.run([*git, "tag", "v0.5.23"], check=True)
    spec = write_env(tmp_path / "spec", {"threshold.patch": THRESHOLD_PATCH.read_text()})
    data = yaml.safe_load(spec.read_text())
    data["sglang"].update(source="git", git_url=f"file://{repo}")
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    r = cli("build", "env", str(spec), "--check", "--json", "--flags", "static",
            env={**NO_DOCKER, "TOOLKIT_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    pf = json.loads(r.stdout)["preflight"]
    assert pf["source"] == "git" and pf["source_path"].endswith("/python")
    assert "-v0.5.23/" in pf["source_path"] + "/"
    assert "--speculative-disable-batch-threshold" in pf["presets"]["eagle3-dynamic"]
