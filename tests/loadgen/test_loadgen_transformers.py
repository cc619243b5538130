"""The load generator against the real embedded engine (`transformers serve`, the dummy model):
completions and chat stream, usage is counted, and the two arms really differ in what the server
does (prompt lookup takes fewer decoding steps for the same tokens)."""

from __future__ import annotations

import re

import pytest

from toolkit.loadgen import CellLoad, run, run_cell
from toolkit.loadgen.summary import summarize
from toolkit.schema.records import Prompt

pytestmark = pytest.mark.slow

PROMPTS = [Prompt(id=f"p{i}", domain="code", prompt=t) for i, t in enumerate([
    "def f(x): return x + 1 def f(x): return x + 1 def f(x): return x + 1",
    "the model server request token the model server request token the model server request token",
    "explain the speculative decoding latency throughput of a server",
])]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_streams_with_usage(tserver, local_env, api):
    params = local_env.model.request_params["baseline"]
    load = CellLoad(api=api, concurrency=2, requests=4, warmup=1, output_len=24, request_params=params)
    recs = run(run_cell(tserver.base_url, load, PROMPTS, model=tserver.model, arm="baseline", domain="code"))
    assert [r.warmup for r in recs].count(True) == 1 and len(recs) == 5
    for r in recs:
        assert r.error is None, r.error
        assert r.status == 200
        assert 0 < r.ttft_ms <= r.e2e_ms
        assert r.input_tokens and r.input_tokens > 0  # from the usage chunk
        assert 0 < r.output_tokens <= 24
        assert len(r.chunk_ms) >= 1 and r.chunk_ms == sorted(r.chunk_ms)
        assert r.finish_reason in ("length", "stop")
        if r.finish_reason == "length":
            assert r.output_tokens == 24
    s = summarize(recs, arm="baseline", domain="code", concurrency=2, output_len=24)
    assert s.n_requests == 4 and s.n_errors == 0 and s.metrics["ttft_ms"].n == 4
    assert s.metrics["output_tok_s"].mean > 0


def _steps(log: str) -> list[tuple[int, int]]:
    return [(int(t), int(s)) for t, s in re.findall(r"toolkit-serve: request done tokens=(\d+) steps=(\d+)", log)]


def test_arms_differ_in_what_the_server_does(tserver, local_env):
    """Same prompts, greedy: both arms emit the same number of tokens; the n-gram arm (prompt lookup)
    verifies several drafted tokens per step, so the server takes fewer decoding steps."""
    seen = {}
    for arm in ("baseline", "ngram"):
        before = len(_steps(tserver.log_path.read_text()))
        load = CellLoad(api="completions", concurrency=1, requests=2, output_len=128,
                        request_params=local_env.model.request_params[arm])
        recs = run(run_cell(tserver.base_url, load, PROMPTS[:2], model=tserver.model, arm=arm))
        assert all(r.error is None for r in recs)
        steps = _steps(tserver.log_path.read_text())[before:]
        assert len(steps) == 2
        seen[arm] = (recs, steps)
    base_recs, base_steps = seen["baseline"]
    ngram_recs, ngram_steps = seen["ngram"]
    assert [r.output_tokens for r in base_recs] == [r.output_tokens for r in ngram_recs] == [t for t, _ in base_steps]
    assert all(t == s for t, s in base_steps)            # one token per step without speculation
    assert sum(s for _, s in ngram_steps) < 0.95 * sum(t for t, _ in ngram_steps)  # accepted drafts


def test_server_limit_shows_as_queueing_in_ttft(tserver, local_env):
    """transformers serve without continuous batching runs one request at a time (info says 1): at
    concurrency 4 a request waits for those ahead of it, so TTFT grows by whole generations while the
    time between tokens does not."""
    assert tserver.info().max_running_requests == 1
    params = local_env.model.request_params["baseline"]

    def cell(c):
        load = CellLoad(api="completions", concurrency=c, requests=4 * c, warmup=c, output_len=32,
                        request_params=params)
        recs = run(run_cell(tserver.base_url, load, PROMPTS[:1], model=tserver.model))
        return summarize(recs, arm="baseline", domain="code", concurrency=c, output_len=32), recs

    one, _ = cell(1)
    log_at = len(tserver.log_path.read_text())
    four, recs = cell(4)
    assert one.n_errors == four.n_errors == 0
    measured = [r for r in recs if not r.warmup]
    # one generation at a time, read from the server's own clock: each request's generating window (its first
    # generated token to its end, `first=` and `end=` on the server's line) does not overlap another's. A client's
    # read times cannot show this on a busy machine (in one CI run the last chunks of 3 requests reached the
    # client together, their windows overlapping by the client's reads alone)
    win = sorted((float(a), float(b)) for a, b in re.findall(
        r"request done tokens=\d+ steps=\d+ first=([\d.]+) end=([\d.]+)", tserver.log_path.read_text()[log_at:]))
    assert len(win) == len(recs), (len(win), len(recs))
    assert all(b1 <= a2 + 0.002 for (_, b1), (a2, _) in zip(win, win[1:])), win
    # so a request waits for the generations ahead of it: its TTFT (the client's, which a busy client can only
    # lengthen) is several of the server's own generation times, ~3 in steady state
    gen_ms = sorted(1000.0 * (b - a) for a, b in win)[len(win) // 2]
    assert four.metrics["ttft_ms"].p50 > 1.5 * gen_ms, (four.metrics["ttft_ms"], gen_ms)
    # the client held 4 requests open while the server ran one: when a measured request was sent, the other
    # slots' requests were still open (queued at the server), the last sends of the drain aside. Counted from
    # the records' own send and end times, so a busy machine (another test process beside it, which once
    # brought the cell's E2E-over-span figure, effective_concurrency, to 2.4) cannot move it.
    spans = [(r.send_s, r.send_s + r.e2e_ms / 1000.0) for r in recs]
    open_at_send = sorted(sum(s <= r.send_s < e for s, e in spans) for r in measured)
    assert open_at_send[len(open_at_send) // 2] == 4, open_at_send
    assert four.effective_concurrency > 1.5, four.effective_concurrency  # queueing shows in the E2E sums too
