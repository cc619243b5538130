"""Secrets never land in a kept file: one scrubber for run archives (toolkit.results.archive: manifest,
summary, cells, logs) and provisioning run folders (toolkit.provision.runner: ansible-runner writes the
whole environment into artifacts/<ident>/command, and a secret can echo into stdout or job events).

The rules, each applied by both callers (tests/test_scrub.py holds each one for both):

    names      a value under a secret-looking name is masked: dict keys, environment variables,
               `NAME=value` / `NAME: value` in text, `--flag value` / `--flag=value` on command lines
               (secret: token, secret, password, passphrase, api key, credential, private/access/session
               key, cookie, auth, *_KEY; not secret: token counts, tokenizer settings, special tokens,
               and *_env, the *name* of a variable that holds a secret)
    values     the value of every secret-named environment variable (6 characters or more) is masked
               wherever it appears, whatever its shape
    shapes     well-known token shapes (hf_..., sk-..., gh?_..., AKIA..., xox?-...)
    bearer     `Bearer <token>`
    keys       PEM private key blocks

Everything masked reads `***`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

MASK = "***"
MIN_SECRET_LEN = 6  # shorter values (True, 1, yes) would match everywhere and hide nothing
MAX_TEXT_BYTES = 256 * 1024 * 1024

SECRET_NAME = re.compile(r"(token$|secret|passw(or)?d|passwd|passphrase|api[-_]?key|apikey|credential|"
                         r"private[-_]?key|access[-_]?key|session[-_]?key|cookie|(^|[-_])key$|"
                         r"(^|[-_])auth(orization)?$)", re.I)
_SPECIAL_TOKEN = re.compile(r"(bos|eos|pad|unk|sep|cls|mask|start|end|image|audio|video)_token")
_NOT_SECRET = {"tokenizer", "tokenizer_id", "tokenizer_path", "tokens_source", "skip_tokenizer_init"}
TOKEN_SHAPES = re.compile(r"\b(hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
                          r"AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,})\b")
_NAME_CHARS = r"[A-Za-z0-9_.-]*"
INLINE = re.compile(rf"(?P<k>{_NAME_CHARS}(token|secret|passw(or)?d|passphrase|api[-_]?key|apikey|credential|"
                    rf"[-_]key){_NAME_CHARS})(?P<sep>=|:\s*)"
                    r"(?P<v>'[^'\n]*'|\"[^\"\n]*\"|[^\s,;&\"')]+)", re.I)
FLAG_SPACE = re.compile(r"(?P<k>--[A-Za-z0-9-]+)(?P<sep>\s+)(?P<v>[^-\s]\S*)")
BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.I)
PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.DOTALL)


def is_secret_key(key: str) -> bool:
    """Does a value under this name (dict key, variable, flag without dashes) hold a secret?"""
    k = str(key).lower().lstrip("-")
    if k.endswith("_env") or k.endswith("-env"):
        return False  # the *name* of a variable that holds a secret (api_key_env: OPENAI_API_KEY)
    if _SPECIAL_TOKEN.fullmatch(k) or k in _NOT_SECRET:
        return False  # a tokenizer's special tokens and settings
    if k.endswith("tokens") or k.endswith("_tokens_per_s"):
        return False  # counts: input_tokens, max_tokens, speculative-num-draft-tokens
    return bool(SECRET_NAME.search(k))


def secret_values(env: Mapping[str, Any] | None = None) -> list[str]:
    """The values of the secret-named variables of `env` (default: this process's), longest first."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if is_secret_key(k) and isinstance(v, str) and len(v) >= MIN_SECRET_LEN}
    return sorted(vals, key=len, reverse=True)


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Text with every rule applied (`secrets`: values to mask wherever they appear)."""
    text = PRIVATE_KEY.sub(MASK, text)
    for s in secrets:
        text = text.replace(s, MASK)
    text = TOKEN_SHAPES.sub(MASK, text)
    text = BEARER.sub(lambda m: m.group(1) + MASK, text)
    text = FLAG_SPACE.sub(lambda m: m.group(0) if not is_secret_key(m.group("k")) or m.group("v") == MASK
                          else m.group("k") + m.group("sep") + MASK, text)
    return INLINE.sub(lambda m: m.group(0) if not is_secret_key(m.group("k")) or m.group("v") == MASK
                      else m.group("k") + m.group("sep") + MASK, text)


def _scrub_argv(argv: list, secrets: tuple[str, ...]) -> list:
    out, mask_next = [], False
    for tok in argv:
        if mask_next and isinstance(tok, str) and not tok.startswith("-"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        if isinstance(tok, str) and re.search(r"\bBearer$", tok, re.I):  # the token is the next word
            out.append(tok)
            mask_next = True
            continue
        if isinstance(tok, str) and tok.startswith("-"):
            flag, eq, _ = tok.partition("=")
            if is_secret_key(flag):
                if eq:
                    out.append(f"{flag}={MASK}")
                else:
                    out.append(tok)
                    mask_next = True
                continue
        out.append(scrub(tok, secrets))
    return out


def scrub(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of value with secrets masked (dicts, lists, argv lists and strings)."""
    secrets = tuple(secrets)
    if isinstance(value, dict):
        return {k: (MASK if is_secret_key(k) and v not in (None, "", False) and not isinstance(v, (dict, list))
                    else scrub(v, secrets)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _scrub_argv(list(value), secrets)
    if isinstance(value, str):
        return scrub_text(value, secrets)
    return value


def scrub_run_dir(run_dir: Path, env: Mapping[str, str]) -> int:
    """Mask secrets in every text file under run_dir, in place: the values of env's secret-named variables
    (and of those in ansible-runner's artifacts/*/command), and every other rule. Returns the number of
    files changed. Binary files and files over 256 MiB (image archives) are left alone."""
    from toolkit.fsutil import write_atomic

    env = {k: str(v) for k, v in env.items()}
    commands = []
    for cmd_file in run_dir.glob("artifacts/*/command"):
        try:
            data = json.loads(cmd_file.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data.get("env"), dict):
            env.update({k: str(v) for k, v in data["env"].items()})
            commands.append((cmd_file, data))
    secrets = secret_values(env)
    for cmd_file, data in commands:
        data["env"] = {k: (MASK if is_secret_key(k) and v not in (None, "") else v) for k, v in data["env"].items()}
        write_atomic(cmd_file, json.dumps(scrub(data, secrets), indent=2, sort_keys=True), mode=0o600)
    changed = 0
    for f in sorted(p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()):
        try:
            if f.stat().st_size > MAX_TEXT_BYTES:
                continue  # an image archive, not a log: ansible-runner writes no environment there
            raw = f.read_bytes()
        except OSError:
            continue
        if b"\0" in raw[:4096]:
            continue  # binary (an image archive): no environment inside
        text = raw.decode("utf-8", errors="surrogateescape")
        new = scrub_text(text, secrets)
        if new != text:
            write_atomic(f, new.encode("utf-8", errors="surrogateescape"), mode=0o600)
            changed += 1
    return changed
