"""Is the machine's first (cold) launch noisier? (issue 42 item 4: `warmup_launch` on by default for GPU
targets only if the committed data show it.) Reads every committed archive with 3+ launches per arm whose first
launch started cold (its launch record: `warm_start` false and the slowest start of the run, i.e. kernels
compiled into empty caches), and compares, per metric, the first-round arm's launch 0 with its launches 1-2:

- rms deviation: per cell, a launch's log median less the mean of the arm's other launches in that cell, the
  root mean square over the cells (a noisier launch deviates more);
- shift: the mean of those deviations over the arm's cells (a slower first launch is a shift, not noise);
- how often launch 0 has the largest |shift| of the three (1 in 3 when the first launch is like any other).

    .venv/bin/python benchmarks/first_launch.py [--results results]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from toolkit.results.archive import open_archive
from toolkit.results.cells import CellReader
from toolkit.results.noise import LaunchView

METRICS = ("tpot_ms", "ttft_ms", "output_tok_s")


def cold_first(archive) -> str | None:
    """The arm whose launch 0 was the run's cold start (first in round 0, not a warm start, the slowest), or None."""
    rounds = archive.manifest.rounds
    launches = archive.derived.launches or {}
    if not rounds or not launches:
        return None
    arm = rounds[0][0]
    recs = sorted(launches.get(arm, []), key=lambda r: r.launch)
    starts = [r.startup_s or 0 for rs in launches.values() for r in rs]
    if not recs or recs[0].warm_start or (recs[0].startup_s or 0) < max(starts):
        return None
    return arm


def deviations(view: LaunchView, arm: str, metric: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for g in view.arm_groups(arm):
        lg = {k: math.log(x) for k, x in view.figures(g, metric).items() if x and x > 0}
        if len(lg) < 3:
            continue
        for k, x in lg.items():
            others = [y for kk, y in lg.items() if kk != k]
            out.setdefault(k, []).append(x - sum(others) / len(others))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    args = ap.parse_args()
    per: dict[str, list[tuple[str, dict[int, list[float]]]]] = {m: [] for m in METRICS}
    for man in sorted(Path(args.results).glob("*/*/manifest.json")):
        try:
            a = open_archive(man.parent)
        except Exception:  # noqa: BLE001 - a run that does not open is not evidence
            continue
        arm = cold_first(a)
        if arm is None:
            continue
        view = LaunchView(CellReader(a))
        if view.arm_launches(arm) < 3:
            continue
        for m in METRICS:
            d = deviations(view, arm, m)
            if {0, 1, 2} <= set(d):
                per[m].append((a.run_id, d))
    for m in METRICS:
        runs = per[m]
        if not runs:
            print(f"{m}: no cold-started archive with 3 launches")
            continue
        sq0 = [np.mean(np.square(d[0])) for _, d in runs]
        sqr = [np.mean([np.mean(np.square(d[k])) for k in d if k != 0]) for _, d in runs]
        shifts = [100 * np.mean(d[0]) for _, d in runs]
        largest = sum(abs(np.mean(d[0])) >= max(abs(np.mean(d[k])) for k in d) for _, d in runs)
        print(f"{m:13s} {len(runs)} cold runs: rms deviation launch 0 {100 * math.sqrt(np.mean(sq0)):.1f}% vs later "
              f"{100 * math.sqrt(np.mean(sqr)):.1f}%; launch 0 the largest shift in {largest}/{len(runs)}; its shifts "
              + ", ".join(f"{s:+.1f}%" for s in shifts))
    print("runs: " + ", ".join(r for r, _ in per[METRICS[0]]))


if __name__ == "__main__":
    main()
