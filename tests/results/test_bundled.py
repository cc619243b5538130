"""A bundled answer (every output token, more than one, in a single streamed chunk: the embedded engine on a
busy host) is flagged per request; a cell where most answers are bundled is flagged `bundled` and left out of
the TTFT/ITL/TPOT verdicts (the diff's regression gate, SLO objectives on them), never out of throughput's.
The fake server streams over real HTTP through the load generator's own client; archives written before the
field read as unknown (not flagged)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import read_request
from tests.synthetic import make_records, manifest_for
from toolkit.loadgen import CellLoad, run, run_cell
from toolkit.loadgen.summary import summarize
from toolkit.results.archive import ArchiveWriter, open_archive
from toolkit.results.diff import diff_runs
from toolkit.schema.eligibility import Eligibility, bundled, bundled_check, cell_flags
from toolkit.schema.records import CellSummary, Prompt, RequestRecord

TOKENS = 8
PROMPTS = [Prompt(id=f"p{i}", domain="d", prompt=f"hello {i}") for i in range(4)]


def _event(obj: dict) -> bytes:
    data = b"data: " + json.dumps(obj).encode() + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _serve(one_chunk: bool):
    """An OpenAI chat stream of TOKENS tokens: all in one chunk (one_chunk) or one token a chunk, 5 ms apart."""

    async def handler(reader, writer):
        while await read_request(reader):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            await asyncio.sleep(0.005)
            if one_chunk:
                writer.write(_event({"choices": [{"delta": {"content": "tok " * TOKENS}, "finish_reason": None}],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": TOKENS}}))
            else:
                for i in range(TOKENS):
                    writer.write(_event({"choices": [{"delta": {"content": "tok "}, "finish_reason": None}],
                                         "usage": {"prompt_tokens": 3, "completion_tokens": i + 1}}))
                    await writer.drain()
                    await asyncio.sleep(0.005)
            writer.write(_event({"choices": [{"delta": {}, "finish_reason": "length"}]}))
            done = b"data: [DONE]\n\n"
            writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handler, "127.0.0.1", 0)


def _records(one_chunk: bool, n: int = 12) -> list[RequestRecord]:
    async def go():
        server = await _serve(one_chunk)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            return await run_cell(url, CellLoad(api="chat", concurrency=1, requests=n, output_len=TOKENS), PROMPTS,
                                  model="m", arm="a", domain="d")
        finally:
            server.close()

    recs = run(go())
    assert all(r.error is None for r in recs), [r.error for r in recs if r.error][:2]
    return recs


@pytest.fixture(scope="module")
def streams():
    return {"bundled": _records(True), "streamed": _records(False)}


def _summary(recs: list[RequestRecord]) -> CellSummary:
    return summarize(recs, arm="a", domain="d", concurrency=1, output_len=TOKENS)


def test_one_chunk_answers_are_flagged_and_the_cell_left_out_of_latency_verdicts(streams):
    recs = streams["bundled"]
    assert all(r.bundled is True and len(r.chunk_ms) == 1 and r.output_tokens == TOKENS for r in recs)
    s = _summary(recs)
    assert s.bundled_share == 1.0 and "bundled" in s.checked
    [check] = [c for c in s.checks if c.check == "bundled"]
    assert not check.excludes and "12 of 12 answers arrived at once" in check.message
    [flag] = [f for f in cell_flags(s) if f.code == "bundled"]
    assert not flag.excludes and {"ttft_ms", "tpot_ms", "itl_ms", "itl_req_mean_ms"} == set(flag.metrics)
    elig = Eligibility([s])
    assert elig.usable("a", "d", 1)  # throughput verdicts keep the cell
    assert [f.code for f in elig.excluded_for("a", "d", 1, "ttft_ms")] == ["bundled"]
    assert [f.code for f in elig.excluded_for("a", "d", 1, "tpot_ms")] == ["bundled"]
    assert elig.excluded_for("a", "d", 1, "output_tok_s") == []
    assert elig.excluded_for("a", "d", 1, "e2e_ms") == []
    # the archived summary reads back with its flag
    again = CellSummary.model_validate_json(s.model_dump_json())
    assert [f.code for f in cell_flags(again) if f.metrics] == ["bundled"]


def test_streamed_answers_are_not_flagged(streams):
    recs = streams["streamed"]
    # (a client stalled past a whole stream would read it at once, and rightly call it bundled: not most)
    assert sum(r.bundled is False and len(set(r.chunk_ms)) > 1 for r in recs) > len(recs) // 2
    s = _summary(recs)
    assert s.bundled_share is not None and s.bundled_share <= 0.5 and "bundled" in s.checked
    assert not [c for c in s.checks if c.check == "bundled"]
    assert not [f for f in cell_flags(s) if f.metrics]


def test_most_not_all_and_one_token_answers():
    def rec(i: int, chunks: list[float], tokens: int) -> RequestRecord:
        return RequestRecord(arm="a", domain="d", concurrency=1, prompt_id=f"p{i}", send_s=float(i), ttft_ms=chunks[0],
                             e2e_ms=chunks[-1] + 1, output_tokens=tokens, chunk_ms=chunks,
                             chunk_tokens=[tokens // len(chunks)] * len(chunks))

    one_token = rec(0, [5.0], 1)
    assert bundled(one_token) is False  # a one-token answer has one chunk by nature
    assert bundled(RequestRecord(arm="a", domain="d", concurrency=1, prompt_id="p", send_s=0.0)) is None
    assert bundled(rec(0, [9.0], 4)) is True
    assert bundled(rec(0, [9.0, 9.0, 9.0, 9.0], 4)) is True  # several chunks stamped by one read: at one instant
    assert bundled(rec(0, [9.0, 9.0, 9.0, 9.5], 4)) is False
    recs = [rec(i, [9.0], 4) for i in range(5)] + [rec(i, [1.0, 2.0, 3.0, 4.0], 4) for i in range(5, 10)]
    for r in recs:
        r.bundled = bundled(r)
    assert bundled_check(recs) == (0.5, None)  # half is not most
    recs[5].chunk_ms, recs[5].bundled = [9.0], True
    share, check = bundled_check(recs)
    assert share == 0.6 and check is not None and check.check == "bundled"


def test_old_records_and_summaries_read_as_unknown(tmp_path):
    old = {"arm": "a", "domain": "d", "concurrency": 1, "prompt_id": "p", "send_s": 0.0, "ttft_ms": 5.0, "e2e_ms": 9.0,
           "output_tokens": 4, "chunk_ms": [5.0], "chunk_tokens": [4]}
    r = RequestRecord.model_validate(old)
    assert r.bundled is None
    assert bundled_check([r] * 12) == (None, None)  # unknown: not flagged
    s = CellSummary.model_validate({"arm": "a", "domain": "d", "concurrency": 1, "output_len": 4, "workload_hash": ""})
    assert s.bundled_share is None and not [f for f in cell_flags(s) if f.metrics]


def _write(root: Path, seed: int, bundle_spec: bool) -> Path:
    """One run, baseline and eagle3 at c=1, 3 launches; with bundle_spec every eagle3 answer arrives in one chunk
    (its TTFT the whole generation) while its throughput stays the same."""
    arms = {"baseline": ["python", "-m", "sglang.launch_server"], "eagle3": ["python", "-m", "sglang.launch_server"]}
    man = {**manifest_for(arms), "launches": 3}
    w = ArchiveWriter.create(root, "bundled", man)
    rng = np.random.default_rng(seed)
    for arm in arms:
        for launch in range(3):
            recs = make_records(rng, arm=arm, domain="chat", concurrency=1, repeat=0, n=60, launch=launch)
            for r in recs:
                if bundle_spec and arm == "eagle3":
                    r.chunk_ms, r.chunk_tokens, r.ttft_ms = [r.chunk_ms[-1]], [r.output_tokens], r.chunk_ms[-1]
                r.bundled = bundled(r)
            s = summarize(recs, arm=arm, domain="chat", concurrency=1, output_len=32, workload_hash="w" * 64,
                          launch=launch)
            s.sampling = {"api": "chat", "temperature": 0.0, "output_len": 32, "seed": 0, "warmup": 2}
            w.write_cell(s, recs)
    w.finalize("complete", derived={}, report_md="# bundled\n")
    return w.path


@pytest.fixture(scope="module")
def bundled_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundled")
    return _write(root, 1, False), _write(root, 2, True)


def test_diff_leaves_a_bundled_cells_latency_out_of_the_gate(bundled_runs):
    a, b = (open_archive(p) for p in bundled_runs)
    r = diff_runs(a, b)
    [cell] = [c for c in r.cells if c.arm == "eagle3"]
    assert not cell.excluded  # throughput still gates
    assert cell.metrics["ttft_ms"].excluded and "bundled" in cell.metrics["ttft_ms"].excluded[0]
    assert not cell.metrics["output_tok_s"].excluded
    assert any("no TTFT/TPOT/ITL/ITL req mean verdict uses it: bundled" in n for n in cell.notes)
    gated = [(c.arm, m.metric) for c, m, _ in r.regressions(5)]
    assert ("eagle3", "ttft_ms") not in gated
    assert ("eagle3", "ttft_ms") in [(c.arm, m.metric) for c, m, _ in r.regressions(5, gated=False)]


def test_show_and_diff_name_the_reason(bundled_runs, cli):
    a, b = (str(p) for p in bundled_runs)
    res = cli("results", "show", b)
    assert res.returncode == 0, res.stderr
    assert "ok, bundled" in res.stdout and "answers arrived at once" in res.stdout
    res = cli("results", "diff", a, b, "--fail-on-regression", "5")
    assert "not gated: " in res.stderr and "ttft_ms" in res.stderr and "bundled" in res.stderr, res.stderr
    assert res.returncode == 0 and "no regression worse than 5%" in res.stderr  # the TTFT change is not gated
    res = cli("results", "diff", a, b, "--metric", "ttft_ms")
    assert "WORSE  left out: bundled" in res.stdout and "(1 cells" in res.stdout  # the geomean leaves it out


def test_slo_objectives_on_latency_leave_a_bundled_cell_out(bundled_runs, cli):
    b = str(bundled_runs[1])
    for slo, left_out in (("ttft_ms.p90=1000", True), ("e2e_ms.p90=1000", False)):
        res = cli("results", "slo", b, "--slo", slo, "--json")
        assert res.returncode == 0, res.stderr
        [cell] = [c for c in json.loads(res.stdout)["cells"] if c["arm"] == "eagle3"]
        assert bool(cell["excluded"]) == left_out and any("bundled" in x for x in cell["excluded"] + cell["qualified"])
