"""What a cell sends goes from the Matrix spec to the wire through one object, CellLoad, and a run reads its
specs once (issue 28). Real runs (run_matrix, in this process) against a recording OpenAI-compatible server
(an external target), real request bodies read off the socket."""

from __future__ import annotations

import json
import textwrap
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import toolkit.bench.plan as plan_mod
import toolkit.specs as spec_mod
from tests.bench.new_field import CellLoadWithTopP, MatrixWithTopP
from toolkit.bench.matrix import run_matrix
from toolkit.loadgen import CellLoad
from toolkit.specs import load_spec


class Recording(BaseHTTPRequestHandler):
    """/health 200; every POST streams `max_tokens` content chunks (SSE, chunked) and is kept in `bodies`."""

    protocol_version = "HTTP/1.1"
    bodies: list = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        body, status = (b'{"status": "ok"}', 200) if self.path == "/health" else (b"{}", 404)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.bodies.append((self.path, body))
        n = int(body.get("max_tokens") or 4)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(obj) -> None:
            data = f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        for i in range(n):
            send({"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]})
        send({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}})
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def server():
    handler = type("H", (Recording,), {"bodies": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler.bodies
    srv.shutdown()
    srv.server_close()


def write_specs(tmp: Path, url: str, extra: str = "") -> Path:
    (tmp / "env.yaml").write_text(textwrap.dedent("""\
        kind: Environment
        name: recorded
        engine: transformers
        servers:
          baseline: {}
          other: {}
        request_params:
          other: {generation_config: {do_sample: false}}
        """))
    m = tmp / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: recorded
        environment: env.yaml
        arms: [baseline, other]
        target: {{kind: external, url: "{url}"}}
        workloads: [coding]
        api: chat
        concurrency: [1, 2]
        output_len: 3
        requests: 4
        warmup: 1
        """) + extra)
    return m


# -- a Matrix field that only changes what the cell sends: the spec and CellLoad, nothing else
# (the two subclasses live in an importable module: the worker processes unpickle the load)

def test_a_new_matrix_field_reaches_every_request_through_cellload_alone(tmp_path, server, monkeypatch):
    """The two edits a new field needs (the Matrix model, CellLoad) stand in for the real classes; a whole run
    then sends the spec's value in every request, warmup and measured, in one process (c1) and in worker
    processes (c2 with workers: 2: the load crosses a pickle), with no other change anywhere."""
    url, bodies = server
    monkeypatch.setitem(spec_mod.KINDS, "Matrix", MatrixWithTopP)
    monkeypatch.setattr(plan_mod, "CellLoad", CellLoadWithTopP)
    spec = load_spec(write_specs(tmp_path, url, "workers: 2\ntop_p: 0.25\n"), expect="Matrix")
    assert isinstance(spec.model, MatrixWithTopP) and spec.model.top_p == 0.25

    res = run_matrix(spec, results_root=tmp_path / "results", log=lambda line: None)

    assert res.status == "complete" and len(res.cells) == 4 and all(c.status == "ok" for c in res.cells)
    assert len(bodies) == 2 * 2 * (4 + 1)  # arms x levels x (requests + warmup)
    assert {b.get("top_p") for _, b in bodies} == {0.25}, bodies[:2]
    assert all(b["max_tokens"] == 3 and b["temperature"] == 0.0 for _, b in bodies)  # the fields already there
    by_arm = {b.get("generation_config") for _, b in bodies}  # the arm's request params beside it
    assert by_arm == {None, '{"do_sample": false}'}
    workers = {c.concurrency: c.sampling["workers"] for c in res.cells}
    assert workers == {1: 1, 2: 2}  # one cell in this process, one over two worker processes


def test_without_the_field_in_cellload_the_matrix_field_is_not_sent(tmp_path, server, monkeypatch):
    """The control: the Matrix field alone changes nothing on the wire (CellLoad is the only way there)."""
    url, bodies = server
    monkeypatch.setitem(spec_mod.KINDS, "Matrix", MatrixWithTopP)
    spec = load_spec(write_specs(tmp_path, url, "top_p: 0.25\n"), expect="Matrix")
    res = run_matrix(spec, results_root=tmp_path / "results", log=lambda line: None)
    assert res.status == "complete" and bodies and not any("top_p" in b for _, b in bodies)


def test_results_diff_names_a_difference_in_a_new_sent_field_without_an_edit_to_diff(tmp_path, server, monkeypatch):
    """Comparability comes from CellLoad: the same two edits (no change to toolkit/results/diff.py) make each cell
    record the field, and `results diff` of two runs that sent 0.25 and 0.5 calls every cell not comparable,
    naming the field; the fields CellLoad declares uncompared (warmup, workers) do not part two runs."""
    from toolkit.results.archive import open_archive
    from toolkit.results.diff import diff_runs

    url, _ = server
    monkeypatch.setitem(spec_mod.KINDS, "Matrix", MatrixWithTopP)
    monkeypatch.setattr(plan_mod, "CellLoad", CellLoadWithTopP)
    runs = {}
    for name, extra in (("a", "top_p: 0.25\n"), ("b", "top_p: 0.5\n"), ("c", "top_p: 0.25\nworkers: 2\n")):
        (tmp_path / name).mkdir()
        spec = load_spec(write_specs(tmp_path / name, url, extra), expect="Matrix")
        res = run_matrix(spec, results_root=tmp_path / name / "results", log=lambda line: None)
        assert res.status == "complete"
        runs[name] = open_archive(res.path)
    assert [c.sampling["top_p"] for c in runs["b"].cells] == [0.5] * 4  # recorded after the fields archives had
    assert list(runs["a"].cells[0].sampling)[-2:] == ["top_p", "workers"]

    parted = diff_runs(runs["a"], runs["b"])
    assert parted.cells and all(not c.comparable and "top_p 0.25 vs 0.5" in c.reason for c in parted.cells)
    same = diff_runs(runs["a"], runs["c"])  # workers 1 vs 2 at c=2: declared uncompared
    assert same.cells and all(c.comparable for c in same.cells), [c.reason for c in same.cells]


def test_the_sampling_record_keeps_the_fields_archives_have_always_had(tmp_path):
    """Without a new field, CellLoad.recorded is the record archives hold, in its order (byte-identical JSON)."""
    m = load_spec(write_specs(tmp_path, "http://127.0.0.1:9")).model
    assert CellLoad.recorded(m) == {"api": "chat", "temperature": 0.0, "output_len": 3, "seed": 0, "warmup": 1,
                                    "requests": 4, "duration_s": None}
    assert list(CellLoad.recorded(m)) == ["api", "temperature", "output_len", "seed", "warmup", "requests",
                                          "duration_s"]
    assert CellLoad.not_compared() == {"warmup", "workers"}
    assert list(CellLoadWithTopP.recorded(MatrixWithTopP.model_validate(m.model_dump())))[-1] == "top_p"


def test_cellload_of_takes_each_field_from_the_matrix_field_of_its_name(tmp_path):
    m = load_spec(write_specs(tmp_path, "http://127.0.0.1:9")).model
    m = m.model_copy(update={"requests": None, "duration_s": {1: 5.0, 2: 7.5}, "seed": 7, "workers": 3,
                             "temperature": 0.5})
    load = CellLoad.of(m, 2, {"x": 1})
    assert load == CellLoad(api="chat", concurrency=2, output_len=3, temperature=0.5, requests=None,
                            duration_s=7.5, warmup=1, seed=7, workers=3, request_params={"x": 1})
    assert CellLoad.of(m, 1).duration_s == 5.0 and load.processes == 2  # never more processes than requests in flight
    assert load.body_sampling() == {"max_tokens": 3, "temperature": 0.5}
    assert CellLoad(api="generate", requests=1).body_sampling() == {"max_new_tokens": 128, "temperature": 0.0}
    with pytest.raises(ValueError, match="exactly one of requests or duration_s"):
        CellLoad(requests=None)


# -- the specs are read once per run

def test_a_run_reads_its_environment_once(tmp_path, server, monkeypatch):
    """Every spec file a run parses goes through toolkit.specs's load_marked: during run_matrix the Environment is
    parsed once (it used to be three times) and the Matrix not again."""
    url, _ = server
    m = write_specs(tmp_path, url)
    spec = load_spec(m, expect="Matrix")
    parsed: list[Path] = []
    real = spec_mod.load_marked

    def counting(path, *a, **kw):
        parsed.append(Path(path).resolve())
        return real(path, *a, **kw)

    monkeypatch.setattr(spec_mod, "load_marked", counting)
    res = run_matrix(spec, results_root=tmp_path / "results", log=lambda line: None)
    assert res.status == "complete"
    assert parsed == [(tmp_path / "env.yaml").resolve()], parsed


# -- warmup: concurrency: one full batch of the cell's size before the measured phase

def test_warmup_concurrency_sends_one_full_batch_per_cell(tmp_path, server):
    url, bodies = server
    m = write_specs(tmp_path, url)
    m.write_text(m.read_text().replace("warmup: 1", "warmup: concurrency"))
    spec = load_spec(m, expect="Matrix")
    assert [CellLoad.of(spec.model, c).warmup for c in (1, 2, 32)] == [1, 2, 32]
    res = run_matrix(spec, results_root=tmp_path / "results", log=lambda line: None)
    assert res.status == "complete" and all(c.status == "ok" and c.n_requests == 4 for c in res.cells)
    assert len(bodies) == 2 * ((1 + 4) + (2 + 4))  # arms x levels x (warmup = concurrency + requests)


def test_warmup_takes_a_count_or_concurrency_only(tmp_path):
    from toolkit.errors import SpecError

    m = write_specs(tmp_path, "http://127.0.0.1:9")
    m.write_text(m.read_text().replace("warmup: 1", "warmup: lots"))
    with pytest.raises(SpecError, match=r"m\.yaml:\d+.*warmup"):
        load_spec(m, expect="Matrix")
