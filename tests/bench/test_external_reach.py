"""External targets that are not there, or not yet: a refused connection and a URL whose scheme the port
does not speak fail the arm within seconds with the reason; a server still starting (503) is waited for,
with progress. Real sockets and real TLS (a throwaway CA), no mocks."""

from __future__ import annotations

import json
import socket
import ssl
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.bench.test_external_https import make_ca_and_server_cert
from tests.conftest import run_cli
from toolkit.errors import ToolFailure
from toolkit.serve.base import REFUSED_GRACE_S, ExternalLauncher
from toolkit.results import compact


class Starting(BaseHTTPRequestHandler):
    """/health: 503 until `up` is set, then 200 (a server loading its model)."""

    protocol_version = "HTTP/1.1"
    up = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        status = 200 if self.up.is_set() else 503
        body = b'{"status": "ok"}' if status == 200 else b'{"status": "loading"}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(handler, tls: tuple[Path, Path] | None = None):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*tls)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    _, cert, key = make_ca_and_server_cert(tmp_path_factory.mktemp("tls"))
    return cert, key


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on return: nothing listens there


def test_refused_connection_fails_the_run_within_seconds_with_the_reason(tmp_path: Path) -> None:
    """An external URL nobody listens on: each arm fails after the short grace, not after 600 s; the run is
    failed (exit 1), and says nothing about random weights (the toolkit does not know what it serves)."""
    (tmp_path / "env.yaml").write_text("kind: Environment\nname: ext\nengine: transformers\n"
                                       "servers:\n  baseline: {}\n  ngram: {}\n")  # no model: block needed
    m = tmp_path / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: ext
        environment: env.yaml
        arms: [baseline, ngram]
        target: {{kind: external, url: "http://127.0.0.1:{closed_port()}"}}
        workloads: [coding]
        concurrency: [1]
        output_len: 8
        requests: 3
        """))
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    run = next((results / "ext").iterdir())
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "failed"
    for c in summary["cells"]:
        assert "connection refused: nothing listens on 127.0.0.1" in c["reason"], c["reason"]
    for arm, took in summary["derived"]["timing"]["launch_failed_s"].items():
        assert took < 10, (arm, took)  # REFUSED_GRACE_S and a poll, not the 600 s start timeout
    assert not [c for c in summary["derived"]["methodology"] if c["check"] == "random-weights"]
    assert "connection refused" in r.stdout and "run failed" in r.stdout


def test_http_to_a_tls_port_and_https_to_a_plain_port_name_the_mismatch(certs) -> None:
    tls = serve(Starting, tls=certs)
    plain = serve(Starting)
    try:
        with pytest.raises(ToolFailure, match="server speaks TLS on this port") as exc:
            ExternalLauncher(f"http://127.0.0.1:{tls.server_address[1]}").wait_healthy(60)
        assert exc.value.hint == f"write https://127.0.0.1:{tls.server_address[1]} in the target's URL"
        with pytest.raises(ToolFailure, match="server speaks plain HTTP on this port") as exc:
            ExternalLauncher(f"https://127.0.0.1:{plain.server_address[1]}").wait_healthy(60)
        assert exc.value.hint.startswith("write http://")
    finally:
        for s in (tls, plain):
            s.shutdown()
            s.server_close()


def test_a_server_not_up_yet_is_waited_for_with_progress() -> None:
    handler = type("H", (Starting,), {"up": threading.Event()})
    server = serve(handler)
    heard: list[str] = []

    def progress(text: str) -> None:
        heard.append(text)
        handler.up.set()  # up once the wait has been reported

    try:
        ExternalLauncher(f"http://127.0.0.1:{server.server_address[1]}").wait_healthy(120, progress=progress)
    finally:
        server.shutdown()
        server.server_close()
    assert heard and "HTTP 503" in heard[0] and "/health" in heard[0], heard


def test_refusal_is_given_a_grace_before_failing() -> None:
    """A server restarting refuses for a moment: the arm fails only once it has refused for REFUSED_GRACE_S."""
    import time

    port = closed_port()
    t0 = time.monotonic()
    with pytest.raises(ToolFailure, match="connection refused"):
        ExternalLauncher(f"http://127.0.0.1:{port}").wait_healthy(120)
    assert time.monotonic() - t0 >= REFUSED_GRACE_S
