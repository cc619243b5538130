"""Remove secrets from a run folder before it is kept: ansible-runner writes the whole environment
into artifacts/<ident>/command, and a secret can echo into stdout or job events."""

from __future__ import annotations

import json
import re
from pathlib import Path

from toolkit.fsutil import write_atomic

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.DOTALL)
REDACTED = "<redacted by toolkit>"
MAX_TEXT_BYTES = 256 * 1024 * 1024
MIN_SECRET_LEN = 6  # shorter values (True, 1, yes) would match everywhere and hide nothing


def secret_values(env: dict[str, str]) -> list[str]:
    vals = {v for k, v in env.items() if SECRET_NAME.search(k) and isinstance(v, str) and len(v) >= MIN_SECRET_LEN}
    return sorted(vals, key=len, reverse=True)


def _scrub_text(text: str, secrets: list[str]) -> str:
    text = PRIVATE_KEY.sub(REDACTED, text)
    for s in secrets:
        text = text.replace(s, REDACTED)
    return text


def scrub_run_dir(run_dir: Path, env: dict[str, str]) -> int:
    """Redact secret env vars (by name) and their values, and private key blocks, in every file under
    run_dir. Returns the number of files changed."""
    env = dict(env)
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
    changed = 0
    for cmd_file, data in commands:
        data["env"] = {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in data["env"].items()}
        write_atomic(cmd_file, json.dumps(data, indent=2, sort_keys=True), mode=0o600)
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
        new = _scrub_text(text, secrets)
        if new != text:
            write_atomic(f, new.encode("utf-8", errors="surrogateescape"), mode=0o600)
            changed += 1
    return changed
