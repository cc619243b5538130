"""One process's part of a cell, shared by the cell loop (toolkit.loadgen.cell, one process) and
its worker processes (toolkit.loadgen.workers): the event loop, which prompt request i sends, the seeded
open-loop schedule, the request slots of one process, and how a cell fails. Both import this module,
never each other's internals (loadgen starts workers; workers run these parts).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Callable, Iterator

from toolkit.errors import ToolFailure
from toolkit.loadgen.client import PATHS, build_body, make_pool, send_one
from toolkit.loadgen.load import CellLoad
from toolkit.schema.records import Prompt, RequestRecord
from toolkit.settings import settings


class CellFailed(ToolFailure):
    """The server died (or stopped answering) during a cell. `.records` holds what was measured."""

    def __init__(self, message: str, records: list[RequestRecord], hint: str | None = None):
        super().__init__(message, hint=hint)
        self.records = records


def run(coro):
    """Run a coroutine on uvloop when installed (less client CPU per chunk), else asyncio
    (the setting `event_loop`, TOOLKIT_EVENT_LOOP=asyncio, forces the standard loop)."""
    if settings().event_loop != "asyncio":
        try:
            import uvloop

            return uvloop.run(coro)
        except ImportError:
            pass
    return asyncio.run(coro)


def item(prompts: list[Prompt], i: int, warmup: bool) -> Prompt:
    """Request i of a phase: the same prompt in every arm and whichever process sends it (warmup
    requests are taken from the end of the list)."""
    return prompts[-(i % len(prompts)) - 1] if warmup else prompts[i % len(prompts)]


def gaps(rate: float, seed: int, process: str = "poisson", burstiness: float = 1.0) -> Iterator[float]:
    """The seeded gaps between open-loop arrivals (seconds), mean 1/rate whatever the process. poisson:
    exponential; gamma: gamma(shape=B, scale=1/(rate*B)) as vLLM's --burstiness B (coefficient of variation
    1/sqrt(B): B=1 is Poisson, lower is burstier); constant: 1/rate each. tests/loadgen/test_arrival.py
    checks the distributions (KS test) and the dispersion."""
    if process == "constant":
        while True:
            yield 1.0 / rate
    rng = random.Random(seed)
    if process == "gamma":
        while True:
            yield rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
    if process != "poisson":
        raise ValueError(f"unknown arrival process {process!r} (poisson, gamma, constant)")
    while True:
        yield rng.expovariate(rate)


def schedule(rate: float, seed: int, process: str = "poisson", burstiness: float = 1.0) -> Iterator[float]:
    """The open-loop arrival times (seconds after the start): the running sum of `gaps`, first arrival
    one gap after the start (the one schedule concept: every process of a cell walks the same one)."""
    at = 0.0
    for gap in gaps(rate, seed, process, burstiness):
        at += gap
        yield at


def load_schedule(load: CellLoad) -> Iterator[float]:
    """An open-loop cell's arrival times, from its CellLoad: a trace's (`arrivals`), else the seeded process
    (rate, arrival process, burstiness, seed)."""
    if load.arrivals is not None:
        return iter(load.arrivals)
    return schedule(load.rate, load.seed, load.arrival, load.burstiness)


class Share:
    """One process's part of a cell: `slots` requests in flight at most, the next request index from
    `take(limit)` (a counter shared by every process of the cell; None when the phase is used up)."""

    def __init__(self, base_url: str, load: CellLoad, prompts: list[Prompt], *, slots: int, take: Callable,
                 t0: float, model: str | None = None, arm: str = "", domain: str = "", repeat: int = 0,
                 read_timeout_s: float = 300.0, on_record: Callable[[RequestRecord], None] | None = None,
                 on_error: Callable[[RequestRecord], object] | None = None):
        self.load, self.api, self.prompts, self.slots, self.take, self.t0 = load, load.api, prompts, slots, take, t0
        self.concurrency, self.arm, self.domain, self.repeat = load.concurrency, arm, domain, repeat
        self.model = model
        self.on_record, self.on_error = on_record, on_error
        self.pool, prefix = make_pool(base_url, read_timeout_s)
        self.url = prefix + PATHS[load.api]
        self.failure: list[BaseException] = []
        self.records: list[RequestRecord] = []
        self._bodies: dict[str, bytes] = {}

    def body(self, p: Prompt) -> bytes:
        b = self._bodies.get(p.id)
        if b is None:
            b = self._bodies[p.id] = json.dumps(build_body(self.load, p, self.model)).encode()
        return b

    async def one(self, p: Prompt, is_warmup: bool, scheduled: float | None = None) -> None:
        # every field with a default_factory given: pydantic would otherwise inspect the factory's
        # signature per record (1.4 ms a record, more than its chunks cost; docs/lab/loadgen.md, profile)
        rec = RequestRecord.model_construct(arm=self.arm, domain=self.domain, concurrency=self.concurrency,
                                            repeat=self.repeat, prompt_id=p.id, warmup=is_warmup, send_s=0.0,
                                            lag_ms=None, chunk_ms=[], chunk_tokens=[], rate=self.load.rate)
        await send_one(self.pool, self.url, self.api, self.body(p), rec, self.t0)
        if scheduled is not None:  # open loop: how late it left, from the send time itself
            rec.lag_ms = round((self.t0 + rec.send_s - scheduled) * 1000.0, 3)
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

    async def open_loop(self, n: int | None, until: float | None, start: float, stride: int = 1,
                        offset: int = 0) -> None:
        """Send arrival i of the cell's schedule (load_schedule: the seeded process, or a trace's times; every
        `stride`-th from `offset`) at start + its time."""
        sem = asyncio.Semaphore(self.slots)
        tasks = []
        for i, at in enumerate(load_schedule(self.load)):
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
    `limit` is reached (toolkit.loadgen.workers.SharedCounter is the same, shared by processes)."""

    def __init__(self) -> None:
        self.i = 0

    def reset(self) -> None:
        self.i = 0

    def __call__(self, limit: int | None) -> int | None:
        if limit is not None and self.i >= limit:
            return None
        self.i += 1
        return self.i - 1


def cell_failed(exc: ToolFailure, records: list[RequestRecord], who: dict, concurrency: int) -> CellFailed:
    """The cell's failure, named by its arm and domain (`who`: run_cell's identity keywords)."""
    return CellFailed(f"cell {who['arm']}/{who['domain']}/c{concurrency} failed: {exc.message}", records,
                      hint=exc.hint)


async def until_failure(work, failure: list) -> None:
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
