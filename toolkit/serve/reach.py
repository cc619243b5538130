"""Why a server the toolkit does not run cannot be reached, in words a user can act on.

    verdict = unreachable("http://gw:8443/health", 0, b"ConnectionResetError: ...")
    verdict.kind     # "refused" | "final" | None (waiting may help: not up yet, 503, a timeout)

A refused connection or a URL whose scheme does not match what the port speaks will not get better by
waiting 600 s: the external launcher fails the arm within seconds with one of these messages.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0


@dataclass
class Verdict:
    kind: str | None  # "refused": nothing listens (fail after a short grace); "final": fail now; None: wait
    message: str = ""
    hint: str | None = None


def _host_port(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    return u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80)


def speaks_tls(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Does host:port complete a TLS handshake (certificate not checked: only what the port speaks)?"""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            with ctx.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ssl.SSLError):
        return False


def speaks_plain_http(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Does host:port answer a plain-text HTTP request with an HTTP status line?"""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            return s.recv(5) == b"HTTP/"
    except OSError:
        return False


def unreachable(url: str, status: int, body: bytes) -> Verdict:
    """What an answer (toolkit.serve.base.http_get's status and body) says about the URL as written."""
    host, port = _host_port(url)
    text = body.decode(errors="replace")
    tls = url.startswith("https://")
    if status == 0 and "Connection refused" in text:
        return Verdict("refused", f"connection refused: nothing listens on {host}:{port}",
                       "start the server, or fix the host and port of the target's URL")
    if status == 0 and "gaierror" in text and "Temporary failure" not in text:
        return Verdict("final", f"cannot resolve host {host!r} ({text[:120]})", "fix the host name of the target's URL")
    if "timed out" in text:
        return Verdict(None)  # a slow or filtered host: waiting may help, and a probe would time out too
    if not tls and (status == 0 or status == 400) and speaks_tls(host, port):
        return Verdict("final", f"server speaks TLS on this port ({host}:{port}): the URL says http://",
                       f"write https://{url.split('://', 1)[1].split('/', 1)[0]} in the target's URL")
    if tls and status == 0 and ("WRONG_VERSION_NUMBER" in text or "record layer" in text) \
            and speaks_plain_http(host, port):
        return Verdict("final", f"server speaks plain HTTP on this port ({host}:{port}): the URL says https://",
                       f"write http://{url.split('://', 1)[1].split('/', 1)[0]} in the target's URL")
    return Verdict(None)
