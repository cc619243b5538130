"""`python -m toolkit.loadgen URL`: one cell from the command line (a fixed prompt, closed loop), its summary as
JSON on stdout. The benchmarks under benchmarks/ drive the load generator through it."""

from __future__ import annotations

import json

from toolkit.loadgen.cell import run_cell
from toolkit.loadgen.client import PATHS
from toolkit.loadgen.load import CellLoad
from toolkit.loadgen.share import run
from toolkit.schema.records import Prompt


def main(argv: list[str] | None = None) -> None:
    """`python -m toolkit.loadgen URL`: one cell with a fixed prompt (closed loop, or open loop with --rate);
    JSON summary on stdout."""
    import argparse

    from toolkit.loadgen.summary import itl_values, summarize

    ap = argparse.ArgumentParser(prog="python -m toolkit.loadgen", description=main.__doc__)
    ap.add_argument("url")
    ap.add_argument("--api", default="chat", choices=sorted(PATHS))
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--prompt", default="hi")
    ap.add_argument("--prompts", type=int, default=1,
                    help="N distinct prompts, 'PROMPT #i' (ids p0..pN-1): with N >= requests every request is "
                         "told apart, by a server's log or a benchmark pairing it with the server's view")
    ap.add_argument("--model", default="m")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes to spread the load over (default: enough for the expected chunk rate, "
                         "one when it is small)")
    ap.add_argument("--usage", action="store_true",
                    help="ask for per-chunk usage (stream_options), as the matrix runner does; default: a "
                         "plain body, the reference client's")
    ap.add_argument("--records", help="also write every record (JSON lines) to this file")
    ap.add_argument("--rate", type=float, default=None, help="open loop: requests per second (the concurrency "
                                                             "is then the cap on requests in flight)")
    ap.add_argument("--arrival", default="poisson", choices=["poisson", "gamma", "constant"],
                    help="open loop: the arrival process (docs/bench.md#open-loop-load-rates)")
    ap.add_argument("--burstiness", type=float, default=1.0, help="--arrival gamma: the shape B (1: Poisson)")
    ap.add_argument("--seed", type=int, default=0, help="open loop: the schedule's seed")
    a = ap.parse_args(argv)
    prompts = ([Prompt(id="p0", domain="cli", prompt=a.prompt)] if a.prompts <= 1 else
               [Prompt(id=f"p{i}", domain="cli", prompt=f"{a.prompt} #{i}") for i in range(a.prompts)])
    params = {} if a.usage else {"stream_options": None, "temperature": None}
    load = CellLoad(api=a.api, concurrency=a.concurrency, requests=a.requests, output_len=a.output_len,
                    workers=a.workers, request_params=params, rate=a.rate, arrival=a.arrival,
                    burstiness=a.burstiness, seed=a.seed)
    recs = run(run_cell(a.url, load, prompts, model=a.model))
    s = summarize(recs, arm="cli", domain="cli", concurrency=a.concurrency, output_len=a.output_len, load=load)
    out = s.model_dump(mode="json")
    out["chunks"] = sum(len(r.chunk_ms) for r in recs)
    gaps = itl_values(recs, "chunk")
    out["itl_chunk_p50"] = float(__import__("numpy").median(gaps)) if len(gaps) else None
    if a.records:
        with open(a.records, "w") as f:
            f.writelines(r.model_dump_json() + "\n" for r in recs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
