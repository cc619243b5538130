"""How much of a matrix run's wall time is the runner's own overhead?

Runs a small matrix on the embedded CPU engine (2 arms x 2 domains x 2 concurrency levels) and prints
wall time against the summed cell times plus one server start and stop per arm. The goal: within 5 %.

    .venv/bin/python benchmarks/matrix_overhead.py [MATRIX]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.bench.matrix import run_matrix  # noqa: E402
from toolkit.specs import load_spec  # noqa: E402


def main() -> None:
    spec = load_spec(sys.argv[1] if len(sys.argv) > 1 else ROOT / "envs/matrices/quickstart.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        result = run_matrix(spec, results_root=Path(tmp), log=lambda m: None)
    t = result.derived.model_dump(mode="json")["timing"]
    launches = sum(t["launch_s"].values())
    stops = sum(t["stop_s"].values())
    accounted = t["cells_s"] + launches + stops
    print(f"matrix {spec.name}: {result.derived.cells_done} cells, {len(t['launch_s'])} server starts")
    print(f"{'wall':>28} {t['wall_s']:8.1f} s")
    print(f"{'sum of cell times':>28} {t['cells_s']:8.1f} s")
    print(f"{'server starts':>28} {launches:8.1f} s  ({', '.join(f'{a} {s:.1f}' for a, s in t['launch_s'].items())})")
    print(f"{'server stops':>28} {stops:8.1f} s")
    print(f"{'wall / (cells + starts + stops)':>28} {t['wall_s'] / accounted:8.3f}   (goal <= 1.050)")


if __name__ == "__main__":
    main()
