"""Per-cell calibration of the launch-level verdicts (issue 42, item 3): A/A false alarms and interval coverage
per cell, where the arm's cells do not share one launch variance, through the toolkit's own statistics.

    .venv/bin/python benchmarks/cellvar_sim.py [--replays 2000] [--seed 0] [--launches 3]

A two-level generator, numbers only (what `results diff` and the paired speed-ups compute from, without the
archives): one arm of 6 cells (2 domains x concurrency 1, 4, 16), `--launches` launches a side; a cell's
per-launch figure is exp(launch effect + the noise of a launch's median over 200 requests), the launch effect
half shared by the arm's cells (one server per launch) and half the cell's own. Scenarios: a bimodal cell
(its own launch effect from one of two modes, +-2 CV), launch noise rising with concurrency (CV 4, 8, 16 %) with
heavy-tailed launch effects (t, 3 df), and both together. Per cell:

- diff A/A: the share of pairs the launch-level t-test calls changed at alpha 0.05 (no Holm: per test);
- diff CI: how often the 95 % CI of B/A covers the true ratio (B = 1.1 x A);
- speed-up CI: how often the t-interval over rounds of the paired ratios covers the true speed-up (1.3).

`before`: the rule before per-cell variance, one launch variance per (arm, metric) pooled over the arm's cells
(launches.launch_noise, each side its own, Welch df); `after`: the cell's own launches (launches.cell_noise).
Acceptance (issue 42): every cell's A/A false alarms at most alpha + 1 point, coverage 93-97 %.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.stats import ALPHA, cell_noise, compare, interval, launch_noise  # noqa: E402

CELLS = [(d, c) for d in ("chat", "code") for c in (1, 4, 16)]
MEDIAN_SD = 1.25 * 0.25 / math.sqrt(200)  # a launch's median of 200 requests, log sd 0.25 within a launch
SHIFT, SPEEDUP = 1.1, 1.3
# name -> (CV by concurrency, bimodal cell or None, t-3 launch effects)
SCENARIOS = {
    "bimodal cell, CV 8 %": ({1: 0.08, 4: 0.08, 16: 0.08}, ("code", 4), False),
    "CV 4/8/16 % by concurrency, t3": ({1: 0.04, 4: 0.08, 16: 0.16}, None, True),
    "both": ({1: 0.04, 4: 0.08, 16: 0.16}, ("code", 4), True),
}


def arm_figures(rng: np.random.Generator, launches: int, cv: dict, bimodal: tuple | None, heavy: bool,
                shift: float = 1.0, shared: float = 0.5) -> dict[tuple, dict[int, float]]:
    """cell -> launch -> figure: exp(cv_c (sqrt(shared) lambda_launch + sqrt(1 - shared) eps_cell,launch)
    [+ a mode of +-2 cv_c in the bimodal cell] + the median's noise) x shift; eps normal or t(3) scaled to sd 1."""
    lam = rng.normal(0.0, 1.0, launches)
    out = {}
    for cell in CELLS:
        s = cv[cell[1]]
        eps = rng.standard_t(3, launches) / math.sqrt(3) if heavy else rng.normal(0.0, 1.0, launches)
        x = s * (math.sqrt(shared) * lam + math.sqrt(1 - shared) * eps) + rng.normal(0.0, MEDIAN_SD, launches)
        if cell == bimodal:
            x = x + 2 * s * rng.choice([-1.0, 1.0], launches)
        out[cell] = {la: shift * math.exp(v) for la, v in enumerate(x)}
    return out


def replay(rng: np.random.Generator, launches: int, cv: dict, bimodal, heavy: bool) -> dict[str, dict]:
    """One replay: per rule and cell, (A/A false alarm, diff CI covers, speed-up CI covers)."""
    a, a2, b = (arm_figures(rng, launches, cv, bimodal, heavy, shift=s) for s in (1.0, 1.0, SHIFT))
    base, arm = arm_figures(rng, launches, cv, bimodal, heavy), arm_figures(rng, launches, cv, bimodal, heavy,
                                                                           shift=SPEEDUP)
    ratios = {c: {la: arm[c][la] / base[c][la] for la in range(launches)} for c in CELLS}
    pooled = {"a": launch_noise(a), "a2": launch_noise(a2), "b": launch_noise(b), "r": launch_noise(ratios)}
    out: dict[str, dict] = {"before": {}, "after": {}}
    for c in CELLS:
        for rule in out:
            if rule == "before":
                aa = compare(a[c], a2[c], pooled["a"], pooled["a2"])
                ab = compare(a[c], b[c], pooled["a"], pooled["b"])
                sp = interval(ratios[c], pooled["r"])
            else:
                aa, ab = compare(a[c], a2[c], cell_noise(a[c], a2[c])), compare(a[c], b[c], cell_noise(a[c], b[c]))
                sp = interval(ratios[c], cell_noise(ratios[c]))
            out[rule][c] = (aa.p < ALPHA, ab.low <= SHIFT <= ab.high, sp[1] <= SPEEDUP <= sp[2])
    return out


def rates(replays: int, seed: int, launches: int, cv: dict, bimodal, heavy: bool) -> dict[str, dict]:
    """rule -> cell -> (A/A false-alarm share, diff CI coverage, speed-up CI coverage)."""
    rng = np.random.default_rng(seed)
    acc = {r: {c: np.zeros(3) for c in CELLS} for r in ("before", "after")}
    for _ in range(replays):
        for rule, cells in replay(rng, launches, cv, bimodal, heavy).items():
            for c, hits in cells.items():
                acc[rule][c] += hits
    return {r: {c: v / replays for c, v in cells.items()} for r, cells in acc.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replays", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--launches", type=int, default=3)
    args = ap.parse_args()
    print(f"{args.replays} replays a scenario; 6 cells, {args.launches} launches a side; per cell: A/A false alarms "
          f"(alpha {ALPHA}), coverage of the diff's 95 % CI (true x{SHIFT}) and of the speed-up's (true x{SPEEDUP}); "
          "before: the arm's pooled variance, after: the cell's own")
    t0 = time.perf_counter()
    for k, (name, (cv, bimodal, heavy)) in enumerate(SCENARIOS.items()):
        r = rates(args.replays, args.seed + k, args.launches, cv, bimodal, heavy)
        print(f"\n{name}")
        print(f"  {'cell':18} {'A/A false alarms':>20} {'diff CI covers':>20} {'speed-up CI covers':>20}")
        print(f"  {'':18} {'before':>9} {'after':>10} {'before':>9} {'after':>10} {'before':>9} {'after':>10}")
        for c in CELLS:
            b, a = r["before"][c], r["after"][c]
            label = f"{c[0]} c={c[1]}" + (" (bimodal)" if c == bimodal else "")
            print(f"  {label:18} " + " ".join(f"{100 * x:8.1f}% {100 * y:9.1f}%" for x, y in zip(b, a)))
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
