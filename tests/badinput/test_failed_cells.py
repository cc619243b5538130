"""Issue 43, a run that lied: every request of a cell failed (the server refused each one), yet the cell was
`ok`, the run `complete`, exit 0, and the server's reason never printed. A cell with no successful request is
a failed cell, with the first error as its reason (toolkit.loadgen.summary.summarize, where every cell's
status is decided), so the run is not complete and exits 1. A real socket, no mocks."""

from __future__ import annotations

import json
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import run_cli
from toolkit.results import compact

REASON = "num_beams must be a positive integer, got 0"


class Refusing(BaseHTTPRequestHandler):
    """Healthy, and refuses every generation with a 400 and the server's reason (as SGLang and vLLM do)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, {"status": "ok", "object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(400, {"object": "error", "message": REASON, "type": "BadRequestError", "code": 400})


def test_a_cell_whose_every_request_failed_is_a_failed_cell_with_the_servers_reason(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "env.yaml").write_text("kind: Environment\nname: ext\nengine: transformers\n"
                                           "servers:\n  baseline: {}\n")
        m = tmp_path / "m.yaml"
        m.write_text(textwrap.dedent(f"""\
            kind: Matrix
            name: lied
            environment: env.yaml
            arms: [baseline]
            target: {{kind: external, url: "http://127.0.0.1:{server.server_address[1]}"}}
            workloads: [coding]
            concurrency: [1]
            output_len: 8
            requests: 3
            warmup: 0
            """))
        results = tmp_path / "results"
        r = run_cli("bench", "matrix", str(m), "--results", str(results), timeout=120)
    finally:
        server.shutdown()
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-3000:])
    run = next((results / "lied").iterdir())
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "failed", summary["status"]
    (cell,) = summary["cells"]
    assert cell["status"] == "failed" and cell["n_errors"] == 3
    assert "no request succeeded (3 of 3 failed)" in cell["reason"] and REASON in cell["reason"], cell["reason"]
    assert REASON in r.stdout + r.stderr  # the server's reason is printed, not only archived
    assert "run failed" in r.stdout and ": ok" not in r.stderr


def test_summarize_fails_a_cell_with_no_successful_request() -> None:
    from toolkit.loadgen.summary import summarize
    from toolkit.schema.records import RequestRecord

    def rec(i: int, error: str | None, warmup: bool = False) -> RequestRecord:
        ok = error is None
        return RequestRecord(arm="a", domain="d", concurrency=1, prompt_id=str(i), warmup=warmup, send_s=i * 0.1,
                             ttft_ms=5.0 if ok else None, e2e_ms=20.0 if ok else None, output_tokens=4 if ok else 0,
                             chunk_ms=[5.0, 10.0, 15.0, 20.0] if ok else [], chunk_tokens=[1, 1, 1, 1] if ok else [],
                             error=error, status=None if ok else 500)
    # a successful warm-up does not make the cell a measurement
    failed = summarize([rec(0, None, warmup=True), rec(1, "HTTP 500: out of memory"), rec(2, "HTTP 500: again")],
                       arm="a", domain="d", concurrency=1, output_len=4)
    assert failed.status == "failed" and "2 of 2 failed" in failed.reason and "out of memory" in failed.reason
    none = summarize([rec(0, None, warmup=True)], arm="a", domain="d", concurrency=1, output_len=4)
    assert none.status == "failed" and "no measured request" in none.reason
    one_ok = summarize([rec(1, "HTTP 500: x"), rec(2, None)], arm="a", domain="d", concurrency=1, output_len=4)
    assert one_ok.status == "ok" and one_ok.reason is None and one_ok.n_errors == 1
