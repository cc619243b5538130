"""Secrets never land in an archive: values under secret-looking keys, secret command-line flags,
KEY=value pairs and well-known token shapes are replaced by `***` before anything is written."""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
SECRET_KEY = re.compile(r"(token$|secret|passw(or)?d|passwd|api[-_]?key|apikey|credential|private[-_]?key|"
                        r"(^|[-_])auth(orization)?$|access[-_]?key|session[-_]?key|cookie)", re.I)
TOKEN_SHAPES = re.compile(r"\b(hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
                          r"AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,})\b")
INLINE = re.compile(r"(?P<k>[A-Za-z0-9_.-]*(token|secret|passw(or)?d|api[-_]?key|apikey|credential))"
                    r"(?P<sep>=|:\s*)(?P<v>'[^'\n]*'|\"[^\"\n]*\"|[^\s,;&\"')]+)", re.I)
FLAG_SPACE = re.compile(r"(?P<k>--[A-Za-z0-9-]*(token|secret|password|api-key|apikey|credential)[A-Za-z0-9-]*)"
                        r"(?P<sep>\s+)(?P<v>[^-\s]\S*)", re.I)
BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.I)
PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.DOTALL)


def is_secret_key(key: str) -> bool:
    # "tokens" counts (input_tokens, output_tokens, max_tokens) are not secrets
    k = str(key).lower()
    if k.endswith("_env"):
        return False  # the *name* of a variable that holds a secret (api_key_env: OPENAI_API_KEY)
    if re.fullmatch(r"(bos|eos|pad|unk|sep|cls|mask|start|end|image|audio|video)_token", k):
        return False  # a tokenizer's special tokens
    if k.endswith("tokens") or k.endswith("_tokens_per_s") or k in {"tokenizer", "tokenizer_id", "tokenizer_path",
                                                                   "tokens_source", "skip_tokenizer_init"}:
        return False
    return bool(SECRET_KEY.search(k))


def scrub_text(text: str) -> str:
    text = PRIVATE_KEY.sub(MASK, text)
    text = TOKEN_SHAPES.sub(MASK, text)
    text = BEARER.sub(lambda m: m.group(1) + MASK, text)
    text = FLAG_SPACE.sub(lambda m: m.group("k") + m.group("sep") + MASK, text)
    return INLINE.sub(lambda m: m.group("k") + m.group("sep") + MASK, text)


def _scrub_argv(argv: list) -> list:
    out, mask_next = [], False
    for tok in argv:
        if mask_next and isinstance(tok, str) and not tok.startswith("--"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        if isinstance(tok, str) and tok.startswith("-"):
            flag, eq, _ = tok.partition("=")
            if is_secret_key(flag.lstrip("-")):
                if eq:
                    out.append(f"{flag}={MASK}")
                else:
                    out.append(tok)
                    mask_next = True
                continue
        out.append(scrub(tok))
    return out


def scrub(value: Any) -> Any:
    """A copy of value with secrets masked (dicts, lists, argv lists and strings)."""
    if isinstance(value, dict):
        return {k: (MASK if is_secret_key(k) and v not in (None, "", False) and not isinstance(v, (dict, list))
                    else scrub(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _scrub_argv(list(value))
    if isinstance(value, str):
        return scrub_text(value)
    return value
