"""The image of an `engine: vllm` Environment (no Docker needed): the Dockerfile rendered from the engine's own
template (templates/engines/vllm/Dockerfile.j2) installs the spec's torch and vLLM pins in order on its CUDA base,
its spec hash covers that template and SGLang's does not (a vLLM template change keeps every SGLang image's
cache), `build env --check` prints the plan without Docker, and a vLLM spec without a base image is refused at
its line when an image is asked for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import toolkit.render
import toolkit.resources
from tests.conftest import run_cli
from toolkit.render import render_env, template_version
from toolkit.specs import load_spec, spec_hash

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "envs" / "vllm-0.24.0-pair.yaml"
SGLANG = ROOT / "envs" / "sglang-0.5.17-pair.yaml"


def test_the_dockerfile_installs_the_pins_in_order() -> None:
    text = render_env(load_spec(VLLM)).dockerfile
    lines = text.splitlines()
    assert "FROM nvidia/cuda:13.0.1-devel-ubuntu24.04" in lines
    torch = lines.index("RUN python -m pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cu130 "
                        "torch==2.11.0")
    assert lines.index("RUN python -m pip install --no-cache-dir vllm==0.24.0") == torch + 1  # vLLM's pin met first
    assert "python3.12 -m venv /opt/venv" in text
    for label in ('LABEL "dev.toolkit.vllm-version"="0.24.0"', 'LABEL "org.opencontainers.image.version"="0.24.0"',
                  'LABEL "dev.toolkit.cuda"="13.0"', 'ENV HF_HUB_OFFLINE="1"', "EXPOSE 8000"):
        assert label in lines, label
    assert "sglang" not in text.lower() and "patch" not in text.lower()
    h = spec_hash(load_spec(VLLM), template_version())
    assert f'LABEL "dev.toolkit.spec-hash"="{h}"' in lines


def test_an_engines_own_template_is_in_its_hash_alone(tmp_path: Path, monkeypatch) -> None:
    before = {p: spec_hash(load_spec(p), template_version()) for p in (VLLM, SGLANG)}
    version = template_version()
    copy = tmp_path / "templates"
    shutil.copytree(toolkit.resources.data_dir("templates"), copy)
    (copy / "engines" / "vllm" / "Dockerfile.j2").write_text(
        (copy / "engines" / "vllm" / "Dockerfile.j2").read_text() + "# one more line\n")
    monkeypatch.setattr(toolkit.resources, "data_dir", lambda name: copy)
    monkeypatch.setattr(toolkit.render, "data_dir", lambda name: copy)
    assert template_version() == version  # the shared templates' version: SGLang's cache keys hold
    assert spec_hash(load_spec(SGLANG), template_version()) == before[SGLANG]
    assert spec_hash(load_spec(VLLM), template_version()) != before[VLLM]
    assert spec_hash(load_spec(VLLM)) == spec_hash(load_spec(VLLM))  # without a template version: none hashed


def test_build_env_check_prints_the_plan_without_docker() -> None:
    r = run_cli("build", "env", str(VLLM), "--check")
    assert r.returncode == 0, r.stderr
    assert "vllm       0.24.0; flags checked when the spec loaded, against vllm 0.24.0's own parser" in r.stdout
    assert "presets    ok: baseline, eagle3, ngram" in r.stdout
    h = spec_hash(load_spec(VLLM), template_version())
    assert f"plan       build toolkit/vllm-0.24.0-pair:{h[:12]} FROM nvidia/cuda:13.0.1-devel-ubuntu24.04" in r.stdout
    out = json.loads(run_cli("build", "env", str(VLLM), "--check", "--json").stdout)
    assert out["plan"]["engine"] == "vllm" and out["plan"]["engine_version"] == "0.24.0"
    assert out["preflight"]["flag_mode"] == "load" and out["preflight"]["presets"]["eagle3"][:5] == [
        "python", "-m", "vllm.entrypoints.cli.main", "serve", "/tmp/toolkit-pair/target"]


def test_an_image_needs_a_base(tmp_path: Path) -> None:
    """A vLLM Environment runs as a process without an image; asking for one without `base_image` is an
    error at the engine's line, exit 2."""
    env = tmp_path / "env.yaml"
    env.write_text("\n".join(ln for ln in VLLM.read_text().splitlines() if not ln.startswith(("base_image", "cuda:"))))
    assert run_cli("validate", str(env)).returncode == 0
    r = run_cli("render", "env", str(env), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "is built on `base_image`, and this environment names none" in r.stderr, r.stderr
    assert f"{env}:" in r.stderr and "Traceback" not in r.stderr
