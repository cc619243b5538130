"""launcher_for: the right launcher per engine and target, exact commands, clear errors; the dummy
model is deterministic (same bytes from the same spec)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from toolkit.errors import SpecError, ToolkitError
from toolkit.serve import (ExternalLauncher, Launcher, SGLangDockerLauncher, SGLangExternalLauncher,
                           SGLangProcessLauncher, TransformersLauncher, launcher_for)
from toolkit.serve.transformers import render_serve_args
from toolkit.specs import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_transformers_presets_and_args(local_env):
    base = launcher_for(local_env, "baseline")
    assert isinstance(base, TransformersLauncher)
    assert base.command[:4] == [sys.executable, "-m", "toolkit.serve._tserve", "serve"]
    assert "--continuous-batching" not in base.command  # per-request generation_config must be honoured
    assert render_serve_args({"continuous-batching": True, "compile": False, "log-level": "info"}) == \
        ["--continuous-batching", "--no-compile", "--log-level", "info"]
    assert local_env.model.request_params["ngram"]["generation_config"]["prompt_lookup_num_tokens"] == 8
    assert "prompt_lookup_num_tokens" not in local_env.model.request_params["baseline"]["generation_config"]


def test_unknown_preset_points_at_the_spec(local_env):
    with pytest.raises(SpecError) as exc:
        launcher_for(local_env, "eagle9")
    assert "no server preset 'eagle9'" in exc.value.message and "baseline" in exc.value.hint


def test_sglang_targets():
    env = load_spec(ROOT / "envs" / "sglang-cu13-blackwell.yaml")
    with pytest.raises(ToolkitError, match="no image"):
        launcher_for(env, "eagle3")
    d = launcher_for(env, "eagle3", image="toolkit/sglang:x", docker_url="ssh://gpu@10.0.0.5", gpus="all")
    assert isinstance(d, SGLangDockerLauncher) and d.base_url == "http://10.0.0.5:30000"
    assert d.command[:3] == ["python3", "-m", "sglang.launch_server"]
    assert d.command[d.command.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert d.env["SGLANG_ENABLE_TORCH_SYMM_MEM"] == "1"
    p = launcher_for(env, "baseline", kind="process", python="/opt/py/bin/python")
    assert isinstance(p, SGLangProcessLauncher) and p.command[:3] == ["/opt/py/bin/python", "-m", "sglang.launch_server"]
    e = launcher_for(env, "baseline", url="http://127.0.0.1:30000")
    assert isinstance(e, SGLangExternalLauncher) and e.base_url == "http://127.0.0.1:30000"
    assert e.flush_cache() is None  # a server the toolkit does not manage keeps its caches
    for launcher in (d, p, e):
        assert isinstance(launcher, Launcher)  # every method the runner calls is there


def test_every_launcher_states_the_protocol(local_env):
    """The runner calls only what Launcher declares; every launcher has all of it."""
    members = {"base_url", "model", "command", "start", "wait_healthy", "check_alive", "info", "server_info",
               "flush_cache", "stop", "log_tail", "exit_code"}
    declared = set(Launcher.__annotations__) | {k for k in vars(Launcher) if not k.startswith("_")}
    assert members <= declared
    for cls in (TransformersLauncher, ExternalLauncher, SGLangDockerLauncher, SGLangExternalLauncher,
                SGLangProcessLauncher):
        assert all(hasattr(cls, m) for m in members - {"base_url", "model", "command"}), cls
    t = launcher_for(local_env, "baseline")
    assert isinstance(t, Launcher) and t.server_info() == {} and t.flush_cache() is None


@pytest.mark.slow
def test_dummy_model_is_deterministic(tmp_path):
    from toolkit.serve.dummy import ensure_dummy_model
    from toolkit.specs.environment import DummyModel

    spec = DummyModel(hidden_size=32, intermediate_size=64, vocab_size=512, seed=7)
    a = ensure_dummy_model(spec, cache=tmp_path / "a")
    b = ensure_dummy_model(spec, cache=tmp_path / "b")
    assert a.name == b.name

    def digest(p):
        return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(p.iterdir()) if f.is_file()}

    assert digest(a) == digest(b)
    assert ensure_dummy_model(spec, cache=tmp_path / "a") == a  # cached
    other = ensure_dummy_model(spec.model_copy(update={"seed": 8}), cache=tmp_path / "a")
    assert digest(other)["model.safetensors"] != digest(a)["model.safetensors"]


def test_preset_device_replaces_the_cpu_default(tmp_path):
    from toolkit.serve.transformers import TransformersLauncher

    cpu = TransformersLauncher(tmp_path, args={})
    gpu = TransformersLauncher(tmp_path, args={"device": "cuda", "dtype": "bfloat16"})
    assert cpu.command.count("--device") == 1 and cpu.command[cpu.command.index("--device") + 1] == "cpu"
    assert gpu.command.count("--device") == 1 and gpu.command[gpu.command.index("--device") + 1] == "cuda"
