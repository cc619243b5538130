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


def body_for(api: str, max_tokens: int) -> tuple[str, dict]:
    body = {"model": "m", "max_tokens": max_tokens, "stream": True}
    if api == "chat":
        return "/v1/chat/completions", {**body, "messages": [{"role": "user", "content": "hi"}]}
    return "/v1/completions", {**body, "prompt": "hi"}


async def one(session: aiohttp.ClientSession, url: str, body: dict) -> tuple[float | None, list[float]]:
    """One streamed request: (TTFT ms, inter-chunk gaps ms)."""
    t0 = time.perf_counter()
    times = []
    async with session.post(url, json=body) as resp:
        async for line in resp.content:
            if line.startswith(b"data: {"):
                c = (json.loads(line[6:]).get("choices") or [{}])[0]
                if (c.get("delta") or {}).get("content") or c.get("text"):
                    times.append(time.perf_counter())
    ttft = (times[0] - t0) * 1000 if times else None
    return ttft, [(b - a) * 1000 for a, b in zip(times, times[1:])]


async def measure(base_url: str, concurrency: int, requests: int, max_tokens: int = 64,
                  api: str = "chat") -> tuple[list[float], list[float]]:
    path, body = body_for(api, max_tokens)
    ttfts: list[float] = []
    itls: list[float] = []
    left = [requests]

    async def worker(session: aiohttp.ClientSession) -> None:
        while left[0] > 0:
            left[0] -= 1
            ttft, gaps = await one(session, base_url + path, body)
            if ttft is not None:
                ttfts.append(ttft)
                itls.extend(gaps)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return ttfts, itls


if __name__ == "__main__":  # python benchmarks/reference_client.py URL CONCURRENCY REQUESTS MAX_TOKENS
    import statistics
    import sys

    url, c, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    ttft, itl = asyncio.run(measure(url, c, n, m))
    print(json.dumps({"ttft_p50": statistics.median(ttft), "itl_p50": statistics.median(itl) if itl else None,
                      "n": len(ttft)}))
