"""Server launchers: start, wait healthy (watching for a crash), info, stop, logs. One per engine.

    from toolkit.serve import launcher_for
    with launcher_for(env_spec, "ngram") as srv:       # the embedded CPU engine, a dummy model
        print(srv.base_url, srv.info().command_line)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolkit import engines
from toolkit.errors import ToolkitError
from toolkit.serve.base import BaseLauncher, ExternalLauncher, Launcher, ProcessLauncher, free_port
from toolkit.serve.jitcache import CONTAINER_ROOT, JitCache, gpu_model
from toolkit.serve.sglang import (SGLangDockerLauncher, SGLangExternalLauncher, SGLangProcessLauncher, flush_cache,
                                  metrics_snapshot, server_info)
from toolkit.serve.transformers import TransformersLauncher
from toolkit.serve.vllm import VLLMDockerLauncher, VLLMProcessLauncher

__all__ = ["Launcher", "BaseLauncher", "ProcessLauncher", "ExternalLauncher", "TransformersLauncher",
           "SGLangDockerLauncher", "SGLangExternalLauncher", "SGLangProcessLauncher", "VLLMDockerLauncher", "VLLMProcessLauncher", "launcher_for", "model_dir_for",
           "free_port", "server_info", "metrics_snapshot", "flush_cache", "kept_cache", "PROCESS_LAUNCHERS",
           "register_process_launcher"]


def model_dir_for(env_spec) -> Path:
    """The model directory of a transformers Environment: its `model.path`, or the dummy model (made once)."""
    env = env_spec.model
    if env.model is None:
        raise env_spec.error(("model",), "this environment has no model", hint="add `model: {dummy: {}}`")
    if env.model.path:
        return env_spec.path_of(("model", "path"), env.model.path)
    from toolkit.serve.dummy import ensure_dummy_model

    return ensure_dummy_model(env.model.dummy)


def checked_weights(env_spec, reads: set[str]) -> dict[str, str] | None:  # data-keyed: weights path
    """The Environment's pinned weights this server reads, checked here before it starts (None: none pinned).
    Pins are matched to the preset's folders as resolved paths (relative ones against the spec file); a pin the
    preset does not read is neither required nor checked."""
    from toolkit.serve import weights

    pins = env_spec.model.weights or {}
    if not pins:
        return None
    wanted = {Path(r).resolve() for r in reads}
    read = {p: sha for p, sha in pins.items()
            if env_spec.path_of(("weights", p), p, must_exist=False).resolve() in wanted}
    # resolved again with must_exist: a missing pinned folder is an error at the pin's line
    return weights.check({str(env_spec.path_of(("weights", p), p)): sha for p, sha in read.items()})


def launcher_for(env_spec, preset: str, *, kind: str | None = None, url: str | None = None,
                 image: str | None = None, docker_url: str | None = None, port: int | None = None,
                 log_path: Path | None = None, **kw: Any) -> Launcher:
    """The launcher for one arm. `env_spec` is a LoadedSpec of an Environment; `preset` one of its servers.

    kind: "external" (url), "docker" (default: the engine's CONTAINER_LAUNCHERS entry, sglang and vllm; image,
    docker_url "ssh://host", gpus, mounts, shm_size, network) or "process" (python: the engine's
    PROCESS_LAUNCHERS entry, sglang and vllm);
    transformers engines always run locally.
    """
    env = env_spec.model
    if preset not in env.servers:
        raise env_spec.error(("servers",), f"no server preset {preset!r}",
                             hint=f"presets here: {', '.join(env.servers) or '(none)'}")
    args, eng = dict(env.servers[preset]), engines.get(env.engine)
    if kind == "external" or url:
        if not url:
            raise ToolkitError("an external target needs a URL", hint="give `url: http://host:port`")
        if eng.reports_server_info:  # it says what it is (/server_info)
            return SGLangExternalLauncher(url, model=kw.get("model"))
        return ExternalLauncher(url, model=kw.get("model"))
    if eng.embedded:
        model_dir = model_dir_for(env_spec)
        launcher = TransformersLauncher(model_dir, args=args, port=port, log_path=log_path)
        launcher.pinned_weights = checked_weights(env_spec, {str(model_dir)})
        return launcher
    if kind == "process":
        factory = PROCESS_LAUNCHERS.get(eng.name)
        if factory is None:
            raise ToolkitError(f"engine {eng.name!r} has no process launcher",
                               hint=f"engines with one: {', '.join(PROCESS_LAUNCHERS)}")
        launcher = factory(env_spec, args, port=port, log_path=log_path, **kw)
        launcher.pinned_weights = checked_weights(env_spec, launcher.reads)
        return launcher
    if not eng.supports_launcher(kind or "docker") or eng.name not in CONTAINER_LAUNCHERS:
        raise ToolkitError(f"engine {eng.name!r} does not run under launcher {kind or 'docker'!r}",
                           hint="its launchers: " + ", ".join(sorted(eng.launchers))
                                + " (set the Matrix target's `launcher: process` and its `python:`)")
    if not image:
        raise ToolkitError(f"no image for environment {env.name!r}",
                           hint="build it with `toolkit build env SPEC` and pass the image from its build record")
    factory = CONTAINER_LAUNCHERS[eng.name]
    return factory(env_spec, image, args, docker_url=docker_url, port=port, log_path=log_path,
                   env={**env.env, **kw.pop("env", {})}, **kw)


def _sglang_container(env_spec, image: str, args: dict, *, docker_url: str | None, **kw: Any) -> Launcher:
    gpus = kw.get("gpus")
    # a remote engine's folders are on its host, not here: its caches stay in the container (not kept)
    cache = None if docker_url else kept_cache(env_spec, ",".join(gpus) if isinstance(gpus, list) else None,
                                               inside=CONTAINER_ROOT)
    return SGLangDockerLauncher(image, args, docker_url=docker_url, jit_cache=cache, **kw)


def _vllm_container(env_spec, image: str, args: dict, **kw: Any) -> Launcher:
    return VLLMDockerLauncher(image, args, **kw)


# the container launcher of each engine whose image the toolkit builds (target `launcher: docker`), by the
# engine's name: factory(env_spec, image, preset args, docker_url=, port=, log_path=, env=, gpus=, ...)
CONTAINER_LAUNCHERS: dict[str, Any] = {"sglang": _sglang_container, "vllm": _vllm_container}


def _sglang_process(env_spec, args: dict, *, port: int | None, log_path: Path | None, **kw: Any) -> Launcher:
    env = env_spec.model
    extra = kw.get("env", {})
    cache = kept_cache(env_spec, (extra.get("CUDA_VISIBLE_DEVICES") or env.env.get("CUDA_VISIBLE_DEVICES")))
    return SGLangProcessLauncher(args, python=kw.get("python"), port=port, log_path=log_path,
                                 env={**env.env, **extra}, dummy_models=env.dummy_models, jit_cache=cache)


def _vllm_process(env_spec, args: dict, *, port: int | None, log_path: Path | None, **kw: Any) -> Launcher:
    return VLLMProcessLauncher(args, python=kw.get("python"), port=port, log_path=log_path,
                               env={**env_spec.model.env, **kw.get("env", {})})


# the process launcher of each engine that runs as a process the toolkit starts (target `launcher: process`),
# by the engine's name: factory(env_spec, preset args, port=, log_path=, **launcher kwargs) -> a Launcher
# with `.reads` (the model folders it reads, for the pinned weights)
PROCESS_LAUNCHERS: dict[str, Any] = {"sglang": _sglang_process, "vllm": _vllm_process}


def register_process_launcher(engine: str, factory) -> None:
    """Another engine's process launcher (an engine registered with toolkit.engines.register)."""
    PROCESS_LAUNCHERS[engine] = factory


def kept_cache(env_spec, visible: str | None = None, inside: str | None = None) -> JitCache | None:
    """The kept compile/JIT cache folder of an SGLang environment on this machine's GPU model
    (toolkit.serve.jitcache); None where TOOLKIT_JIT_CACHE=off."""
    from toolkit.render import template_version
    from toolkit.settings import settings
    from toolkit.specs import spec_hash

    s = settings()
    if not s.jit_cache:
        return None
    cache = JitCache.for_env(s.cache_dir, spec_hash(env_spec, template_version()), gpu_model(visible))
    cache.inside = inside
    return cache
