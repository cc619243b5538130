"""What a server process pays at start-up when its Python finds no bytecode, and what the kept cache's
bytecode folder (toolkit.serve.jitcache: PYTHONPYCACHEPREFIX=<folder>/bytecode where the server inherits
PYTHONDONTWRITEBYTECODE) gives back: one import statement timed in fresh processes, the three ways
interleaved in each round:

    none   PYTHONDONTWRITEBYTECODE=1 and an empty prefix: every module compiled in memory, every start
           (a site unpacked from wheels, as on the lent H200, under a controller that sets the variable)
    kept   PYTHONDONTWRITEBYTECODE=1 and the prefix as the kept folder leaves it after one start
    site   PYTHONDONTWRITEBYTECODE=1, no prefix: the site's own __pycache__ (what pip compiled at install;
           an unpacked site has none, and then this row is the `none` row again)

    python benchmarks/bytecode_imports.py                              # torch + transformers (this venv)
    PYTHONPATH=/tmp/site python3 benchmarks/bytecode_imports.py \\
        --stmt "import sglang.srt.entrypoints.http_server" --rounds 3  # SGLang's server module (H200 site)

Prints each round and the medians (seconds of wall time per process start, and ratios to `none`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STMT = "import torch, transformers, transformers.models.llama.modeling_llama"


def once(stmt: str, extra: dict[str, str]) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
    env.update(extra)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", stmt], env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stmt", default=STMT, help="the import statement timed")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bytecode-") as tmp:
        empty, kept = Path(tmp) / "empty", Path(tmp) / "kept"
        empty.mkdir()
        first = once(a.stmt, {"PYTHONPYCACHEPREFIX": str(kept)})  # the first start: writes the kept folder
        files = sum(1 for _ in kept.rglob("*.pyc"))
        print(f"statement: {a.stmt}\npython {sys.version.split()[0]}; {os.cpu_count()} CPUs; "
              f"first start writing the kept folder: {first:.2f} s, {files} .pyc files")
        ways = {"none": {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(empty)},
                "kept": {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(kept)},
                "site": {"PYTHONDONTWRITEBYTECODE": "1"}}
        times: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(a.rounds):
            row = []
            for w, extra in ways.items():
                times[w].append(once(a.stmt, extra))
                row.append(f"{w} {times[w][-1]:6.2f} s")
            print(f"round {r + 1}: " + "   ".join(row))
            if any(empty.iterdir()):
                raise SystemExit("the empty prefix got files: PYTHONDONTWRITEBYTECODE was not honoured")
        med = {w: statistics.median(v) for w, v in times.items()}
        print("median: " + "   ".join(f"{w} {m:6.2f} s ({m / med['none']:.2f}x none)" for w, m in med.items()))


if __name__ == "__main__":
    main()
