"""The keys of the installed transformers' GenerationConfig: what the embedded engine (`transformers serve`)
takes in a request's `generation_config`. GenerationConfig keeps any unknown keyword as an attribute
and generate() never reads it, so a misspelt key (prompt_lookup_num_tokenz) would silently run the arm
without speculation; every check of such a key goes through here (spec validation, bench tune's knobs).

    unknown_key("prompt_lookup_num_tokenz")   # -> ("... is not a generation_config key ...", "did you mean ...?")
"""

from __future__ import annotations

import difflib
from functools import lru_cache


@lru_cache(maxsize=1)
def generation_config_keys() -> frozenset[str] | None:
    """Every key GenerationConfig defines in the installed transformers; None when it is not installed."""
    try:
        from transformers import GenerationConfig
    except ImportError:
        return None
    import logging

    logging.getLogger("transformers").setLevel(logging.ERROR)  # no advice about the defaults on stderr
    return frozenset(k for k in GenerationConfig().to_dict() if not k.startswith("_") and k != "transformers_version")


def transformers_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return "?"


def unknown_key(key: str) -> tuple[str, str] | None:
    """(message, hint) when `key` is not a generation_config key of the installed transformers; None when it
    is, or when transformers is not installed here (nothing to check against)."""
    keys = generation_config_keys()
    if keys is None or key in keys:
        return None
    alt = key.replace("-", "_")
    close = [alt] if alt in keys else difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.75)
    return (f"{key!r} is not a generation_config key of transformers {transformers_version()}: generate() would "
            "ignore it", f"did you mean {close[0]!r}?" if close else
            "the keys are GenerationConfig's (https://huggingface.co/docs/transformers/main_classes/text_generation)")
