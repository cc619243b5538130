"""What TLS costs the load generator: client CPU per streamed chunk over http:// and https:// (asyncio's own
TLS transport, uvloop's when installed), against a local server in a separate process that streams SSE.

    python benchmarks/loadgen_tls.py [--requests 256] [--chunks 256] [--concurrency 16]

The server is a subprocess (its CPU is not counted); the client's CPU time (process_time) over all chunks
of all requests, after one warm-up round per scheme. A throwaway CA and server certificate are made with
`cryptography` (the test extra); the client verifies the certificate against that CA, as a matrix with
`ca_bundle:` does, and sends a Bearer key.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

SERVER = r'''
import asyncio, ssl, sys
port_file, chunks, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
event = b'data: {"choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
chunk = f"{len(event):x}\r\n".encode() + event + b"\r\n"
tail_ev = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
tail = f"{len(tail_ev):x}\r\n".encode() + tail_ev + b"\r\n0\r\n\r\n"
head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

async def handle(reader, writer):
    try:
        while True:
            h = await reader.readuntil(b"\r\n\r\n")
            n = int(next(l.split(b":")[1] for l in h.split(b"\r\n") if l.lower().startswith(b"content-length")))
            await reader.readexactly(n)
            writer.write(head)
            for i in range(chunks):
                writer.write(chunk)
                if i % 8 == 7:
                    await writer.drain()
                    await asyncio.sleep(0)
            writer.write(tail)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    ctx = None
    if cert != "-":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    open(port_file, "w").write(str(srv.sockets[0].getsockname()[1]))
    await srv.serve_forever()

asyncio.run(main())
'''


def start_server(d: Path, chunks: int, cert: Path | None, key: Path | None) -> tuple[subprocess.Popen, int]:
    port_file = d / f"port-{os.urandom(4).hex()}"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port_file), str(chunks), str(cert or "-"),
                             str(key or "-")])
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("server did not start")
        time.sleep(0.05)
    return proc, int(port_file.read_text())


async def drive(url: str, requests: int, concurrency: int) -> tuple[float, int]:
    from toolkit.loadgen.client import make_pool, send_one
    from toolkit.schema.records import RequestRecord

    pool, prefix = make_pool(url)
    body = b'{"messages":[{"role":"user","content":"hi"}],"stream":true}'
    todo = iter(range(requests))
    chunks = [0]

    async def worker():
        for _ in todo:
            rec = RequestRecord.model_construct(arm="a", domain="d", concurrency=concurrency, repeat=0,
                                                prompt_id="p", warmup=False, send_s=0.0, lag_ms=None)
            await send_one(pool, prefix + "/v1/chat/completions", "chat", body, rec, time.perf_counter())
            assert rec.error is None, rec.error
            chunks[0] += len(rec.chunk_ms)

    t0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu = time.process_time() - t0
    await pool.close()
    return cpu, chunks[0]


def run(coro):
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    from test_external_https import make_ca_and_server_cert

    from toolkit import endpoints

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ca, cert, key = make_ca_and_server_cert(d)
        rows = []
        for scheme in ("http", "https"):
            proc, port = start_server(d, a.chunks, cert if scheme == "https" else None,
                                      key if scheme == "https" else None)
            try:
                url = f"{scheme}://127.0.0.1:{port}"
                endpoints.register(endpoints.Endpoint(url, ca_bundle=ca if scheme == "https" else None,
                                                      api_key="bench-key"))
                run(drive(url, max(a.concurrency, a.requests // 8), a.concurrency))  # warm-up
                cpu, n = run(drive(url, a.requests, a.concurrency))
                rows.append((scheme, n, cpu, cpu / n * 1e6))
            finally:
                proc.terminate()
                proc.wait(10)
    print(f"client CPU per streamed chunk, C={a.concurrency}, {a.requests} requests x {a.chunks} chunks")
    print(f"{'scheme':<7} {'chunks':>8} {'cpu s':>7} {'us/chunk':>9}")
    for scheme, n, cpu, us in rows:
        print(f"{scheme:<7} {n:>8} {cpu:>7.2f} {us:>9.2f}")
    print(f"https / http: {rows[1][3] / rows[0][3]:.2f} x")


if __name__ == "__main__":
    main()
