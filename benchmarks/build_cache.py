"""Build-stage figures for the test env (envs/test/sglang-cpu-test.yaml), printed, not asserted:

  - preflight only (`--check`): fetch (cached wheel), patch, compile, flag check
  - full build: `--no-cache` (every Docker layer again: apt, pip download of the wheel, patch) + smoke
  - cache hit: the unchanged spec again, wall clock of the whole CLI process (Python start included)

Needs a Docker engine and the debootstrap base (`toolkit build base`). Build records go to a throw-away
cache dir; the SGLang wheel cache (and parser-deps, when installed) are shared with the user cache.

    .venv/bin/python benchmarks/build_cache.py [--hits 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "envs" / "test" / "sglang-cpu-test.yaml"


def cli(*args: str, env: dict) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "toolkit.cli", *args, "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"toolkit {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hits", type=int, default=7, help="cache-hit repetitions")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from toolkit.settings import cache_dir

    with tempfile.TemporaryDirectory(prefix="toolkit-bench-cache-") as tmp:
        shared = cache_dir() / "sglang"
        shared.mkdir(parents=True, exist_ok=True)
        (Path(tmp) / "sglang").symlink_to(shared)
        if (cache_dir() / "parser-deps").is_dir():  # exact flag check, as for the user
            (Path(tmp) / "parser-deps").symlink_to(cache_dir() / "parser-deps")
        env = dict(os.environ, TOOLKIT_CACHE_DIR=tmp, NO_COLOR="1")
        cli("build", "base", env=env)  # make sure the base exists (not timed)
        check_wall, check = cli("build", "env", str(SPEC), "--check", env=env)
        full_wall, full = cli("build", "env", str(SPEC), "--no-cache", env=env)
        hits = [cli("build", "env", str(SPEC), env=env) for _ in range(args.hits)]
    assert not full["cache_hit"] and all(h["cache_hit"] for _, h in hits)
    import docker  # the --no-cache build left the previous test image untagged: drop only those

    docker.from_env().images.prune(filters={"dangling": True, "label": "dev.toolkit.spec-name=sglang-cpu-test"})
    walls = [w for w, _ in hits]
    inner = [h["seconds"] for _, h in hits]
    rec = full["record"]
    print(f"machine: {os.cpu_count()} cores; test env {SPEC.relative_to(ROOT)}; sglang "
          f"{check['preflight']['sglang_version']}, {len(check['preflight']['patches'])} patch(es), "
          f"flag check {check['preflight']['flag_mode']}")
    print(f"preflight only (--check)     {check_wall:6.2f} s wall   ({check['preflight']['seconds']:.2f} s in preflight)")
    print(f"full build (--no-cache)      {full_wall:6.1f} s wall   (docker build {rec['build_seconds']:.1f} s, "
          f"smoke check included)")
    print(f"cache hit, n={len(walls)}              median {statistics.median(walls):.2f} s wall "
          f"(min {min(walls):.2f}, max {max(walls):.2f}); in-command {statistics.median(inner) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
