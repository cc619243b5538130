"""The valid range of each sampling value a request may carry, in one place: what `toolkit validate` and the run
refuse at the spec's line before any request is sent (issue 43: `top_p: 2.0` passed, because transformers'
GenerationConfig takes it, and every request of the arm then sampled from a nonsense distribution or failed).

Two places hold sampling values: a preset's `request_params` (the OpenAI-style body the engine's server
reads) and, for the embedded engine, its `generation_config` (transformers' generate()). The ranges are the
servers' own (SGLang's and vLLM's SamplingParams.verify, OpenAI's API reference, transformers' logits
warpers); top_k differs: a body's top_k turns top-k off with the engine's `top_k_off` values (SGLang: -1;
vLLM: -1 or 0), generate()'s with 0.

    bad_sampling("top_p", 2.0)                     # -> ("top_p 2.0 is outside its valid range (0, 1]", hint)
    bad_sampling("top_k", 0, top_k_off=(-1,))      # -> ("top_k 0 ...: -1 (off) or a whole number >= 1", hint)
"""

from __future__ import annotations

import math
from typing import Callable

# name -> (is the value valid, the valid range in words)
RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "temperature": (lambda v: v >= 0, ">= 0 (0: greedy)"),
    "top_p": (lambda v: 0 < v <= 1, "(0, 1] (1: off)"),
    "min_p": (lambda v: 0 <= v <= 1, "[0, 1] (0: off)"),
    "typical_p": (lambda v: 0 < v <= 1, "(0, 1] (1: off)"),
    "repetition_penalty": (lambda v: v > 0, "> 0 (1: off)"),
    "frequency_penalty": (lambda v: -2 <= v <= 2, "[-2, 2] (0: off)"),
    "presence_penalty": (lambda v: -2 <= v <= 2, "[-2, 2] (0: off)"),
}
GENERATE_TOP_K_OFF = (0,)  # transformers' generate(): top_k 0 (or None) is no top-k filtering


def bad_sampling(key: str, value: object, top_k_off: tuple[int, ...] = GENERATE_TOP_K_OFF) -> tuple[str, str] | None:
    """(message, hint) when `value` is outside `key`'s valid range (a sampling key this module knows); None when
    it is inside, or the key is not one of them. `top_k_off`: the top_k values that turn top-k sampling off."""
    if value is None:  # `key: null` drops the key from the request (docs/loadgen.md)
        return None
    if key == "top_k":
        if isinstance(value, bool) or not isinstance(value, int) or (value not in top_k_off and value < 1):
            off = " or ".join(str(v) for v in top_k_off)
            return (f"top_k {value!r} is outside its valid range: {off} (off) or a whole number >= 1",
                    f"e.g. `top_k: 20`, or `top_k: {top_k_off[0]}` (or remove it) for no top-k filtering")
        return None
    if key not in RANGES:
        return None
    ok, text = RANGES[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
        return (f"{key} {value!r} is outside its valid range {text}",
                f"give a number in {text.split(' (')[0]}, or remove `{key}` for the engine's default")
    return None


__all__ = ["GENERATE_TOP_K_OFF", "RANGES", "bad_sampling"]
