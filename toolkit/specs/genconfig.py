"""The keys of the installed transformers' GenerationConfig: what the embedded engine (`transformers serve`)
takes in a request's `generation_config`. GenerationConfig keeps any unknown keyword as an attribute
and generate() never reads it, so a misspelt key (prompt_lookup_num_tokenz) would silently run the arm
without speculation; every check of such a key goes through here (spec validation, bench tune's knobs).

    unknown_key("prompt_lookup_num_tokenz")   # -> ("... is not a generation_config key ...", "did you mean ...?")

Importing transformers costs ~0.6 s of CPU, so what it answered (its keys, and what validate() said of each
whole generation_config asked) is kept in <cache>/genconfig/, one file per installed transformers (its
version and the size and time of the file that defines GenerationConfig): a spec is checked against the
same answers without importing it again. A transformers upgraded or edited in place names another file.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path

MEMO_VERSION = 1


@lru_cache(maxsize=1)
def _memo_name() -> str | None:
    """This transformers' memo file name; None when transformers' metadata is not found (nothing is kept)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("transformers")
        st = Path(dist.locate_file("transformers/generation/configuration_utils.py")).stat()
    except (PackageNotFoundError, OSError):
        return None
    ident = f"{MEMO_VERSION}|{dist.version}|{dist.locate_file('')}|{st.st_size}|{st.st_mtime_ns}"
    return f"transformers-{dist.version}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"


def _memo_path() -> Path | None:
    from toolkit.settings import cache_dir

    name = _memo_name()
    return cache_dir() / "genconfig" / name if name else None


def _memo() -> dict:  # json-edge: the memo file
    path = _memo_path()
    try:
        doc = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and isinstance(doc.get("keys"), list) else {}


def _remember(**fields) -> None:
    """Add `fields` to the memo file; a cache that cannot be written is only slower next time."""
    from toolkit.fsutil import write_json

    path = _memo_path()
    if path is None:
        return
    doc = _memo()
    for name, value in fields.items():
        doc[name] = {**doc.get(name, {}), **value} if isinstance(value, dict) else value
    try:
        write_json(path, doc)
    except OSError:
        pass


def _import_generation_config():
    import logging

    from transformers import GenerationConfig

    logging.getLogger("transformers").setLevel(logging.ERROR)  # no advice about the defaults on stderr
    return GenerationConfig


@lru_cache(maxsize=1)
def generation_config_keys() -> frozenset[str] | None:
    """Every key GenerationConfig defines in the installed transformers; None when it is not installed."""
    known = _memo().get("keys")
    if known:
        return frozenset(known)
    try:
        GenerationConfig = _import_generation_config()
    except ImportError:
        return None
    keys = frozenset(k for k in GenerationConfig().to_dict() if not k.startswith("_") and k != "transformers_version")
    _remember(keys=sorted(keys))
    return keys


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
    try:
        asked = json.dumps(config, sort_keys=True)
    except (TypeError, ValueError):
        asked = None  # a value JSON cannot hold: asked every time
    said = _memo().get("refused", {})
    if asked is not None and asked in said:
        return tuple(said[asked]) if said[asked] else None
    answer = _validate(config)
    if asked is not None:
        _remember(refused={asked: list(answer) if answer else None})
    return answer


def _validate(config: dict) -> tuple[str, str, str] | None:
    import warnings

    GenerationConfig = _import_generation_config()
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
