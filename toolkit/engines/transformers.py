"""What the embedded engine (`transformers serve`, engine: transformers) means by a preset: the one place
that knows it. Its arms differ by per-request `generation_config` (prompt lookup, an assistant model);
its server flags (continuous batching, device) are the same for every trial.

    meaning(env, arm)      PresetMeaning: speculative or not ("prompt lookup"), the cap, dummy weights
    FACTS.knobs            the generation_config keys the tuner may search (request parameters: no restart)
    ENGINE                 the Engine the registry returns for `engine: transformers` (toolkit/engines/base.py)
"""

from __future__ import annotations

from typing import Any

from toolkit.engines.base import Engine
from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning

PROMPT_LOOKUP = "prompt_lookup_num_tokens"
NGRAM_SIZE = "max_matching_ngram_size"
ASSISTANT = "assistant_model"
GENERATION_CONFIG = "generation_config"
# generation_config counts generate() takes that must be at least 1: 0 or less failed every request of the arm
# (`num_beams: 0` validated, and each request ended in a generation error); toolkit.specs.genconfig checks them
GENERATE_COUNTS = ("num_beams", "num_beam_groups", "num_return_sequences", "max_new_tokens", "max_length",
                   PROMPT_LOOKUP, "num_assistant_tokens")
CONTINUOUS_BATCHING = "continuous-batching"
# what a Slurm job of it adds to the server's environment: offline, as toolkit.serve.transformers.TransformersLauncher
# sets it (the weights are on the shared file system)
JOB_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
SPECULATION = "prompt lookup"  # the algorithm the archive records for a speculative arm of this engine

FACTS = EngineFacts("transformers", {k.name: k for k in (
    KnobInfo(PROMPT_LOOKUP, "request", 1, "tokens drafted per step by prompt lookup (n-gram "
             "speculation of transformers' generate)"),
    KnobInfo(NGRAM_SIZE, "request", 1, "longest n-gram prompt lookup matches (transformers "
             f"default 2); needs {PROMPT_LOOKUP}"),
)}, level="request")


def generation_config(request_params: dict | None) -> dict[str, Any]:  # data-keyed: generation_config keys
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


class TransformersEngine(Engine):
    name, title = "transformers", "the embedded engine"
    facts = FACTS
    launchers = frozenset({"process"})
    slurm_jobs = True
    embedded = True
    reads_generation_config = True
    knob_separator = "_"
    acceptance = "log"
    job_env = JOB_ENV
    # no ignore_eos: `transformers serve` (5.25) answers 422 "Unexpected fields in the request" to a key outside
    # its OpenAI params (cli/serving/utils.py _validate_request), and its generate() has no such flag
    ignore_eos = False

    def meaning(self, env: Any, arm: str) -> PresetMeaning:
        return meaning(env.servers.get(arm, {}) or {}, env.request_params.get(arm), env.model)


ENGINE = TransformersEngine()
