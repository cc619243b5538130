"""The load generator against guidellm's mock server (third party): timing agrees with the minimal
reference client, HTTP 500s are counted as errors without stopping the cell, open-loop arrivals are
seeded. (The mock's --max-concurrent-requests does not limit *streamed* requests in guidellm 0.8.1:
its semaphore is released when the handler returns the stream, before the TTFT sleep; measured, see
docs/loadgen.md. Queueing behind a real server limit is tested against transformers serve.)"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from benchmarks.reference_client import measure
from tests.helpers import BusyHost, mock_server
from toolkit.loadgen import CellLoad, run, run_cell
from toolkit.loadgen.summary import itl_values, summarize
from toolkit.schema.records import Prompt

pytestmark = pytest.mark.slow
PROMPTS = [Prompt(id=f"p{i}", domain="d", prompt=f"hello {i}") for i in range(8)]


def ours(url, c, n, prompts=PROMPTS, **kw):
    recs = run(run_cell(url, CellLoad(api="chat", concurrency=c, requests=n, output_len=32, **kw), prompts, model="m"))
    assert all(r.error is None for r in recs), [r.error for r in recs if r.error][:3]
    return [r.ttft_ms for r in recs], itl_values(recs, "chunk"), recs


SAME = [Prompt(id="hi", domain="d", prompt="hi")]  # the reference's prompt: the mock's work depends on it


def test_ttft_agrees_with_reference_client(mock):
    """Request by request, alternating between the reference client and the load generator's client,
    both on warm connections: the mock's own drift (~1-2 ms between runs on 2 cores) cancels out."""
    import json
    import time

    import aiohttp

    from benchmarks.reference_client import body_for, one
    from toolkit.loadgen.client import make_pool, send_one
    from toolkit.schema.records import RequestRecord

    path, ref_body = body_for("chat", 32)
    our_body = json.dumps(ref_body).encode()  # the very same request: the mock's work depends on the body

    async def pairs():
        ref, our = [], []
        pool, _ = make_pool(mock.base_url)
        async with aiohttp.ClientSession() as rs, pool:
            for i in range(62):
                rec = RequestRecord.model_construct(arm="a", domain="d", concurrency=1, prompt_id="hi", send_s=0.0)
                if i % 2:  # alternate who goes first: the second of a pair may wait on the first's tail
                    ttft, _ = await one(rs, mock.base_url + path, ref_body)
                    await send_one(pool, path, "chat", our_body, rec, time.perf_counter())
                else:
                    await send_one(pool, path, "chat", our_body, rec, time.perf_counter())
                    ttft, _ = await one(rs, mock.base_url + path, ref_body)
                assert rec.error is None and rec.output_tokens == 32
                if i >= 2:  # connections warm
                    ref.append(ttft)
                    our.append(rec.ttft_ms)
        return ref, our

    with BusyHost() as host:
        ref, our = asyncio.run(pairs())
    busy = host.busy
    # the mock's TTFT is bimodal (~23 / ~29 ms), so medians of the two samples can flip between modes;
    # the median of the paired differences is the robust figure
    diff = statistics.median(o - r for o, r in zip(our, ref))
    why = (diff, statistics.median(our), statistics.median(ref), busy and busy.message)
    print(f"TTFT paired difference {diff:+.3f} ms (ours {statistics.median(our):.2f}, ref {statistics.median(ref):.2f})"
          f"; {busy.message if busy else 'host not busy'}")
    if busy is None:
        assert abs(diff) < 1.0, why
    else:
        # other load on the host, measured while the pairs ran: the reference stamps a line when its Python code
        # gets to it, after any wait for a CPU; ours keeps the kernel's receive time (SO_TIMESTAMPNS,
        # docs/loadgen.md), so the reference's TTFT alone takes that wait (-0.5 to -2.8 ms measured: ours earlier,
        # the more so the busier; two busy loops on a loaded 2-core box broke the 1 ms bound). Ours is still never
        # later than the reference, nor earlier than the mock's own 20 ms to the first token
        assert diff < 1.0 and statistics.median(our) >= 20.0, why


@pytest.mark.parametrize("c", [1, 4])
def test_itl_agrees_with_reference_client(mock, c):
    """Both clients at once in one event loop, c requests in flight each, on the same server."""
    async def both():
        return await asyncio.gather(measure(mock.base_url, c, 24 * c, 32),
                                    run_cell(mock.base_url, CellLoad(api="chat", concurrency=c, requests=24 * c, output_len=32),
                                             SAME, model="m"))

    with BusyHost() as host:
        (_, ref_itl), recs = asyncio.run(both())
    busy = host.busy
    assert all(r.error is None and r.output_tokens == 32 and r.finish_reason == "stop" for r in recs)
    ours, ref = statistics.median(itl_values(recs, "chunk")), statistics.median(ref_itl)
    why = (ours, ref, busy and busy.message)
    # on a busy host (measured over the cell) the reference reads lines late, several at once, and stamps them
    # then: near-0 gaps pull its median down, while ours keeps the kernel's receive times (ours +0.01 to +0.19 ms
    # over it under two busy loops on a loaded 2-core box, once +1.15). So ours may exceed the reference by more
    # only there, never fall below it, nor below the mock's own 2 ms between tokens
    assert abs(ours - ref) < 1.0 or (busy is not None and ours > ref and ours >= 2.0), why


def test_http_500_counted_without_stopping_the_cell(tmp_path):
    srv = mock_server(tmp_path, "--fail-after-requests", "5", ttft_ms=5, itl_ms=1, tokens=8)
    try:
        recs = run(run_cell(srv.base_url, CellLoad(api="completions", concurrency=2, requests=12, output_len=8), PROMPTS,
                                model="m"))
    finally:
        srv.stop()
    assert len(recs) == 12
    bad = [r for r in recs if r.error]
    assert len(bad) == 7 and all(r.status == 500 and r.error.startswith("HTTP 500") for r in bad)
    s = summarize(recs, arm="a", domain="d", concurrency=2, output_len=8)
    assert s.n_errors == 7 and s.error_rate == pytest.approx(7 / 12) and s.metrics["ttft_ms"].n == 5


def test_open_loop_poisson_is_seeded(mock):
    def sends(seed):
        recs = run(run_cell(mock.base_url, CellLoad(api="completions", concurrency=64, requests=20, rate=40.0,
                                     seed=seed, output_len=8), PROMPTS, model="m"))
        assert all(r.error is None and r.lag_ms is not None for r in recs)
        return sorted(r.send_s for r in recs), recs

    with BusyHost() as host:
        a, ra = sends(1)
        b, rb = sends(1)
    busy = host.busy
    c, _ = sends(2)
    start_a, start_b, start_c = a[0], b[0], c[0]
    da = [x - start_a for x in a]
    db = [x - start_b for x in b]
    dc = [x - start_c for x in c]
    # same seed: same schedule (what was scheduled: send - lag, on each cell's own clock)
    scheduled = [sorted(r.send_s - r.lag_ms / 1000 for r in rs) for rs in (ra, rb)]
    assert max(abs((x - scheduled[0][0]) - (y - scheduled[1][0])) for x, y in zip(*scheduled)) < 1e-5
    if busy is None:  # and sent then: on a busy host a request can leave late (the lag's tail: 60 ms seen)
        assert max(abs(x - y) for x, y in zip(da, db)) < 0.05, busy
    assert max(abs(x - y) for x, y in zip(da, dc)) > 0.05          # another seed: another one
    assert statistics.median(r.lag_ms for r in ra) < 20
