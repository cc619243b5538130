"""Helpers for the build tests: write a test Environment spec with given patches and presets."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "envs" / "patches"
THRESHOLD_PATCH = PATCHES / "sglang-0.5.23-spec-disable-batch-threshold.patch"
SM120_PATCH = PATCHES / "sglang-0.5.23-sm120-allreduce-symm-mem.patch"
TEST_ENV = ROOT / "envs" / "test" / "sglang-cpu-test.yaml"

EAGLE = {
    "model-path": "/models/tiny",
    "speculative-algorithm": "EAGLE3",
    "speculative-draft-model-path": "/models/tiny-eagle3",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
    "speculative-disable-batch-threshold": 8,
    "max-running-requests": 16,
}


def write_env(dir: Path, patches: dict[str, str], servers: dict | None = None, name: str = "sglang-cpu-test") -> Path:
    """Spec + patch files in `dir`; the spec lists the patches (in order) with their real sha256."""
    dir.mkdir(parents=True, exist_ok=True)
    listed = []
    for fname, text in patches.items():
        (dir / fname).write_text(text)
        listed.append({"path": fname, "sha256": hashlib.sha256(text.encode()).hexdigest()})
    spec = {
        "kind": "Environment", "name": name, "engine": "sglang", "base_image": "toolkit/base:bookworm",
        "python": "3.11",
        "sglang": {"version": "0.5.23", "source": "wheel", "deps": False, "patches": listed},
        "ca_bundle": {"path": "/etc/ssl/certs/ca-certificates.crt"},
        "servers": servers if servers is not None else {"eagle3-dynamic": dict(EAGLE)},
    }
    path = dir / "env.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def line_of(path: Path, needle: str, after: str | None = None) -> int:
    """1-based line of the first line containing `needle` (below the first line containing `after`)."""
    armed = after is None
    for i, line in enumerate(path.read_text().splitlines(), 1):
        armed = armed or (after in line)
        if armed and needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def toolkit(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess (for module-scoped fixtures, where the `cli` fixture is not available)."""
    e = dict(os.environ, NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)
