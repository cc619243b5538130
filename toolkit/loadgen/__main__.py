"""`python -m toolkit.loadgen URL`: one cell from the command line (a fixed prompt, closed loop; or a trace
replayed open loop: --trace FILE [--speed S]), its summary as JSON on stdout. The benchmarks under
benchmarks/ drive the load generator through it."""

from __future__ import annotations

import json

from toolkit.loadgen.cell import run_cell
from toolkit.loadgen.client import PATHS
from toolkit.loadgen.load import CellLoad
from toolkit.loadgen.share import run
from toolkit.numbers import argtype
from toolkit.schema.records import Prompt


POSITIVE = argtype(lower=0.0, inclusive=False)  # finite, > 0: .inf, nan and negatives are usage errors (exit 2)
POSITIVE_INT = argtype(lower=1, inclusive=True, integer=True)


def main(argv: list[str] | None = None) -> None:
    """`python -m toolkit.loadgen URL`: one cell with a fixed prompt (closed loop, or open loop with --rate);
    JSON summary on stdout."""
    import argparse

    from toolkit.loadgen.summary import itl_values, summarize

    ap = argparse.ArgumentParser(prog="python -m toolkit.loadgen", description=main.__doc__)
    ap.add_argument("url")
    ap.add_argument("--api", default="chat", choices=sorted(PATHS))
    ap.add_argument("--concurrency", type=POSITIVE_INT, default=None,
                    help="requests in flight (closed loop, default 1); with --trace a cap (default: none)")
    ap.add_argument("--requests", type=POSITIVE_INT, default=16)
    ap.add_argument("--output-len", type=POSITIVE_INT, default=128)
    ap.add_argument("--prompt", default="hi")
    ap.add_argument("--prompts", type=POSITIVE_INT, default=1,
                    help="N distinct prompts, 'PROMPT #i' (ids p0..pN-1): with N >= requests every request is "
                         "told apart, by a server's log or a benchmark pairing it with the server's view")
    ap.add_argument("--model", default="m")
    ap.add_argument("--workers", type=POSITIVE_INT, default=None,
                    help="processes to spread the load over (default: enough for the expected chunk rate, "
                         "one when it is small)")
    ap.add_argument("--usage", action="store_true",
                    help="ask for per-chunk usage (stream_options), as the matrix runner does; default: a "
                         "plain body, the reference client's")
    ap.add_argument("--records", help="also write every record (JSON lines) to this file")
    ap.add_argument("--rate", type=POSITIVE, default=None, help="open loop: requests per second (the concurrency "
                                                             "is then the cap on requests in flight)")
    ap.add_argument("--arrival", default="poisson", choices=["poisson", "gamma", "constant"],
                    help="open loop: the arrival process (docs/bench.md#open-loop-load-rates)")
    ap.add_argument("--burstiness", type=POSITIVE, default=1.0, help="--arrival gamma: the shape B (1: Poisson)")
    ap.add_argument("--seed", type=int, default=0, help="open loop: the schedule's seed")
    ap.add_argument("--trace", help="replay this trace (JSON lines, docs/loadgen.md#traces): request i sent at its "
                                    "timestamp, prompts synthesized to input_length where the trace has no text")
    ap.add_argument("--speed", type=POSITIVE, default=1.0, help="with --trace: time scaling (2.0 = twice as fast)")
    a = ap.parse_args(argv)
    params = {} if a.usage else {"stream_options": None, "temperature": None}
    if a.trace:
        prompts, load = _trace_load(a, params)
    else:
        prompts = ([Prompt(id="p0", domain="cli", prompt=a.prompt)] if a.prompts <= 1 else
                   [Prompt(id=f"p{i}", domain="cli", prompt=f"{a.prompt} #{i}") for i in range(a.prompts)])
        load = CellLoad(api=a.api, concurrency=a.concurrency or 1, requests=a.requests, output_len=a.output_len,
                        workers=a.workers, request_params=params, rate=a.rate, arrival=a.arrival,
                        burstiness=a.burstiness, seed=a.seed)
    recs = run(run_cell(a.url, load, prompts, model=a.model))
    s = summarize(recs, arm="cli", domain="cli", concurrency=load.concurrency, output_len=a.output_len,
                  load=None if a.trace else load)
    out = s.model_dump(mode="json")
    if a.trace:  # how late each request left against the trace's schedule (the client's own send stamps)
        lags = sorted(r.lag_ms for r in recs if r.lag_ms is not None)
        out["lag_ms"] = {"p50": lags[len(lags) // 2], "p99": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
                         "max": lags[-1]} if lags else None
    out["chunks"] = sum(len(r.chunk_ms) for r in recs)
    gaps = itl_values(recs, "chunk")
    out["itl_chunk_p50"] = float(__import__("numpy").median(gaps)) if len(gaps) else None
    print(json.dumps(out))
    if a.records:
        from toolkit.errors import os_error
        from toolkit.fsutil import write_atomic

        try:
            write_atomic(a.records, "".join(r.model_dump_json() + "\n" for r in recs))
        except OSError as exc:
            e = os_error(exc, "write --records")
            print(f"error: {e}", file=__import__("sys").stderr)
            raise SystemExit(e.exit_code) from None
    if s.status == "failed":  # no request succeeded: a failed cell, whatever the client saw (README, exit codes)
        print(f"error: {s.reason}", file=__import__("sys").stderr)
        raise SystemExit(1)


def _trace_load(a, params: dict) -> tuple[list[Prompt], CellLoad]:
    """The prompts and load of a trace replay: one prompt per request, sent at its scheduled time."""
    import sys

    from toolkit.errors import ToolkitError
    from toolkit.schema.trace import arrivals, read_trace, trace_prompts

    try:
        trace = read_trace(a.trace)
        times = arrivals(trace, a.speed)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)  # str() carries file:line and the hint
        raise SystemExit(2) from None
    prompts = trace_prompts(trace, "trace", a.output_len)
    load = CellLoad(api=a.api, concurrency=a.concurrency or len(trace), requests=len(trace), output_len=a.output_len,
                    workers=a.workers or 1, request_params=params, arrivals=tuple(times), output_from_prompt=True)
    return prompts, load


if __name__ == "__main__":
    main()
