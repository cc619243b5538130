"""The load generator against the real embedded engine (`transformers serve`, the dummy model):
completions and chat stream, usage is counted, and the two arms really differ in what the server
does (prompt lookup takes fewer decoding steps for the same tokens)."""

from __future__ import annotations

import re

import pytest

from toolkit.bench.loadgen import run, run_cell
from toolkit.bench.metrics import summarize
from toolkit.bench.records import Prompt

pytestmark = pytest.mark.slow

PROMPTS = [Prompt(id=f"p{i}", domain="code", prompt=t) for i, t in enumerate([
    "def f(x): return x + 1 def f(x): return x + 1 def f(x): return x + 1",
    "the model server request token the model server request token the model server request token",
    "explain the speculative decoding latency throughput of a server",
])]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_streams_with_usage(tserver, local_env, api):
    params = local_env.model.request_params["baseline"]
    recs = run(run_cell(tserver.base_url, api, PROMPTS, concurrency=2, requests=4, warmup=1, output_len=24,
                        request_params=params, model=tserver.model, arm="baseline", domain="code"))
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
        recs = run(run_cell(tserver.base_url, "completions", PROMPTS[:2], concurrency=1, requests=2, output_len=128,
                            request_params=local_env.model.request_params[arm], model=tserver.model, arm=arm))
        assert all(r.error is None for r in recs)
        steps = _steps(tserver.log_path.read_text())[before:]
        assert len(steps) == 2
        seen[arm] = (recs, steps)
    base_recs, base_steps = seen["baseline"]
    ngram_recs, ngram_steps = seen["ngram"]
    assert [r.output_tokens for r in base_recs] == [r.output_tokens for r in ngram_recs] == [t for t, _ in base_steps]
    assert all(t == s for t, s in base_steps)            # one token per step without speculation
    assert sum(s for _, s in ngram_steps) < 0.95 * sum(t for t, _ in ngram_steps)  # accepted drafts
    # the accepted tokens of one step leave the server together: fewer distinct arrival times
    assert sum(len(set(r.chunk_ms)) for r in ngram_recs) < sum(len(set(r.chunk_ms)) for r in base_recs)
