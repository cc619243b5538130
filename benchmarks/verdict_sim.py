"""Verdict rates over seeded replays (issue 42): how often `results reproduce` says `reproduced` and how often
`results diff --fail-on-regression 5` fails, for known true changes, through the toolkit's own functions.

    .venv/bin/python benchmarks/verdict_sim.py [--replays 100] [--seed 0]

Each replay writes two runs with the real ArchiveWriter (tests/synthetic.py: one arm, 6 cells, 3 launches a
side, a between-launch factor of the given CV on every latency, half of its variance shared by the arm's
cells, 60 requests a cell), then compares them with `diff_runs` and judges them with
`equivalence.judge` (the verdict `results reproduce` prints, at its default margin) and `DiffResult.gate`
(the `--fail-on-regression` test). For contrast, the rules before issue 42 on the same diffs: the margin
taken from the runs' own median launch CV (the noise floor, at least 5 %), and the gate "significant and
the point estimate beyond 5 %". Prints one row per scenario; no assertion (the unit tests hold the rules).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.synthetic import write_run  # noqa: E402
from toolkit.results.archive import open_archive  # noqa: E402
from toolkit.results.diff import DiffResult, diff_runs  # noqa: E402
from toolkit.results.equivalence import DEFAULT_MARGIN_PCT, judge  # noqa: E402
from toolkit.stats import floor_pct  # noqa: E402

ARM = {"baseline": ["python", "-m", "sglang.launch_server", "--tp", "8"]}
SHAPE = {"arms": ARM, "domains": ("chat", "code", "math"), "concurrency": (1, 8), "launches": 3, "n": 60}
METRICS = ["ttft_ms", "tpot_ms", "e2e_ms", "output_tok_s"]
GATE_PCT = 5.0
# (name, launch CV, true change of every latency: B = A x change)
SCENARIOS = [
    ("A/A, launch CV 5%", 0.05, 1.00),
    ("A/A, launch CV 10%", 0.10, 1.00),
    ("true +10%, launch CV 10%", 0.10, 1.10),
    ("true +15%, launch CV 10%", 0.10, 1.15),
    ("true +20%, launch CV 5%", 0.05, 1.20),
    ("machine drift +4%, launch CV 5%", 0.05, 1.04),
    ("machine drift +4%, launch CV 10%", 0.10, 1.04),
    ("true 2x, launch CV 25%", 0.25, 2.00),
]


def old_margin(diff: DiffResult) -> float:
    """The margin before issue 42: the noise floor at the median launch CV of the judged runs, >= 5 %."""
    cvs = sorted(m.launch_cv for c in diff.cells for m in c.metrics.values() if m.launch_cv is not None)
    mid = len(cvs) // 2
    cv = cvs[mid] if len(cvs) % 2 else (cvs[mid - 1] + cvs[mid]) / 2
    return max(5.0, float(math.ceil(floor_pct(cv))))


def old_gate(diff: DiffResult, pct: float) -> bool:
    """The gate before issue 42: a significant worse change whose point estimate is beyond pct."""
    return any(m.verdict == "worse" and m.delta_pct is not None and abs(m.delta_pct) > pct
               for c in diff.cells for m in c.metrics.values())


def replay(root: Path, seed: int, cv: float, change: float) -> dict[str, bool | str]:
    a = open_archive(write_run(root, seed=seed, launch_cv=cv, **SHAPE))
    b = open_archive(write_run(root, seed=seed + 1, launch_cv=cv, slowdown={"baseline": change}, **SHAPE))
    diff = diff_runs(a, b, metrics=METRICS)
    return {"verdict": judge(diff, []).verdict, "gate": bool(diff.regressions(GATE_PCT)),
            "old_reproduced": judge(diff, [], old_margin(diff)).verdict == "reproduced",
            "old_gate": old_gate(diff, GATE_PCT), "old_margin": old_margin(diff)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"{args.replays} replays a scenario; one arm, 6 cells, 3 launches a side; metrics {', '.join(METRICS)}; "
          f"default margin ±{DEFAULT_MARGIN_PCT:g}%; gate --fail-on-regression {GATE_PCT:g}")
    print(f"{'scenario':34} {'reproduced':>10} {'differs':>8} {'inconcl.':>8} {'gate fails':>10}   "
          f"{'before: reproduced':>18} {'(margin)':>10} {'gate fails':>10}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, cv, change) in enumerate(SCENARIOS):
            rows = [replay(Path(tmp) / f"{k}-{i}", args.seed + 1000 * k + 2 * i, cv, change)
                    for i in range(args.replays)]
            share = lambda f: f"{100 * sum(map(f, rows)) / len(rows):.0f}%"  # noqa: E731
            margins = sorted(r["old_margin"] for r in rows)
            verdicts = [share(lambda r, v=v: r["verdict"] == v) for v in ("reproduced", "differs", "inconclusive")]
            print(f"{name:34} {verdicts[0]:>10} {verdicts[1]:>8} {verdicts[2]:>8} "
                  f"{share(lambda r: r['gate']):>10}   {share(lambda r: r['old_reproduced']):>18} "
                  f"{'±' + format(margins[len(margins) // 2], 'g') + '%':>10} {share(lambda r: r['old_gate']):>10}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
