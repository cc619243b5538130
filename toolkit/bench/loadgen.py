"""The load generator: one cell = one (arm, domain, concurrency, repeat) against a running server.

Closed loop: `concurrency` requests in flight until `requests` are done (or `duration_s` passed).
Open loop: Poisson arrivals at `rate` req/s (seeded), each request sent at its scheduled time
(`lag_ms` records how late the client was). Warmup requests run first, at the same concurrency,
and come back flagged warmup=True.

    records = run(run_cell(url, "chat", prompts, concurrency=16, requests=200, warmup=4, ...))
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Callable

from toolkit.bench.client import PATHS, Api, build_body, make_pool, send_one
from toolkit.schema.records import Prompt, RequestRecord
from toolkit.errors import ToolFailure


class CellFailed(ToolFailure):
    """The server died (or stopped answering) during a cell. `.records` holds what was measured."""

    def __init__(self, message: str, records: list[RequestRecord], hint: str | None = None):
        super().__init__(message, hint=hint)
        self.records = records


def run(coro):
    """Run a coroutine on uvloop when installed (less client CPU per chunk), else asyncio
    (TOOLKIT_EVENT_LOOP=asyncio forces the standard loop)."""
    import os

    if os.environ.get("TOOLKIT_EVENT_LOOP") != "asyncio":
        try:
            import uvloop

            return uvloop.run(coro)
        except ImportError:
            pass
    return asyncio.run(coro)


async def run_cell(base_url: str, api: Api, prompts: list[Prompt], *, concurrency: int, requests: int | None = None,
                   duration_s: float | None = None, warmup: int = 0, output_len: int = 128,
                   temperature: float = 0.0, request_params: dict | None = None, model: str | None = None,
                   arm: str = "", domain: str = "", repeat: int = 0, rate: float | None = None, seed: int = 0,
                   on_record: Callable[[RequestRecord], None] | None = None,
                   check_alive: Callable[[], None] | None = None, read_timeout_s: float = 300.0) -> list[RequestRecord]:
    """Run one cell; returns warmup + measured records in completion order.

    check_alive: called every 0.5 s and after each failed request; when it raises (e.g. the
    launcher's check_alive: the server exited), the cell stops and CellFailed carries the records.
    """
    if not prompts:
        raise ValueError("run_cell needs at least one prompt")
    if (requests is None) == (duration_s is None):
        raise ValueError("give exactly one of requests or duration_s")
    session, prefix = make_pool(base_url, read_timeout_s)
    url = prefix + PATHS[api]
    bodies: dict[str, bytes] = {}

    def body(p: Prompt) -> bytes:
        b = bodies.get(p.id)
        if b is None:
            b = bodies[p.id] = json.dumps(build_body(api, p, model=model, output_len=output_len,
                                                     temperature=temperature, request_params=request_params)).encode()
        return b

    records: list[RequestRecord] = []
    failure: list[BaseException] = []
    t0 = time.perf_counter()

    async def one(p: Prompt, is_warmup: bool, lag_ms: float | None = None) -> None:
        rec = RequestRecord.model_construct(arm=arm, domain=domain, concurrency=concurrency, repeat=repeat,
                                            prompt_id=p.id, warmup=is_warmup, send_s=0.0, lag_ms=lag_ms)
        await send_one(session, url, api, body(p), rec, t0)
        records.append(rec)
        if on_record is not None:
            on_record(rec)
        if rec.error is not None and check_alive is not None and not failure:
            try:
                check_alive()
            except ToolFailure as exc:
                failure.append(exc)

    async def closed(items: list[Prompt] | None, is_warmup: bool, until: float | None) -> None:
        it = iter(items) if items is not None else None
        counter = [0]

        async def worker() -> None:
            while not failure:
                if it is not None:
                    p = next(it, None)
                    if p is None:
                        return
                else:
                    if time.perf_counter() >= until:
                        return
                    p = prompts[counter[0] % len(prompts)]
                    counter[0] += 1
                await one(p, is_warmup)

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async def open_loop(n: int | None, until: float | None) -> None:
        rng = random.Random(seed)
        sem = asyncio.Semaphore(concurrency)
        tasks = []
        start = time.perf_counter()
        at = 0.0
        i = 0
        while not failure and (n is None or i < n):
            at += rng.expovariate(rate)
            if until is not None and start + at >= until:
                break
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            p = prompts[i % len(prompts)]
            i += 1
            scheduled = start + at

            async def timed(p=p, scheduled=scheduled) -> None:
                async with sem:
                    await one(p, False, (time.perf_counter() - scheduled) * 1000.0)

            tasks.append(asyncio.ensure_future(timed()))
        await asyncio.gather(*tasks)

    async def watchdog() -> None:
        while not failure:
            await asyncio.sleep(0.5)
            try:
                check_alive()
            except ToolFailure as exc:
                failure.append(exc)

    dog = asyncio.ensure_future(watchdog()) if check_alive is not None else None
    try:
        async with session:
            if warmup:
                wprompts = [prompts[-(i % len(prompts)) - 1] for i in range(warmup)]
                await _until_failure(closed(wprompts, True, None), failure)
            if not failure:
                until = time.perf_counter() + duration_s if duration_s is not None else None
                items = [prompts[i % len(prompts)] for i in range(requests)] if requests is not None else None
                work = open_loop(requests, until) if rate else closed(items, False, until)
                await _until_failure(work, failure)
    finally:
        if dog is not None:
            dog.cancel()
    if failure:
        exc = failure[0]
        raise CellFailed(f"cell {arm}/{domain}/c{concurrency} failed: {exc.message}", records, hint=exc.hint)
    return records


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

    from toolkit.bench.metrics import summarize

    ap = argparse.ArgumentParser(prog="python -m toolkit.bench.loadgen", description=main.__doc__)
    ap.add_argument("url")
    ap.add_argument("--api", default="chat", choices=sorted(PATHS))
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--prompt", default="hi")
    ap.add_argument("--model", default="m")
    a = ap.parse_args(argv)
    prompts = [Prompt(id="p0", domain="cli", prompt=a.prompt)]
    recs = run(run_cell(a.url, a.api, prompts, concurrency=a.concurrency, requests=a.requests, output_len=a.output_len,
                        model=a.model, request_params={"stream_options": None, "temperature": None}))
    s = summarize(recs, arm="cli", domain="cli", concurrency=a.concurrency, output_len=a.output_len)
    out = s.model_dump(mode="json")
    out["chunks"] = sum(len(r.chunk_ms) for r in recs)
    out["itl_chunk_p50"] = float(__import__("numpy").median(itl_values_chunk(recs))) if out["chunks"] > 1 else None
    print(json.dumps(out))


def itl_values_chunk(recs: list[RequestRecord]) -> list[float]:
    from toolkit.bench.metrics import itl_values

    return itl_values(recs, "chunk")


if __name__ == "__main__":
    main()
