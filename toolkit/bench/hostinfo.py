"""What an archive records about where it ran: host fingerprint (this machine's, or the provisioned
host's), git revision, engine versions; and scrubbing so that secrets never land in an archive."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|private[_-]?key|auth|credential)", re.I)
SECRET_VALUE = re.compile(r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
                          r"[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----|(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*)")


def scrub(obj):
    """Replace values of secret-looking keys and secret-looking strings with '***'."""
    if isinstance(obj, dict):
        return {k: ("***" if isinstance(k, str) and SECRET_KEY.search(k) and isinstance(v, (str, int))
                    and k not in ("max_tokens",) else scrub(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    if isinstance(obj, str):
        return scrub_text(obj)
    return obj


def scrub_text(text: str) -> str:
    return SECRET_VALUE.sub("***", text)


def git_revision(path: Path | None = None) -> str | None:
    path = path or Path(__file__).resolve().parent
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, timeout=5)
        if r.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return r.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def local_fingerprint() -> dict:
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    fp = {
        "hostname": platform.node(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_bytes": mem,
        "python": platform.python_version(),
        "engines": {d: _version(d) for d in ("torch", "transformers", "sglang", "flashinfer-python")},
    }
    try:
        from toolkit.gpu.fingerprint import gpu_fingerprint

        fp["gpu"] = gpu_fingerprint()
    except ImportError:
        fp["gpu"] = None
    return fp


def host_fingerprint(slots) -> dict:
    """This machine's fingerprint, plus the provisioned fingerprint of every host the arms run on."""
    out = {"controller": local_fingerprint(), "hosts": {}}
    for s in slots:
        if s.target.get("kind") == "hosts":
            fp = None
            try:
                from toolkit.provision.fingerprint import load_fingerprint

                fp = load_fingerprint(s.target["host"])
            except ImportError:
                pass
            out["hosts"][s.target["host"]] = fp or {"missing": "no fingerprint: run `toolkit provision host` first"}
    return scrub(out)
