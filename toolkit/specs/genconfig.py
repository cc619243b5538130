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


def bad_value(key: str, value: object) -> tuple[str, str] | None:
    """(message, hint) when generate() cannot take `value` for `key` (a count below 1); None when it can."""
    from toolkit.engines.transformers import GENERATE_COUNTS, PROMPT_LOOKUP

    if key in GENERATE_COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        return (f"{key} {value!r}: generate() takes a whole number >= 1 here (every request of the arm would fail)",
                f"e.g. `{key}: {4 if key == PROMPT_LOOKUP else 1}`, or remove it for the default")
    return None


def refused(config: dict) -> tuple[str, str, str] | None:
    """(the key it is about, message, hint) when the installed GenerationConfig's own validate() refuses a
    request's generation_config as a whole; None when it takes it, or transformers is not installed here."""
    keys = generation_config_keys()
    if keys is None or not config or any(k not in keys for k in config):
        return None
    import warnings

    from transformers import GenerationConfig

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            GenerationConfig(**config).validate()
    except (ValueError, TypeError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        key = next((k for k in config if k in text), next(iter(config)))
        return key, f"transformers {transformers_version()} refuses it: {text[:300]}", \
            "give values generate() takes together, or remove the key for its default"
    return None
