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
import random
import time
from typing import Callable

from toolkit.bench.client import PATHS, Api, build_body, make_pool, send_one
from toolkit.schema.records import Prompt, RequestRecord
from toolkit.errors import ToolFailure

# What one worker carries with its timing intact (docs/loadgen.md: measured capacity is several times
# this), and what a GPU server streams per request at most (a 4 ms token).
CHUNKS_PER_WORKER = 25_000
CHUNKS_PER_STREAM = 250


class CellFailed(ToolFailure):
    """The server died (or stopped answering) during a cell. `.records` holds what was measured."""

    def __init__(self, message: str, records: list[RequestRecord], hint: str | None = None):
        super().__init__(message, hint=hint)
        self.records = records


def run(coro):
    """Run a coroutine on uvloop when installed (less client CPU per chunk), else asyncio
    (TOOLKIT_EVENT_LOOP=asyncio forces the standard loop)."""
    if os.environ.get("TOOLKIT_EVENT_LOOP") != "asyncio":
        try:
            import uvloop

            return uvloop.run(coro)
        except ImportError:
            pass
    return asyncio.run(coro)


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


def item(prompts: list[Prompt], i: int, warmup: bool) -> Prompt:
    """Request i of a phase: the same prompt in every arm and whichever process sends it (warmup
    requests are taken from the end of the list)."""
    return prompts[-(i % len(prompts)) - 1] if warmup else prompts[i % len(prompts)]


def schedule(rate: float, seed: int):
    """The open-loop arrival times (seconds after the start): the seeded Poisson process."""
    rng = random.Random(seed)
    at = 0.0
    while True:
        at += rng.expovariate(rate)
        yield at


class Share:
    """One process's part of a cell: `slots` requests in flight at most, the next request index from
    `take(limit)` (a counter shared by every process of the cell; None when the phase is used up)."""

    def __init__(self, base_url: str, api: Api, prompts: list[Prompt], *, slots: int, take: Callable,
                 t0: float, concurrency: int, output_len: int = 128, temperature: float = 0.0,
                 request_params: dict | None = None, model: str | None = None, arm: str = "", domain: str = "",
                 repeat: int = 0, read_timeout_s: float = 300.0,
                 on_record: Callable[[RequestRecord], None] | None = None,
                 on_error: Callable[[RequestRecord], object] | None = None):
        self.api, self.prompts, self.slots, self.take, self.t0 = api, prompts, slots, take, t0
        self.concurrency, self.arm, self.domain, self.repeat = concurrency, arm, domain, repeat
        self.on_record, self.on_error = on_record, on_error
        self.pool, prefix = make_pool(base_url, read_timeout_s)
        self.url = prefix + PATHS[api]
        self.failure: list[BaseException] = []
        self.records: list[RequestRecord] = []
        self._bodies: dict[str, bytes] = {}
        self._body_args = dict(model=model, output_len=output_len, temperature=temperature,
                               request_params=request_params)

    def body(self, p: Prompt) -> bytes:
        b = self._bodies.get(p.id)
        if b is None:
            b = self._bodies[p.id] = json.dumps(build_body(self.api, p, **self._body_args)).encode()
        return b

    async def one(self, p: Prompt, is_warmup: bool, scheduled: float | None = None) -> None:
        # every field with a default_factory given: pydantic would otherwise inspect the factory's
        # signature per record (1.4 ms a record, more than its chunks cost; docs/loadgen.md, profile)
        rec = RequestRecord.model_construct(arm=self.arm, domain=self.domain, concurrency=self.concurrency,
                                            repeat=self.repeat, prompt_id=p.id, warmup=is_warmup, send_s=0.0,
                                            lag_ms=None, chunk_ms=[], chunk_tokens=[])
        await send_one(self.pool, self.url, self.api, self.body(p), rec, self.t0)
        if scheduled is not None:  # open loop: how late it left, from the send time itself
            rec.lag_ms = (self.t0 + rec.send_s - scheduled) * 1000.0
        self.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)
        if rec.error is not None and self.on_error is not None and not self.failure:
            waiting = self.on_error(rec)  # this slot goes on only once the server is known alive
            if waiting is not None:
                await waiting

    async def closed(self, n: int | None, is_warmup: bool, until: float | None) -> None:
        """Keep `slots` requests in flight until the shared counter reaches n (or `until` passes)."""
        async def slot() -> None:
            while not self.failure:
                if until is not None and time.perf_counter() >= until:
                    return
                i = self.take(n)
                if i is None:
                    return
                await self.one(item(self.prompts, i, is_warmup), is_warmup)

        await asyncio.gather(*(slot() for _ in range(self.slots)))

    async def open_loop(self, rate: float, seed: int, n: int | None, until: float | None, start: float,
                        stride: int = 1, offset: int = 0) -> None:
        """Send arrival i of the seeded schedule (every `stride`-th from `offset`) at start + its time."""
        sem = asyncio.Semaphore(self.slots)
        tasks = []
        for i, at in enumerate(schedule(rate, seed)):
            if self.failure or (n is not None and i >= n) or (until is not None and start + at >= until):
                break
            if i % stride != offset:
                continue
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)

            async def timed(p=item(self.prompts, i, False), scheduled=start + at) -> None:
                async with sem:
                    await self.one(p, False, scheduled)

            tasks.append(asyncio.ensure_future(timed()))
        await asyncio.gather(*tasks)


class Counter:
    """Request indices of a phase, for one process: take(limit) -> the next index, or None once
    `limit` is reached (toolkit.bench.workers.SharedCounter is the same, shared by processes)."""

    def __init__(self) -> None:
        self.i = 0

    def reset(self) -> None:
        self.i = 0

    def __call__(self, limit: int | None) -> int | None:
        if limit is not None and self.i >= limit:
            return None
        self.i += 1
        return self.i - 1


async def run_cell(base_url: str, api: Api, prompts: list[Prompt], *, concurrency: int, requests: int | None = None,
                   duration_s: float | None = None, warmup: int = 0, output_len: int = 128,
                   temperature: float = 0.0, request_params: dict | None = None, model: str | None = None,
                   arm: str = "", domain: str = "", repeat: int = 0, rate: float | None = None, seed: int = 0,
                   on_record: Callable[[RequestRecord], None] | None = None,
                   check_alive: Callable[[], None] | None = None, read_timeout_s: float = 300.0,
                   workers: int | None = None) -> list[RequestRecord]:
    """Run one cell; returns warmup + measured records in completion order.

    check_alive: called every 0.5 s and after each failed request; when it raises (e.g. the
    launcher's check_alive: the server exited), the cell stops and CellFailed carries the records.
    workers: processes to spread the load over (None: auto_workers; 1: this event loop only).
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

        return await run_parallel(base_url, api, prompts, n_workers, plan, opts, on_record, check_alive)
    return await _run_local(base_url, api, prompts, plan, opts, on_record, check_alive)


async def _run_local(base_url, api, prompts, plan, opts, on_record, check_alive) -> list[RequestRecord]:
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
                await _until_failure(share.closed(plan["warmup"], True, None), failure)
            if not failure:
                take.reset()  # the measured phase counts from request 0
                until = time.perf_counter() + plan["duration_s"] if plan["duration_s"] is not None else None
                if plan["rate"]:
                    work = share.open_loop(plan["rate"], plan["seed"], plan["requests"], until, time.perf_counter())
                else:
                    work = share.closed(plan["requests"], False, until)
                await _until_failure(work, failure)
    finally:
        if dog is not None:
            dog.cancel()
    if failure:
        raise cell_failed(failure[0], share.records, opts, plan)
    return share.records


def cell_failed(exc: ToolFailure, records: list[RequestRecord], opts: dict, plan: dict) -> CellFailed:
    return CellFailed(f"cell {opts['arm']}/{opts['domain']}/c{plan['concurrency']} failed: {exc.message}", records,
                      hint=exc.hint)


async def _until_failure(work, failure: list) -> None:
    """Await `work`, but cancel it as soon as a failure is recorded (a dead server must not hang a cell)."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.wait({task}, timeout=0.25)
        if failure and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            return
    task.result()


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
    ap.add_argument("--model", default="m")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes to spread the load over (default: enough for the expected chunk rate, "
                         "one when it is small)")
    ap.add_argument("--usage", action="store_true",
                    help="ask for per-chunk usage (stream_options), as the matrix runner does; default: a "
                         "plain body, the reference client's")
    ap.add_argument("--records", help="also write every record (JSON lines) to this file")
    a = ap.parse_args(argv)
    prompts = [Prompt(id="p0", domain="cli", prompt=a.prompt)]
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
