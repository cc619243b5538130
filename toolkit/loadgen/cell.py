"""The cell loop: one cell = one (arm, domain, concurrency, repeat) against a running server.

Closed loop: `concurrency` requests in flight until `requests` are done (or `duration_s` passed).
Open loop: Poisson arrivals at `rate` req/s (seeded), or a trace's send times (`arrivals`), each request
sent at its scheduled time (`lag_ms` records how late the client was). Warmup requests run first, at the
same concurrency, and come back flagged warmup=True. What the cell sends is its CellLoad (toolkit.loadgen.load).

    records = run(run_cell(url, CellLoad(api="chat", concurrency=16, requests=200, warmup=4), prompts, ...))

`load.workers=N` spreads the cell over N processes (toolkit.loadgen.workers), each with its own event loop
and connection pool; the default is enough for the cell's expected chunk rate (auto_workers), one
when it is small. Request i of a cell is the same prompt whichever process sends it, so arms stay paired.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from toolkit.errors import ToolFailure
from toolkit.loadgen.load import CellLoad
from toolkit.loadgen.share import Counter, Share, cell_failed, until_failure
from toolkit.schema.records import Prompt, RequestRecord


async def run_cell(base_url: str, load: CellLoad, prompts: list[Prompt], *, model: str | None = None,
                   arm: str = "", domain: str = "", repeat: int = 0,
                   on_record: Callable[[RequestRecord], None] | None = None,
                   check_alive: Callable[[], None] | None = None, read_timeout_s: float = 300.0,
                   on_measure: Callable[[], None] | None = None) -> list[RequestRecord]:
    """Run one cell; returns warmup + measured records in completion order.

    load: what the cell sends (api, concurrency, sizes, sampling, requests or duration, warmup, rate, workers).
    arm, domain, repeat: what the records say they belong to. model: the `model` of /v1 bodies.
    check_alive: called every 0.5 s and after each failed request; when it raises (e.g. the
    launcher's check_alive: the server exited), the cell stops and CellFailed carries the records.
    on_measure: called once between warmup and the measured phase, with nothing in flight (the runner reads
    the server's counters there: toolkit.bench.acceptance).
    """
    if not prompts:
        raise ValueError("run_cell needs at least one prompt")
    who = dict(model=model, arm=arm, domain=domain, repeat=repeat, read_timeout_s=read_timeout_s)
    n_workers = load.processes
    if n_workers > 1:
        from toolkit.loadgen.workers import run_parallel

        return await run_parallel(base_url, load, prompts, n_workers, who, on_record, check_alive, on_measure)
    return await _run_local(base_url, load, prompts, who, on_record, check_alive, on_measure)


async def _run_local(base_url: str, load: CellLoad, prompts: list[Prompt], who: dict, on_record, check_alive,
                     on_measure) -> list[RequestRecord]:
    take = Counter()
    share = Share(base_url, load, prompts, slots=load.concurrency, take=take, t0=time.perf_counter(),
                  on_record=on_record, **who)
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
            if load.warmup:
                await until_failure(share.closed(load.warmup, True, None), failure)
            if not failure:
                take.reset()  # the measured phase counts from request 0
                if on_measure is not None:
                    on_measure()
                until = time.perf_counter() + load.duration_s if load.duration_s is not None else None
                if load.rate or load.arrivals is not None:
                    work = share.open_loop(load.requests, until, time.perf_counter())
                else:
                    work = share.closed(load.requests, False, until)
                await until_failure(work, failure)
    finally:
        if dog is not None:
            dog.cancel()
    if failure:
        raise cell_failed(failure[0], share.records, who, load.concurrency)
    return share.records
