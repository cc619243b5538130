"""Acceptance on every API (issue 25): a cell's accept_length comes per request where the wire carries
verification steps, else from the server's own counts for the cell, labelled with its source; a
speculative arm that gets none carries a methodology warning naming it and saying how to get it.

- SGLang over chat/completions: a replay of tests/data/sglang/ (recorded from SGLang 0.5.17 on an H200)
  streams the recorded chat chunks and serves the recorded /metrics, whose counters advance per finished
  request by what that server counted for one such request (generate.json's meta_info: 12 completion
  tokens, 11 verification steps). Without metrics (the recorded NGRAM server), the named warning.
- The embedded engine: real `transformers serve` through the real CLI; its own per-request count
  (toolkit-serve log lines) gives the ngram and baseline cells their tokens per step, warmup excluded.
"""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import ROOT, run_cli
from tests.helpers import record_dicts, served
from toolkit.engines.sglang import acceptance_counters as counters
from toolkit.schema.metrics import ACCEPT_SOURCES
from toolkit.serve.sglang import parse_metrics
from toolkit.results import compact

pytestmark = pytest.mark.slow

DATA = ROOT / "tests" / "data" / "sglang"
# as recorded from 0.5.17 on the H200 (record.py reads headers case-insensitively since issue 29)
METRICS_TYPE = json.loads((DATA / "index.json").read_text())["metrics"]["content_type"]
ENV = ROOT / "envs" / "sglang-0.5.17-h200.yaml"
META = json.loads((DATA / "generate.json").read_text())["meta_info"]  # one request as the server counted it
COUNTER_LINE = re.compile(r"^(sglang:(generation_tokens_total|spec_verify_calls_total|num_requests_total)"
                          r"\{[^}]*\}) ([0-9.e+]+)$", re.M)


class Replay:
    """The recorded server: chat chunks as sent, /server_info as sent, /metrics as sent with its three
    counters advanced by the recorded per-request counts for every request finished since."""

    def __init__(self, server_info: str, metrics: bool):
        self.info = (DATA / server_info).read_bytes()
        self.metrics = (DATA / "metrics.txt").read_text() if metrics else None
        self.finished = 0
        self.events = [e + b"\n\n" for e in (DATA / "chat_stream.txt").read_bytes().split(b"\n\n") if e.strip()]

    async def chat(self, request):
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        for e in self.events:
            await resp.write(e)
            await asyncio.sleep(0.001)
        self.finished += 1  # after the last chunk: the reader must wait for counters that lag the client
        return resp

    async def get_metrics(self, request):
        if self.metrics is None:
            return web.json_response({"detail": "Not Found"}, status=404)
        step = {"generation_tokens_total": META["completion_tokens"], "spec_verify_calls_total": META["spec_verify_ct"],
                "num_requests_total": 1}
        seen: set[str] = set()

        def advance(m: re.Match) -> str:  # one label set per counter carries the new requests
            name = m.group(2)
            add = step[name] * self.finished if name not in seen else 0
            seen.add(name)
            return f"{m.group(1)} {float(m.group(3)) + add}"

        return web.Response(text=COUNTER_LINE.sub(advance, self.metrics),
                            headers={"Content-Type": METRICS_TYPE})

    def app(self) -> web.Application:
        def static(body: bytes, ctype: str | None = None):
            async def handler(request):
                return web.Response(body=body, content_type=ctype)
            return handler

        app = web.Application()
        app.add_routes([web.get("/health", static(b"")), web.get("/server_info", static(self.info, "application/json")),
                        web.get("/v1/models", static((DATA / "models.json").read_bytes(), "application/json")),
                        web.get("/metrics", self.get_metrics), web.post("/v1/chat/completions", self.chat)])
        return app


@pytest.fixture()
def replay(request):
    server_info, metrics = request.param
    rp = Replay(server_info, metrics)
    with served(rp.app()) as url:
        yield url, rp


def chat_matrix(tmp: Path, arm: str, url: str) -> Path:
    m = tmp / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: acc
        environment: {ENV}
        arms: [{arm}]
        target: {{kind: external, url: "{url}"}}
        workloads: [coding]
        api: chat
        concurrency: [1, 4]
        output_len: 12
        requests: 8
        warmup: 2
        """))
    return m


def run_matrix(m: Path, results: Path) -> tuple[Path, dict]:
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    return run, json.loads(compact.read_text(run / "summary.json"))


def test_the_recorded_counters_are_the_per_request_figures_summed():
    """What the reader relies on, in the recording itself: /metrics' counters hold the finished requests'
    completion tokens and verification steps (SGLang's own warmup request, 8 tokens in 7 steps, plus four
    12-token requests in 11 steps each, as generate.json's meta_info says for one of them)."""
    c = counters(parse_metrics((DATA / "metrics.txt").read_text()))
    assert c["sglang:num_requests_total"] == 5
    assert c["sglang:generation_tokens_total"] == 8 + 4 * META["completion_tokens"]
    assert c["sglang:spec_verify_calls_total"] == 7 + 4 * META["spec_verify_ct"]


@pytest.mark.parametrize("replay", [("server_info.json", True)], indirect=True)
def test_chat_cells_carry_the_servers_acceptance(tmp_path: Path, replay) -> None:
    url, rp = replay
    run, summary = run_matrix(chat_matrix(tmp_path, "eagle3-threshold", url), tmp_path / "results")
    cells = summary["cells"]
    assert len(cells) == 2 and all(c["status"] == "ok" for c in cells)
    for c in cells:
        # the cell's figure is the server's ratio of sums over exactly the measured requests (warmup excluded)
        assert c["accept_source"] == "server-metrics"
        assert c["accept_counts"] == {"tokens": 8 * 12.0, "steps": 8 * 11.0, "requests": 8.0}
        assert c["metrics"]["accept_length"]["p50"] == pytest.approx(META["spec_accept_length"])
        assert c["metrics"]["accept_length"]["n"] == 8
        # the wire carried no steps: no per-request figure, and none invented
        recs = record_dicts(run, f"eagle3-threshold__coding__c{c['concurrency']}__r0")
        assert not any("spec_verify_ct" in r for r in recs) and "req_accept_length" not in c["metrics"]
    assert rp.finished == 2 * (8 + 2)
    checks = {c["check"] for c in summary["derived"]["methodology"]}
    assert "acceptance-unavailable" not in checks and "acceptance-counts-mismatch" not in checks
    # the report says where the figure came from
    show = run_cli("results", "show", str(run))
    assert show.returncode == 0 and ACCEPT_SOURCES["server-metrics"] in show.stdout.replace("\n", " ")
    assert run_cli("results", "verify", str(run)).returncode == 0


@pytest.mark.parametrize("replay", [("server_info_ngram.json", False)], indirect=True)
def test_chat_cells_without_server_counts_carry_the_named_warning(tmp_path: Path, replay) -> None:
    url, _ = replay
    _, summary = run_matrix(chat_matrix(tmp_path, "ngram", url), tmp_path / "results")
    assert all(c["status"] == "ok" and "accept_length" not in c["metrics"] and c["accept_source"] is None
               for c in summary["cells"])
    warn = [c for c in summary["derived"]["methodology"] if c["check"] == "acceptance-unavailable"]
    assert len(warn) == 1 and warn[0]["severity"] == "warning"
    msg = warn[0]["message"]
    assert msg.startswith("arm ngram (NGRAM): 2 cell(s)") and "`api: generate`" in msg and "`enable-metrics: true`" in msg


EMBEDDED = textwrap.dedent("""\
    kind: Environment
    name: acc-cpu
    engine: transformers
    model:
      dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}
    servers:
      baseline: {}
      ngram: {}
    request_params:
      baseline:
        generation_config: {do_sample: false}
      ngram:
        generation_config: {do_sample: false, prompt_lookup_num_tokens: 4}
    """)


def test_embedded_engine_cells_carry_tokens_per_step(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(EMBEDDED)
    m = tmp_path / "m.yaml"
    m.write_text(textwrap.dedent("""\
        kind: Matrix
        name: acc
        environment: env.yaml
        arms: [baseline, ngram]
        workloads: [coding]
        api: chat
        concurrency: [1]
        output_len: 24
        requests: 4
        warmup: 2
        """))
    run, summary = run_matrix(m, tmp_path / "results")
    by = {c["arm"]: c for c in summary["cells"]}
    for arm in ("baseline", "ngram"):
        c = by[arm]
        assert c["status"] == "ok" and c["accept_source"] == "server-log"
        recs = record_dicts(run, f"{arm}__coding__c1__r0")
        measured = [r for r in recs if not r.get("warmup")]
        # the server's count over exactly the measured requests: its tokens are the client's, warmup left out
        assert c["accept_counts"]["requests"] == len(measured) == 4
        assert c["accept_counts"]["tokens"] == sum(r["output_tokens"] for r in measured)
        assert c["metrics"]["accept_length"]["p50"] == pytest.approx(c["accept_counts"]["tokens"] / c["accept_counts"]["steps"])
    assert by["baseline"]["metrics"]["accept_length"]["p50"] == 1.0  # one token per step without speculation
    assert by["ngram"]["metrics"]["accept_length"]["p50"] > 1.0  # prompt lookup accepts drafts
    assert not [c for c in summary["derived"]["methodology"] if c["check"].startswith("acceptance-")]
