"""The client's per-read parse (toolkit.loadgen.http._Conn + client._Stream: HTTP chunked framing, SSE,
tokens per chunk), without sockets or an event loop: the schedule server's chunks (SGLang's shape with
per-chunk usage) handed to data_received as reads of K chunks, K = 1 (a realistic load: a chunk a read), 3,
12, 48 and 455 (a saturated client: the reads of a capacity run). CPU time per read and per chunk, for
this tree and, with --baseline DIR, another checkout's client in the same process (before/after).

A second table times the whole read callback of a plain-http connection (_Raw._readable: the read, its
kernel timestamp turned into the perf_counter clock, the bytes copied out of the pool's buffer, the parse)
with the system call left out: `recvmsg_into` is replaced by a C-level stand-in (dict.get) that hands back
what the kernel would (the byte count and one SO_TIMESTAMPNS message), the read's bytes already in the
buffer. What it shows is the Python side of a read, which is what a change to the client can move; the
system call's own cost is the same for every tree that reads with timestamps.

    python benchmarks/loadgen_parse.py [--baseline ../main]
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import struct
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load(root: Path, tag: str) -> types.SimpleNamespace:
    """toolkit.loadgen.http and .client of `root`, as modules of their own (the schema from this tree; a
    tree older than toolkit/loadgen/ has them under toolkit/bench/)."""
    mods = {}
    pkg = "loadgen" if (root / "toolkit" / "loadgen").is_dir() else "bench"
    for name in ("http", "client"):
        spec = importlib.util.spec_from_file_location(f"{tag}_{name}", root / "toolkit" / pkg / f"{name}.py")
        m = importlib.util.module_from_spec(spec)
        if name == "client":
            sys.modules[f"toolkit.{pkg}.http"] = mods["http"]  # client imports Pool from it
        spec.loader.exec_module(m)
        mods[name] = m
    return types.SimpleNamespace(**mods)


def event(n: int) -> bytes:
    delta = b'{"reasoning_content":null,"content":" tok%d"}' % n
    choice = b'{"index":0,"delta":%s,"logprobs":null,"finish_reason":null,"matched_stop":null}' % delta
    usage = (b',"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null,'
             b'"reasoning_tokens":0}' % (8 + n, n))
    e = b'data: {"id":"r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[%s]%s}\n\n' % (
        choice, usage)
    return b"%x\r\n%s\r\n" % (len(e), e)


def per_read(mods, raw: bytes, reps: int) -> tuple[float, list]:
    """CPU seconds per read of `raw` (a fresh connection and stream each time), and the tokens parsed."""
    def once():
        c = mods.http._Conn()
        st = mods.client._Stream("chat")
        c._reset(st, None)
        c.status, c.state = 200, 1
        c.data_received(raw)
        return st
    st = once()
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(reps):
            once()
        best = min(best, (time.process_time() - t0) / reps)
    return best, st.tokens


def per_callback(mods, raw: bytes, reps: int) -> float | None:
    """CPU seconds per call of the read callback on a connection in the middle of a chunked 200 body
    whose every read brings `raw` (None: a tree without the plain-http connection)."""
    Raw = getattr(mods.http, "_Raw", None)
    if Raw is None:
        return None

    class Loop:  # what _Raw.__init__ asks of the event loop
        def add_reader(self, fd, cb):
            pass

    buf = bytearray(len(raw) + 16)
    buf[:len(raw)] = raw
    with socket.socket() as sock:
        c = Raw(sock, Loop(), buf)
    stamp = time.clock_gettime_ns(time.CLOCK_REALTIME)
    anc = [(socket.SOL_SOCKET, 35, struct.pack("qq", stamp // 10**9, stamp % 10**9))]
    c.bufs = ()  # hashable: the stand-in's key (the bytes are in the buffer already)
    c.recv = {(): (len(raw), anc, 0, None)}.get  # recv(bufs, ancbufsize) -> what recvmsg_into returns
    off = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if hasattr(c, "off_s"):  # the offset as whole seconds and nanoseconds
        c.off_s, c.off_ns = divmod(off, 10**9)
    else:
        c.off_ns = off
    c.floor = 0.0
    at = time.perf_counter()
    best = float("inf")
    for _ in range(5):
        st = mods.client._Stream("chat")
        c._reset(st, None)
        c.status, c.state = 200, 1
        read = c._readable
        t0 = time.process_time()
        for _ in range(reps):
            read()
        best = min(best, (time.process_time() - t0) / reps)
        assert len(st.times) == reps * raw.count(b"data:") and abs(st.times[-1] - at) < 0.5, \
            "the reads were not parsed, or not timed by their kernel timestamp"
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="another checkout whose client is timed beside this one")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    trees = {"this": load(ROOT, "this")}
    if a.baseline:
        trees["base"] = load(a.baseline.resolve(), "base")
    print(f"{'K':>4} " + " ".join(f"{n + ' us/read':>14} {n + ' us/chunk':>15}" for n in trees))
    for k in (1, 3, 12, 48, 455):
        raw = b"".join(event(i) for i in range(1, k + 1))
        reps = max(20, 20000 // k)
        row, tokens = [], None
        for name, mods in trees.items():
            t, tok = per_read(mods, raw, reps)
            assert tokens is None or tok == tokens, f"{name} parsed other tokens"
            tokens = tok
            row.append(f"{t * 1e6:14.2f} {t * 1e6 / k:15.3f}")
        print(f"{k:4} " + " ".join(row))
    print("\nthe read callback (_Raw._readable), the system call left out")
    print(f"{'K':>4} " + " ".join(f"{n + ' us/read':>14} {n + ' us/chunk':>15}" for n in trees))
    for k in (1, 3, 12, 48, 455):
        raw = b"".join(event(i) for i in range(1, k + 1))
        reps = max(20, 20000 // k)
        row = []
        for name, mods in trees.items():
            t = per_callback(mods, raw, reps)
            row.append(f"{'-':>14} {'-':>15}" if t is None else f"{t * 1e6:14.2f} {t * 1e6 / k:15.3f}")
        print(f"{k:4} " + " ".join(row))


if __name__ == "__main__":
    main()
