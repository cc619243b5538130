"""SGLang's wire format as a real server sent it: tests/data/sglang/ was recorded from SGLang 0.5.17 on an
H200 (benchmarks/sglang_h200/record.py; the archive's servers/*.json come from the same run). A replay
server sends the recorded bodies back, event by event, so the toolkit's own client, parsers and state
readers meet the exact bytes, and CI keeps them honest without a GPU."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from aiohttp import web

from tests.helpers import record_dicts, served
from toolkit.loadgen import CellLoad, run_cell
from toolkit.schema.records import Prompt
from toolkit.serve.sglang import parse_metrics, preset_mismatches, server_state

DATA = Path(__file__).resolve().parents[1] / "data" / "sglang"
INDEX = json.loads((DATA / "index.json").read_text())


def body(name: str) -> bytes:
    return (DATA / INDEX[name]["file"]).read_bytes()


def events(raw: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in raw.split(b"\n\n") if e.strip()]


def last_payload(raw: bytes) -> dict:
    payloads = [e[len(b"data: "):].strip() for e in events(raw) if e.startswith(b"data: ")]
    return json.loads([p for p in payloads if p != b"[DONE]"][-1])


def stream_handler(name: str):
    async def handler(request):
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": INDEX[name]["content_type"] or "text/event-stream"})
        await resp.prepare(request)
        for e in events(body(name)):
            await resp.write(e)
            await asyncio.sleep(0.002)
        return resp
    return handler


@pytest.fixture(scope="module")
def replay():
    app = web.Application()
    app.add_routes([web.post("/generate", stream_handler("generate_stream")),
                    web.post("/v1/chat/completions", stream_handler("chat_stream")),
                    web.post("/v1/completions", stream_handler("completions_stream"))])
    with served(app) as url:
        yield url


def one(replay: str, api: str) -> object:
    recs = asyncio.run(run_cell(replay, CellLoad(api=api, concurrency=1, requests=1, output_len=12),
                                [Prompt(id="a", domain="coding", prompt="def f(x):")]))
    assert len(recs) == 1 and recs[0].error is None, recs[0].error
    return recs[0]


def test_generate_stream_as_sglang_sent_it(replay):
    raw = body("generate_stream")
    meta = last_payload(raw)["meta_info"]
    r = one(replay, "generate")
    # tokens from meta_info's cumulative completion_tokens, one chunk per verify step
    assert r.tokens_source == "meta_info" and r.output_tokens == meta["completion_tokens"] == 12
    assert sum(r.chunk_tokens) == 12 and len(r.chunk_tokens) == len(events(raw)) - 1  # minus [DONE]
    assert r.finish_reason == meta["finish_reason"]["type"] == "length"
    assert r.input_tokens == meta["prompt_tokens"]
    # acceptance per request: ours (completion tokens / verify steps) is the server's spec_accept_length
    assert r.spec_verify_ct == meta["spec_verify_ct"] and r.accept_length >= 1
    assert r.accept_length == pytest.approx(meta["spec_accept_length"])
    for k in ("spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts"):
        assert r.spec_meta[k] == pytest.approx(meta[k]), k


def test_chat_and_completions_streams_count_usage_tokens(replay):
    for api, name in (("chat", "chat_stream"), ("completions", "completions_stream")):
        usage = [json.loads(e[6:]) for e in events(body(name)) if b'"usage": {' in e or b'"usage":{' in e]
        r = one(replay, api)
        assert r.output_tokens == usage[-1]["usage"]["completion_tokens"] == 12, api
        assert r.ttft_ms is not None and r.chunk_ms == sorted(r.chunk_ms)


def test_server_info_as_the_toolkit_reads_it():
    from toolkit.specs import load_spec

    info = json.loads(body("server_info"))
    st = server_state(info)
    assert st.server_info_read and st.engine_version == "0.5.17"
    assert st.speculative["speculative_algorithm"] == "EAGLE3"
    assert st.max_running_requests == info["max_running_requests"] == 64
    preset = load_spec(DATA.parents[2] / "envs" / "sglang-0.5.17-h200.yaml").model.servers["eagle3-threshold"]
    assert preset_mismatches(preset, info) == []
    # a value the server reports differently is named, with both sides
    assert preset_mismatches({**preset, "speculative-num-steps": 5}, info) == [
        {"flag": "speculative-num-steps", "preset": 5, "server": 3}]


def test_the_48_cap_as_an_uncapped_speculative_server_reports_it():
    info = json.loads((DATA / "server_info_ngram.json").read_text())
    st = server_state(info)
    # the flag was unset (envs/sglang-0.5.17-h200.yaml's ngram preset): SGLang chose 48, at both places
    assert st.max_running_requests == 48 == info["max_running_requests"]
    assert info["internal_states"][0]["max_running_requests"] == 48
    assert st.speculative["speculative_algorithm"] == "NGRAM"


def test_metrics_and_flush_cache():
    m = parse_metrics(body("metrics").decode())
    assert any(k.startswith("sglang:spec_accept_length") for k in m)
    assert any(k.startswith("sglang:num_requests_total") for k in m)
    assert INDEX["flush_cache"]["status"] == 200 and b"Cache flushed" in body("flush_cache")
    assert INDEX["health"]["status"] == 200


def test_the_recorder_reads_headers_whatever_their_case():
    """/metrics answers `Content-Type` (prometheus_client), JSON endpoints `content-type` (uvicorn): the
    recorder (benchmarks/sglang_h200/record.py) finds both (issue 29: /metrics' type was recorded as null)."""
    import importlib.util
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = b"# HELP x\n"
            self.send_response(200)
            self.send_header("Content-Type" if self.path == "/metrics" else "content-type",
                             "text/plain; version=0.0.4" if self.path == "/metrics" else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    spec = importlib.util.spec_from_file_location("record", DATA.parents[2] / "benchmarks" / "sglang_h200" / "record.py")
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        assert record.call(base, "GET", "/metrics")[1].get("Content-Type") == "text/plain; version=0.0.4"
        assert record.call(base, "GET", "/server_info")[1].get("Content-Type") == "application/json"
    finally:
        srv.shutdown()
        srv.server_close()


RESULTS = DATA.parents[2] / "results"


def test_a_misspelt_flag_as_real_sglang_rejected_it():
    """The archived H200 start with `speculative-algoritm`: SGLang's own argparse error, in seconds."""
    from toolkit.results import compact
    from toolkit.serve.base import last_error_line

    for run in sorted((RESULTS / "sglang-h200-typo").iterdir()):
        cell = json.loads(compact.read_text(run / "summary.json"))["cells"][0]
        assert cell["status"] == "failed" and "exited with code 2 during start-up" in cell["reason"]
        assert last_error_line(cell["log_tail"]) == "sglang serve: error: unrecognized arguments: --speculative-algoritm EAGLE3"
        secs = float(cell["reason"].rsplit("(", 1)[1].split(" s after launch")[0])
        assert secs < 30


def test_the_archived_h200_run_holds_what_issue_13_asks():
    """Arms one after another on the one GPU, acceptance >= 1 per request, the 48 cap from /server_info."""
    import gzip

    from toolkit.results import compact

    run = RESULTS / "sglang-h200" / "20261202T190515Z-52c8f2"
    summary = json.loads(compact.read_text(run / "summary.json"))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["host"]["controller"]["engines"]["sglang"] == "0.5.17"
    assert manifest["host"]["controller"]["gpu"]["gpus"][0]["name"] == "NVIDIA H200"
    d = summary["derived"]
    w = sorted(d["timing"]["arms"].values(), key=lambda x: x["start"])
    assert all(a["end"] <= b["start"] for a, b in zip(w, w[1:]))
    assert not [c for c in d["methodology"] if c["check"] == "arms-overlapped-on-shared-hardware"]
    cap = [c for c in d["methodology"] if c["check"] == "concurrency-above-max-running-requests"]
    assert len(cap) == 1 and cap[0]["severity"] == "error" and "arm ngram" in cap[0]["message"]
    assert d["arm_info"]["ngram"]["max_running_requests_source"] == "server_info"
    for arm in ("eagle3", "ngram", "eagle3-threshold"):
        keys = [p.name[: -len(".json")] for p in compact.glob(run / "cells", f"{arm}__*.json")]
        for key in keys:
            recs = record_dicts(run, key)
            assert recs and all(r["accept_length"] >= 1 for r in recs if not r.get("error")), key


def test_the_threshold_patch_switched_on_the_real_server():
    t = json.loads((RESULTS / "sglang-h200-threshold" / "20261202T190149Z" / "threshold.json").read_text())
    low, high, again = (p["internal_state_after"]["toolkit_threshold"] for p in t["phases"])
    assert low["steps_plain"] == 0 and low["drafting"]
    assert high["steps_plain"] > 0 and not high["drafting"] and high["switches"] == 1
    assert again["drafting"] and again["steps_spec"] > high["steps_spec"] and again["switches"] == 2
    assert any("batch 16 >= 8: drafting off" in ln for ln in t["threshold_log_lines"])
    assert any("batch 2 < 8: drafting on" in ln for ln in t["threshold_log_lines"])


def test_the_recorded_headers_are_there():
    """record.py once looked up `content-type` case-sensitively and recorded /metrics' as null."""
    assert INDEX["metrics"]["content_type"] == "text/plain; version=0.0.4; charset=utf-8"  # Prometheus' text format
    assert {INDEX[n]["content_type"] for n in ("generate_stream", "chat_stream", "completions_stream")} == \
        {"text/event-stream; charset=utf-8"}
    assert INDEX["server_info"]["content_type"] == "application/json"
