"""The minimal reference client: raw aiohttp, line by line, a timestamp per `data:` line with content.
It is the "truth" the load generator's timing is compared with (same server, same run). Kept small
on purpose so it is easy to audit. TTFT = first content line; ITL = gaps between content lines.

    ttft_ms, itl_ms = asyncio.run(measure("http://127.0.0.1:8000", concurrency=16, requests=200))
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp


async def measure(base_url: str, concurrency: int, requests: int, max_tokens: int = 64,
                  api: str = "chat") -> tuple[list[float], list[float]]:
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    body = {"model": "m", "max_tokens": max_tokens, "stream": True}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if api == "chat" else {"prompt": "hi"})
    ttfts: list[float] = []
    itls: list[float] = []
    left = [requests]

    async def worker(session: aiohttp.ClientSession) -> None:
        while left[0] > 0:
            left[0] -= 1
            t0 = time.perf_counter()
            times = []
            async with session.post(base_url + path, json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        choices = json.loads(line[6:]).get("choices") or [{}]
                        c = choices[0]
                        if (c.get("delta") or {}).get("content") or c.get("text"):
                            times.append(time.perf_counter())
            if times:
                ttfts.append((times[0] - t0) * 1000)
                itls.extend((b - a) * 1000 for a, b in zip(times, times[1:]))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return ttfts, itls
