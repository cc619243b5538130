"""What the embedded engine (`transformers serve`, engine: transformers) means by a preset: the one place
that knows it. Its arms differ by per-request `generation_config` (prompt lookup, an assistant model);
its server flags (continuous batching, device) are the same for every trial.

    meaning(env, arm)      PresetMeaning: speculative or not ("prompt lookup"), the cap, dummy weights
    FACTS.knobs            the generation_config keys the tuner may search (request parameters: no restart)
"""

from __future__ import annotations

from typing import Any

from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning

PROMPT_LOOKUP = "prompt_lookup_num_tokens"
NGRAM_SIZE = "max_matching_ngram_size"
ASSISTANT = "assistant_model"
GENERATION_CONFIG = "generation_config"
CONTINUOUS_BATCHING = "continuous-batching"
SPECULATION = "prompt lookup"  # the algorithm the archive records for a speculative arm of this engine

FACTS = EngineFacts("transformers", {k.name: k for k in (
    KnobInfo(PROMPT_LOOKUP, "request", 1, "tokens drafted per step by prompt lookup (n-gram "
             "speculation of transformers' generate)"),
    KnobInfo(NGRAM_SIZE, "request", 1, "longest n-gram prompt lookup matches (transformers "
             f"default 2); needs {PROMPT_LOOKUP}"),
)}, level="request")


def generation_config(request_params: dict | None) -> dict[str, Any]:
    """The per-request generation_config of one arm's request parameters ({} when it has none)."""
    return dict((request_params or {}).get(GENERATION_CONFIG) or {})


def running_cap(preset: dict[str, Any]) -> int | None:
    """Requests the server runs at once: without continuous batching one generate() at a time."""
    return None if preset.get(CONTINUOUS_BATCHING) else 1


def meaning(preset: dict[str, Any], request_params: dict | None, model: Any) -> PresetMeaning:
    gen = generation_config(request_params)
    speculative = bool(gen.get(PROMPT_LOOKUP) or gen.get(ASSISTANT))
    return PresetMeaning("transformers", speculative=speculative, algorithm=SPECULATION if speculative else None,
                         cap=running_cap(preset),
                         dummy_weights=model is not None and getattr(model, "dummy", None) is not None)
