"""Engine knowledge, in one home: what a preset means to SGLang (sglang.py) and to the embedded
`transformers serve` engine (transformers.py). spec, image, serve, bench and tune ask here rather than
reading flags themselves.

    m = preset_meaning(env, "ngram")    # PresetMeaning: speculative, algorithm, cap (48 implied by SGLang
                                        # with speculation on and max-running-requests unset), dummy weights
    engine_facts("sglang").knobs        # the tunable knobs; .level: "server" (a launch per value) or "request"

It sits on a floor of its own below the spec (tests/test_import_cycles.py) and imports nothing of the
toolkit above its own types; an Environment is read by its attributes (engine, servers, request_params,
model).
"""

from __future__ import annotations

from typing import Any

from toolkit.engines import sglang, transformers
from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning

ENGINES: dict[str, EngineFacts] = {"sglang": sglang.FACTS, "transformers": transformers.FACTS}

__all__ = ["ENGINES", "EngineFacts", "KnobInfo", "PresetMeaning", "engine_facts", "preset_meaning"]


def engine_facts(engine: str) -> EngineFacts:
    return ENGINES[engine]


def preset_meaning(env: Any, arm: str) -> PresetMeaning:
    """What preset `arm` of Environment `env` means to its engine (an unknown arm: a plain preset)."""
    preset = env.servers.get(arm, {}) or {}
    if env.engine == "sglang":
        return sglang.meaning(preset)
    return transformers.meaning(preset, env.request_params.get(arm), env.model)
