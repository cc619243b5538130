"""Secrets never land in a kept file: one scrubber for run archives (toolkit.results.archive: manifest,
summary, cells, logs), tune sessions and provisioning run folders (toolkit.provision.runner:
ansible-runner writes the whole environment into artifacts/<ident>/command, and a secret can echo into
stdout or job events).

Exact, not greedy: a secret is recognised by its shape or by the exact name it is given, never because a
word looks like one. SGLang's counters (`#token: 9257`, `#new-token`, `#cached-token`), flag names
(`--speculative-num-draft-tokens 4`), tokenizer settings and prose ("time to first token: the ...")
come through byte for byte (tests/test_scrub.py holds this on real SGLang logs).

The rules, each applied by every caller:

    keys       PEM private key blocks
    values     the value of every secret-named environment variable (6 characters or more), and of
               every variable a spec names as holding a secret (a Matrix target's `api_key_env`),
               masked wherever it appears, whatever its shape
    shapes     well-known credential shapes: hf_..., sk-..., sk-ant-..., ghp_/gho_/ghu_/ghs_/ghr_...,
               github_pat_..., glpat-..., AKIA/ASIA..., xox?-..., AIza..., npm_..., pypi-AgE..., JWTs
    bearer     `Bearer <credential>` and `Basic <credential>` (a plain lower-case word after "Bearer"
               is prose and stays)
    urls       the password of `scheme://user:password@host`
    names      a value given to a secret *name*: dict keys, `NAME=value`, `NAME: value`,
               `--flag value`, `--flag=value`. Strong names (password, passphrase, secret, credential,
               api key, access/private/session/signing key, cookie, auth, authorization, HF_TOKEN-style
               variables, hf_token, access_token, ...) mask any value but null/None/true/false; the
               generic names `token`, `key` and `pat` mask a value only when it looks like a credential
               (8+ characters with letters and digits, or 24+ characters of mixed classes). Never
               secret: names starting with `#` (SGLang's counters), names ending in -tokens,
               tokenizer settings, special tokens (eos_token), counts and sizes (num_*, max_*, *_len),
               and *_env / *_file / *_path / *_name, which name where a secret is, not the secret.

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

# -- names

_STRONG = re.compile(r"passw(or)?d|passwd|passphrase|secret|credential|api[-_]?key|apikey|"
                     r"(access|private|session|signing|encryption|master|license|client)[-_]?key|cookie", re.I)
_AUTH = re.compile(r"(^|[-_])(auth|authorization|proxy[-_]authorization)$", re.I)
_TOKEN_OWNERS = (r"access|auth|api|bearer|refresh|id|session|hf|hub|huggingface|github|gh|gitlab|oauth|bot|"
                 r"slack|npm|pypi|personal[-_]?access|csrf|xsrf|client|service|registry|docker|wandb|jwt|app")
_OWNED_TOKEN = re.compile(rf"(^|[-_])({_TOKEN_OWNERS})[-_]?token$", re.I)
_ENV_STYLE = re.compile(r"^[A-Z][A-Z0-9_]*_(TOKEN|KEY|PAT)$")  # HF_TOKEN, GPG_KEY, GITHUB_PAT
_GENERIC = {"token", "key", "pat"}
_SPECIAL_TOKEN = re.compile(r"(bos|eos|pad|unk|sep|cls|mask|start|end|image|audio|video)_token", re.I)
# where a secret is, or how many: never the secret itself
_POINTER = re.compile(r"[-_](env|file|path|dir|name|names|id|ids|url|header|count|len|length|size|type|kind|"
                      r"mode|backend|format|source|sources)$", re.I)
_COUNT = re.compile(r"^(num|n|max|min|total|avg|mean)[-_]|tokens$|tokenizer|_tokens_per_s$", re.I)

_NULLISH = {"", "none", "null", "nil", "true", "false", "undefined", MASK}
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def _name_kind(key: str) -> str | None:
    """'strong', 'generic' or None (not a secret's name)."""
    raw = str(key).lstrip("-").strip("'\"")
    k = raw.lower()
    if not k or raw.startswith("#") or _POINTER.search(k) or _COUNT.search(k) or _SPECIAL_TOKEN.fullmatch(k):
        return None
    if _STRONG.search(k) or _AUTH.search(k) or _OWNED_TOKEN.search(k) or _ENV_STYLE.match(raw):
        return "strong"
    return "generic" if k in _GENERIC else None


def is_secret_key(key: str) -> bool:
    """Does a value under this name (dict key, variable, flag without dashes) hold a secret (or may it)?"""
    return _name_kind(key) is not None


def _credential_like(v: str) -> bool:
    """A bare value that looks like a credential rather than a word, a number or a path."""
    if len(v) < 8 or any(ch.isspace() for ch in v) or _NUMBER.fullmatch(v) or v.startswith(("/", "./", "~/")):
        return False
    if re.search(r"[A-Za-z]", v) and re.search(r"\d", v):
        return True
    classes = sum(bool(re.search(p, v)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^A-Za-z0-9]"))
    return len(v) >= 24 and classes >= 2


def _masks(name: str, value: Any) -> bool:
    """Is `value`, given to `name`, a secret to mask?"""
    kind = _name_kind(name)
    if kind is None or value is None or isinstance(value, (bool, dict, list, tuple)):
        return False
    v = str(value).strip().strip("'\"\\")
    if v.lower() in _NULLISH:
        return False
    if kind == "generic":
        return _credential_like(v)
    return True


# -- values and shapes

TOKEN_SHAPES = re.compile(
    r"\b(hf_[A-Za-z0-9]{16,}|sk-(ant-|proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|(AKIA|ASIA)[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|"
    r"AIza[0-9A-Za-z_-]{35}|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{20,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")
# the credential after an auth scheme; a plain lower-case word ("Bearer tokens") is prose
SCHEME = re.compile(r"\b(?P<s>Bearer|Basic)(?P<sp>\s+)(?P<v>[A-Za-z0-9._~+/=-]+)", re.I)
URL_PASSWORD = re.compile(r"(?P<pre>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+:)(?P<v>[^\s@/]+)(?P<at>@)")
PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.DOTALL)
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
# NAME=value, NAME: value, "NAME": "value", NAME='value'; a name right after `#`, a letter, a digit or a
# dash is part of a longer word (SGLang's `#new-token: 12`) and never matches here
INLINE = re.compile(rf"(?<![#\w.-])(?P<k>{_NAME})(?P<kq>\\?[\"']?)(?P<sep>\s*=\s*|:[ \t]*)"
                    r"(?P<v>\\\"(?:[^\"\\\n]|\\[^\"])*\\\"|'[^'\n]*'|\"[^\"\n]*\"|[^\s,;&\"')\]}\\]+)")
FLAG = re.compile(r"(?P<k>(?<![\w-])--[A-Za-z0-9][A-Za-z0-9-]*)(?P<sep>\s+|=)(?P<v>[^-\s][^\s\]]*)")


def _inline(m: re.Match) -> str:
    v, head = m.group("v"), m.group(0)[: m.start("v") - m.start(0)]
    if v.lower() in ("bearer", "basic"):
        return m.group(0)  # an auth scheme's credential is the next word: SCHEME masks it
    if not _masks(m.group("k"), v):
        return head + INLINE.sub(_inline, v)  # a value may hold more (`"stdout": "... api_key='x' ..."`)
    q = v[:2] if v.startswith('\\"') else v[0] if v[0] in "'\"" else ""
    return head + q + MASK + q  # quotes kept: JSON (escaped JSON too) stays JSON


def _flag(m: re.Match) -> str:
    k, v = m.group("k"), m.group("v")
    if v == k.lstrip("-").upper().replace("-", "_"):
        return m.group(0)  # argparse's usage text: `--api-key API_KEY` is the metavar, not a key
    return m.group(0) if not _masks(k, v) else k + m.group("sep") + MASK


def _scheme(m: re.Match) -> str:
    v = m.group("v")
    if v == MASK or (v.isalpha() and v.islower() and len(v) < 20):
        return m.group(0)
    return m.group("s") + m.group("sp") + MASK


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Text with every rule applied (`secrets`: values to mask wherever they appear)."""
    text = PRIVATE_KEY.sub(MASK, text)
    for s in secrets:
        text = text.replace(s, MASK)
    text = TOKEN_SHAPES.sub(MASK, text)
    text = SCHEME.sub(_scheme, text)
    text = URL_PASSWORD.sub(lambda m: m.group("pre") + (m.group("v") if m.group("v") == MASK else MASK) + "@", text)
    text = FLAG.sub(_flag, text)
    return INLINE.sub(_inline, text)


# -- where secrets are

def secret_values(env: Mapping[str, Any] | None = None, names: Iterable[str] = ()) -> list[str]:
    """The values of `env`'s secret-named variables (default: this process's) and of the variables `names`
    (those a spec says hold a secret: referenced_vars), longest first."""
    env = os.environ if env is None else env
    names = set(names)
    vals = {v for k, v in env.items() if (is_secret_key(k) or k in names) and isinstance(v, str)
            and len(v) >= MIN_SECRET_LEN}
    return sorted(vals, key=len, reverse=True)


def referenced_vars(obj: Any) -> set[str]:
    """The environment variables a document names as holding a secret: the values of `<secret name>_env` keys
    (a Matrix target's `api_key_env: GATEWAY_KEY`), anywhere in nested dicts and lists."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            stem = str(k)[:-4] if str(k).lower().endswith(("_env", "-env")) else None
            if stem and isinstance(v, str) and v and is_secret_key(stem):
                out.add(v)
            else:
                out |= referenced_vars(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            out |= referenced_vars(v)
    return out


def _scrub_argv(argv: list, secrets: tuple[str, ...]) -> list:
    out, mask_next = [], None
    for tok in argv:
        if mask_next is not None and isinstance(tok, str) and not tok.startswith("-"):
            out.append(MASK if _masks(mask_next, tok) else scrub(tok, secrets))
            mask_next = None
            continue
        mask_next = None
        if isinstance(tok, str) and re.search(r"\b(Bearer|Basic)$", tok, re.I):  # the credential is the next word
            out.append(tok)
            mask_next = "authorization"
            continue
        if isinstance(tok, str) and tok.startswith("-"):
            flag, eq, value = tok.partition("=")
            if is_secret_key(flag):
                if eq:
                    out.append(f"{flag}={MASK}" if _masks(flag, value) else tok)
                else:
                    out.append(tok)
                    mask_next = flag
                continue
        out.append(scrub(tok, secrets))
    return out


def scrub(value: Any, secrets: Iterable[str] = ()) -> Any:  # data-keyed: the input's own keys
    """A copy of value with secrets masked (dicts, lists, argv lists and strings)."""
    secrets = tuple(secrets)
    if isinstance(value, dict):
        return {k: (MASK if _masks(k, v) else scrub(v, secrets)) for k, v in value.items()}
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
