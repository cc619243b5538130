"""The server's own clock for a slowdown: per batch size, the median decode step time SGLang logged
("Decode batch, #running-req: N, ... gen throughput (token/s): T": one step of N requests takes N / T s),
for every log of an arm in two runs, and the change from A to B. It is an instrument independent of the
toolkit's client, so a client-measured TPOT change can be checked against what the server did (issue 24's
injected sleep: docs/lab/launch-noise.md, "The slowed replay against the EAGLE-3 reference").

    python benchmarks/sglang_h200/server_step_times.py RUN_A RUN_B [--arm baseline] [--sizes 1 8 32]
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

LINE = re.compile(r"Decode batch, #running-req: (\d+),.*gen throughput \(token/s\): ([0-9.]+)")


def step_times(run: Path, arm: str) -> dict[int, list[float]]:
    """Batch size -> step times in ms, over the arm's logs (every launch: ARM.log, ARM__l1.log, ...).
    SGLang's first line after an idle spell averages over the idle time too: lines below a fifth of the
    median throughput for their size are left out."""
    out: dict[int, list[float]] = {}
    for log in sorted((run / "logs").glob(f"{arm}.log")) + sorted((run / "logs").glob(f"{arm}__l*.log")):
        for m in LINE.finditer(log.read_text(errors="replace")):
            n, tput = int(m.group(1)), float(m.group(2))
            if tput > 0:
                out.setdefault(n, []).append(n / tput * 1000)
    return {n: [t for t in ts if t < 5 * statistics.median(ts)] for n, ts in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--arm", default="baseline")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32])
    a = ap.parse_args()
    ta, tb = step_times(a.run_a, a.arm), step_times(a.run_b, a.arm)
    print(f"{a.arm}: median decode step (ms) by SGLang's own log, A = {a.run_a.name}, B = {a.run_b.name}")
    print(f"{'batch':>5}  {'n A':>4}  {'step A':>7}  {'n B':>4}  {'step B':>7}  {'delta ms':>8}  {'delta %':>8}")
    for n in a.sizes:
        if n not in ta or n not in tb:
            print(f"{n:>5}  (no lines at this batch size in {'A' if n not in ta else 'B'})")
            continue
        ma, mb = statistics.median(ta[n]), statistics.median(tb[n])
        print(f"{n:>5}  {len(ta[n]):>4}  {ma:>7.3f}  {len(tb[n]):>4}  {mb:>7.3f}  {mb - ma:>+8.3f}  {(mb / ma - 1) * 100:>+7.1f}%")


if __name__ == "__main__":
    main()
