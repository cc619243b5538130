"""Engine knowledge, in one home: one `Engine` per serving engine (base.py), SGLang (sglang.py) and the
embedded `transformers serve` engine (transformers.py) and vLLM (vllm.py, its flags in vllm_flags.py), looked up by name. spec, render, image, serve,
slurm, bench and tune ask the Engine rather than comparing the engine's name or reading flags themselves.

    eng = get("sglang")                 # Engine; an unknown name: ToolkitError with a did-you-mean
    eng.supports_launcher("process"), eng.builds_image, eng.reports_server_info, eng.acceptance ...
    m = preset_meaning(env, "ngram")    # PresetMeaning: speculative, algorithm, cap (48 implied by SGLang
                                        # with speculation on and max-running-requests unset), dummy weights
    engine_facts("sglang").knobs        # the tunable knobs; .level: "server" (a launch per value) or "request"
    register(engine)                    # another engine (a test's fake one)

It sits on a floor of its own below the spec (tests/test_import_cycles.py) and imports nothing of the
toolkit above its own types and errors; an Environment is read by its attributes (engine, servers,
request_params, model).
"""

from __future__ import annotations

from typing import Any

from toolkit.engines import sglang, transformers, vllm
from toolkit.engines.base import Engine
from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning
from toolkit.registry import Registry

ENGINES: Registry[Engine] = Registry("engine", "engines",
                                    {e.name: e for e in (sglang.ENGINE, transformers.ENGINE, vllm.ENGINE)})
# the engines shipped with the toolkit (the Environment's schema lists them)
BUILTIN: tuple[str, ...] = ENGINES.builtin

__all__ = ["BUILTIN", "Engine", "EngineFacts", "KnobInfo", "PresetMeaning", "engine_facts", "get", "lookup",
           "names", "preset_meaning", "register", "unregister"]


def register(engine: Engine) -> Engine:
    """Make `engine` known by its name (replacing one of that name); returns it."""
    return ENGINES.register(engine.name, engine)


unregister, names = ENGINES.unregister, ENGINES.names


def lookup(name: str | None) -> Engine | None:
    """The engine of that name, or None (an archive may name an engine this toolkit does not know)."""
    return ENGINES.lookup(name)


get = ENGINES.get


def engine_facts(engine: str) -> EngineFacts:
    return get(engine).facts


def preset_meaning(env: Any, arm: str) -> PresetMeaning:
    """What preset `arm` of Environment `env` means to its engine (an unknown arm: a plain preset)."""
    return get(env.engine).meaning(env, arm)
