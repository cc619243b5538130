"""The load generator: one cell = one (arm, domain, concurrency, repeat) against a running server.

Closed loop: `concurrency` requests in flight until `requests` are done (or `duration_s` passed).
Open loop: Poisson arrivals at `rate` req/s (seeded), each request sent at its scheduled time
(`lag_ms` records how late the client was). Warmup requests run first, at the same concurrency,
and come back flagged warmup=True.

    records = run(run_cell(url, "chat", prompts, concurrency=16, requests=200, warmup=4, ...))

`workers=N` spreads the cell over N processes (toolkit.bench.workers), each with its own event loop
and connection pool; the default is enough for the cell's expected chunk rate (auto_workers), one
when it is small. Request i of a cell is the same prompt whichever process sends it, so arms stay paired.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from typing import Callable

from toolkit.bench.client import PATHS, Api
from toolkit.bench.share import (  # noqa: F401 (CellFailed, item, schedule: re-exported)
    CellFailed, Counter, Share, cell_failed, item, run, schedule, until_failure)
from toolkit.schema.records import Prompt, RequestRecord
from toolkit.errors import ToolFailure

# What one worker carries with its timing intact (docs/loadgen.md: measured capacity is several times
# this), and what a GPU server streams per request at most (a 4 ms token).
CHUNKS_PER_WORKER = 25_000
CHUNKS_PER_STREAM = 250


def auto_workers(concurrency: int, rate: float | None = None, output_len: int = 128, cpus: int | None = None) -> int:
    """Processes for a cell: its expected chunk rate over CHUNKS_PER_WORKER, one when small, at most
    half the CPUs this process may run on (the rest for the parent and a local server)."""
    expected = concurrency * CHUNKS_PER_STREAM
    if rate:
        expected = min(expected, rate * output_len)
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(math.ceil(expected / CHUNKS_PER_WORKER), cpus // 2, concurrency))


def resolve_workers(workers: int | None, concurrency: int, rate: float | None = None, output_len: int = 128) -> int:
    """The processes a cell runs on: `workers` as asked (never more than the concurrency), else auto_workers."""
    return auto_workers(concurrency, rate, output_len) if workers is None else max(1, min(workers, concurrency))


async def run_cell(base_url: str, api: Api, prompts: list[Prompt], *, concurrency: int, requests: int | None = None,
                   duration_s: float | None = None, warmup: int = 0, output_len: int = 128,
                   temperature: float = 0.0, request_params: dict | None = None, model: str | None = None,
                   arm: str = "", domain: str = "", repeat: int = 0, rate: float | None = None, seed: int = 0,
                   on_record: Callable[[RequestRecord], None] | None = None,
                   check_alive: Callable[[], None] | None = None, read_timeout_s: float = 300.0,
                   workers: int | None = None, on_measure: Callable[[], None] | None = None) -> list[RequestRecord]:
    """Run one cell; returns warmup + measured records in completion order.

    check_alive: called every 0.5 s and after each failed request; when it raises (e.g. the
    launcher's check_alive: the server exited), the cell stops and CellFailed carries the records.
    workers: processes to spread the load over (None: auto_workers; 1: this event loop only).
    on_measure: called once between warmup and the measured phase, with nothing in flight (the runner reads
    the server's counters there: toolkit.bench.acceptance).
    """
    if not prompts:
        raise ValueError("run_cell needs at least one prompt")
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests or duration_s")
    n_workers = resolve_workers(workers, concurrency, rate, output_len)
    opts = dict(output_len=output_len, temperature=temperature, request_params=request_params, model=model,
                arm=arm, domain=domain, repeat=repeat, read_timeout_s=read_timeout_s)
    plan = dict(concurrency=concurrency, requests=requests, duration_s=duration_s, warmup=warmup, rate=rate, seed=seed)
    if n_workers > 1:
        from toolkit.bench.workers import run_parallel

        return await run_parallel(base_url, api, prompts, n_workers, plan, opts, on_record, check_alive, on_measure)
    return await _run_local(base_url, api, prompts, plan, opts, on_record, check_alive, on_measure)


async def _run_local(base_url, api, prompts, plan, opts, on_record, check_alive, on_measure) -> list[RequestRecord]:
    take = Counter()
    share = Share(base_url, api, prompts, slots=plan["concurrency"], take=take, t0=time.perf_counter(),
                  concurrency=plan["concurrency"], on_record=on_record, **opts)
    failure = share.failure

    def alive() -> None:
        try:
            check_alive()
        except ToolFailure as exc:
            failure.append(exc)

    if check_alive is not None:
        share.on_error = lambda rec: alive()

    async def watchdog() -> None:
        while not failure:
            await asyncio.sleep(0.5)
            alive()

    dog = asyncio.ensure_future(watchdog()) if check_alive is not None else None
    try:
        async with share.pool:
            if plan["warmup"]:
                await until_failure(share.closed(plan["warmup"], True, None), failure)
            if not failure:
                take.reset()  # the measured phase counts from request 0
                if on_measure is not None:
                    on_measure()
                until = time.perf_counter() + plan["duration_s"] if plan["duration_s"] is not None else None
                if plan["rate"]:
                    work = share.open_loop(plan["rate"], plan["seed"], plan["requests"], until, time.perf_counter())
                else:
                    work = share.closed(plan["requests"], False, until)
                await until_failure(work, failure)
    finally:
        if dog is not None:
            dog.cancel()
    if failure:
        raise cell_failed(failure[0], share.records, opts, plan)
    return share.records


def main(argv: list[str] | None = None) -> None:
    """`python -m toolkit.bench.loadgen URL`: one closed-loop cell with a fixed prompt; JSON summary on stdout."""
    import argparse

    from toolkit.bench.metrics import itl_values, summarize

    ap = argparse.ArgumentParser(prog="python -m toolkit.bench.loadgen", description=main.__doc__)
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
    a = ap.parse_args(argv)
    prompts = ([Prompt(id="p0", domain="cli", prompt=a.prompt)] if a.prompts <= 1 else
               [Prompt(id=f"p{i}", domain="cli", prompt=f"{a.prompt} #{i}") for i in range(a.prompts)])
    params = {} if a.usage else {"stream_options": None, "temperature": None}
    recs = run(run_cell(a.url, a.api, prompts, concurrency=a.concurrency, requests=a.requests, output_len=a.output_len,
                        model=a.model, request_params=params, workers=a.workers))
    s = summarize(recs, arm="cli", domain="cli", concurrency=a.concurrency, output_len=a.output_len)
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
