"""External targets as users meet them: https:// with a CA the spec names and an API key from an environment
variable the spec names. A local TLS server (a throwaway CA made here) streams OpenAI-style chat answers and
refuses any request without the key; the matrix runs through the real CLI, and the key appears nowhere in
the run's folder or the command's output."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import secrets
import ssl
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import run_cli
from toolkit.results import compact

KEY_ENV = "TOOLKIT_TEST_GATEWAY_KEY"


def make_ca_and_server_cert(d: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1/localhost signed by it: (ca.pem, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolkit test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem, cert_pem, key_pem = d / "ca.pem", d / "server.pem", d / "server.key"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return ca_pem, cert_pem, key_pem


class Gateway(BaseHTTPRequestHandler):
    """An OpenAI-compatible gateway in miniature: every path wants `Authorization: Bearer <key>`; 401 otherwise."""

    protocol_version = "HTTP/1.1"
    key = ""
    seen: list = []  # (method, path, authorized)

    def log_message(self, *args) -> None:  # quiet
        pass

    def _authorized(self) -> bool:
        ok = self.headers.get("Authorization") == f"Bearer {self.key}"
        self.seen.append((self.command, self.path, ok))
        if not ok:
            body = b'{"error": {"message": "missing or wrong API key"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        return ok

    def do_GET(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        body, status = (b'{"status": "ok"}', 200) if self.path == "/health" else (b"{}", 404)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self._authorized():
            return
        n = int(body.get("max_tokens") or 8)
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


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    ca, cert, key = make_ca_and_server_cert(d)
    api_key = "tk-" + secrets.token_hex(20)  # a shape no generic scrubber knows: only toolkit's care hides it
    handler = type("H", (Gateway,), {"key": api_key, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield {"url": f"https://127.0.0.1:{server.server_address[1]}", "ca": ca, "key": api_key, "seen": handler.seen}
    server.shutdown()
    server.server_close()


def write_specs(tmp: Path, url: str, ca: Path | None, key_env: str | None = KEY_ENV) -> Path:
    (tmp / "env.yaml").write_text(textwrap.dedent("""\
        kind: Environment
        name: gw
        engine: sglang
        base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
        sglang: {version: 0.5.17}
        servers:
          baseline: {model-path: /models/target}
          eagle3: {model-path: /models/target, speculative-algorithm: EAGLE3}
        """))
    target = {"kind": "external", "url": url}
    if ca:
        target["ca_bundle"] = str(ca)
    if key_env:
        target["api_key_env"] = key_env
    m = tmp / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: gw
        environment: env.yaml
        arms: [baseline, eagle3]
        target: {json.dumps(target)}
        workloads: [coding]
        api: chat
        concurrency: [1, 4]
        output_len: 6
        requests: 8
        warmup: 1
        """))
    return m


def test_https_target_with_api_key_runs_and_never_writes_the_key(tmp_path: Path, gateway) -> None:
    m = write_specs(tmp_path, gateway["url"], gateway["ca"])
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--json", env={KEY_ENV: gateway["key"]},
                timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "complete" and len(summary["cells"]) == 4
    assert all(c["status"] == "ok" and c["n_errors"] == 0 for c in summary["cells"]), summary["cells"]
    # every request (health, server_info, the measured ones) carried the key over TLS
    posts = [s for s in gateway["seen"] if s[0] == "POST"]
    assert len(posts) == 2 * 2 * (8 + 1) and all(ok for _, _, ok in gateway["seen"])
    # the manifest records that a key was used (the archive's scrubber masks even the variable's name)
    target = json.loads((run / "manifest.json").read_text())["matrix"]["resolved"]["target"]
    assert target["api_key_env"] and target["ca_bundle"] == str(gateway["ca"])
    key = gateway["key"].encode()
    leaked = [p for p in run.rglob("*") if p.is_file() and key in p.read_bytes()]
    assert leaked == [] and gateway["key"] not in r.stdout + r.stderr


def test_missing_key_variable_is_a_clear_error_naming_it(tmp_path: Path, gateway) -> None:
    m = write_specs(tmp_path, gateway["url"], gateway["ca"])
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"), env={KEY_ENV: ""})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert KEY_ENV in r.stderr and f"{m}:" in r.stderr and "is not set" in r.stderr
    assert not (tmp_path / "results").exists()


def test_untrusted_certificate_and_missing_key_fail_at_once(gateway) -> None:
    from toolkit import endpoints
    from toolkit.errors import ToolFailure
    from toolkit.serve.base import ExternalLauncher

    url = gateway["url"]
    with pytest.raises(ToolFailure, match="does not verify"):  # no ca_bundle: the system store lacks the test CA
        ExternalLauncher(url).wait_healthy(30)
    endpoints.register(endpoints.Endpoint(url, ca_bundle=gateway["ca"]))
    try:
        with pytest.raises(ToolFailure, match="HTTP 401"):  # trusted now, but no key
            ExternalLauncher(url).wait_healthy(30)
        endpoints.register(endpoints.Endpoint(url, ca_bundle=gateway["ca"], api_key=gateway["key"]))
        ExternalLauncher(url).wait_healthy(30)
    finally:
        endpoints.unregister(url)


def test_spec_rules_for_external_tls_fields(tmp_path: Path) -> None:
    m = write_specs(tmp_path, "http://127.0.0.1:9", tmp_path / "ca.pem")
    (tmp_path / "ca.pem").write_text("x")
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "ca_bundle" in r.stderr and "https://" in r.stderr
    m = write_specs(tmp_path, "https://127.0.0.1:9", None, key_env="1BAD")
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "api_key_env" in r.stderr and "environment variable's name" in r.stderr
