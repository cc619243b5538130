"""One closed-loop cell of the load generator of whichever checkout is on PYTHONPATH (this one, main at
70e4ce2 from before worker processes, ...), the same way for every tree: its own run_cell, the CLI's
plain body (no stream_options), prompts tagged 'hi #i' so a server can pair requests. Used by
benchmarks/loadgen_ttft.py.

    PYTHONPATH=TREE python benchmarks/loadgen_driver.py URL C N T WORKERS RECORDS [API]   # WORKERS: N or default

Prints one JSON line: the client's TTFT p50/p99 and its per-chunk-gap ITL p50/p99 (ms) over the cell's
requests, errors; writes each request's (tag, TTFT, send time) to RECORDS (JSON lines).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def quantile(v: list, q: float) -> float | None:
    """As the server's figures (benchmarks/loadgen_workers.py): the median, else the q-quantile by rank."""
    if not v:
        return None
    return statistics.median(v) if q == 0.5 else sorted(v)[int(q * (len(v) - 1))]


def main() -> None:
    url, c, n, t, workers, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5], sys.argv[6]
    api = sys.argv[7] if len(sys.argv) > 7 else "chat"
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from loadgen_trees import has_workers, run_tree_cell, tree_modules

    loadgen, _ = tree_modules()
    try:
        from toolkit.schema.records import Prompt
    except ImportError:  # a tree from before toolkit/schema
        from toolkit.bench.records import Prompt
    prompts = [Prompt(id=f"p{i}", domain="cli", prompt=f"hi #{i}") for i in range(n)]
    kw = dict(concurrency=c, requests=n, output_len=t, model="m", request_params={"stream_options": None,
                                                                                 "temperature": None})
    if has_workers(loadgen):
        kw["workers"] = None if workers == "default" else int(workers)
    elif workers != "default":
        raise SystemExit(f"this tree's load generator has no worker processes (asked for {workers})")
    recs = run_tree_cell(loadgen, url, api, prompts, **kw)
    ok = [r for r in recs if r.error is None and r.ttft_ms is not None]
    ttfts = [r.ttft_ms for r in ok]
    gaps = [b - a for r in ok for a, b in zip(r.chunk_ms, r.chunk_ms[1:])]
    with open(records, "w") as f:
        f.writelines(json.dumps({"prompt_id": r.prompt_id, "ttft_ms": r.ttft_ms, "send_s": r.send_s, "error": None})
                     + "\n" for r in ok)
    print(json.dumps({"ttft_p50": quantile(ttfts, 0.5), "ttft_p99": quantile(ttfts, 0.99),
                      "itl_p50": quantile(gaps, 0.5), "itl_p99": quantile(gaps, 0.99), "n": len(recs),
                      "errors": len(recs) - len(ok), "chunks": sum(len(r.chunk_ms) for r in ok)}))


if __name__ == "__main__":
    main()
