"""The SGLang-specific client paths against a real HTTP server that speaks SGLang's wire format
(native /generate streaming with cumulative meta_info, /server_info, /metrics, /flush_cache): a
stand-in for the engine, which needs a GPU. Formats as in FACTS.md (read from SGLang's source)."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from tests.helpers import served
from toolkit.loadgen import CellLoad, run_cell
from toolkit.loadgen.summary import summarize
from toolkit.schema.records import Prompt
from toolkit.serve import ExternalLauncher, flush_cache, metrics_snapshot, server_info

STEPS = [2, 3, 1, 4]  # tokens accepted per verification step: 10 tokens in 4 steps


async def generate(request):
    body = await request.json()
    assert body["stream"] is True and body["sampling_params"]["max_new_tokens"] == 10
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    done, text = 0, ""
    for i, k in enumerate(STEPS):
        done += k
        text += "x" * k
        last = i == len(STEPS) - 1
        meta = {"id": "r", "prompt_tokens": 5, "completion_tokens": done, "spec_verify_ct": i + 1,
                "finish_reason": {"type": "length", "length": 10} if last else None}
        await resp.write(f"data: {json.dumps({'text': text, 'meta_info': meta})}\n\n".encode())
        await asyncio.sleep(0.005)
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def info(request):
    return web.json_response({"version": "0.5.23", "internal_states": [{"max_running_requests": 48,
                                                                         "avg_spec_accept_length": 2.5}]})


FLUSHED = []


async def flush(request):
    FLUSHED.append(1)
    return web.Response(text="Cache flushed.")


async def metrics(request):
    return web.Response(text='# HELP x\nsglang:spec_accept_length{model_name="t"} 2.5\nsglang:num_requests_total 7\n')


@pytest.fixture(scope="module")
def fake_sglang():
    app = web.Application()
    app.add_routes([web.post("/generate", generate), web.get("/server_info", info), web.post("/flush_cache", flush),
                    web.get("/metrics", metrics), web.get("/health", lambda r: web.Response(text="ok"))])
    with served(app) as url:
        yield url


def test_generate_stream_gives_exact_tokens_and_accept_length(fake_sglang):
    recs = asyncio.run(run_cell(fake_sglang, CellLoad(api="generate", concurrency=2, requests=4, output_len=10),
                                [Prompt(id="a", domain="d", prompt="hi")]))
    for r in recs:
        assert r.error is None, r.error
        assert r.tokens_source == "meta_info" and r.chunk_tokens == STEPS and r.output_tokens == 10
        assert r.spec_verify_ct == 4 and r.accept_length == 2.5
        assert r.finish_reason == "length" and r.input_tokens == 5
    s = summarize(recs, arm="eagle3", domain="d", concurrency=2, output_len=10)
    assert s.metrics["accept_length"].mean == 2.5 and s.metrics["accept_length"].n == 4


def test_sglang_helpers(fake_sglang):
    assert server_info(fake_sglang)["internal_states"][0]["max_running_requests"] == 48
    assert metrics_snapshot(fake_sglang)['sglang:spec_accept_length{model_name="t"}'] == 2.5
    assert flush_cache(fake_sglang) and FLUSHED
    ext = ExternalLauncher(fake_sglang + "/")
    ext.wait_healthy(10)
    assert ext.base_url == fake_sglang and ext.exit_code() is None
    ext.stop()
