"""A streaming server with a known schedule that records when it wrote each chunk: the truth a load
generator's timing is compared with (benchmarks/loadgen_workers.py, tests/bench/test_loadgen_workers.py).

    python benchmarks/loadgen_server.py --port 8000 --ttft-ms 20 --itl-ms 5 [--stats-port 8001] [--reuse-port]

It speaks SGLang's OpenAI chat/completions stream (the chunk shape of tests/data/sglang/chat_stream.txt:
per-chunk usage when `stream_options.continuous_usage_stats` is asked for or `--always-usage` is given,
a finish chunk, `[DONE]`),
one HTTP chunk per SSE event, `max_tokens` content chunks per request (`--vary v`: max_tokens x U(1-v, 1+v),
seeded, so that requests started together do not all end together and the next ones arrive spread out). Like SGLang's decode loop it
is batch-synchronous: a request gets its first chunk `ttft_ms` after it arrived, then joins the running
batch, and every `itl_ms` one step writes the next chunk of every running request (`--itl-ms 0`: a step
per event-loop turn, as fast as the sockets take it; a request whose socket is full sits a step out).

What it records, per process (GET /stats as JSON; GET /reset clears it): requests, content chunks
written, the first request's arrival and the last write (perf_counter: CLOCK_MONOTONIC, the clock of
every process on the host), the most requests in flight at once (arrival to the final write), TTFT
per request (first content write - arrival, ms) and a 1-us histogram of the gaps between one
request's writes, and the process's own CPU seconds. Several processes can share one port
(`--reuse-port`, SO_REUSEPORT) so the server is never the bottleneck; `--stats-port` gives each its
own address for /stats and /reset.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import resource
import socket
import time

_perf = time.perf_counter
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
GAP_BINS = 100_000  # 1 us bins up to 100 ms; larger gaps land in the last bin


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Stats:
    def __init__(self) -> None:
        self.requests = self.chunks = self.inflight = self.max_inflight = 0
        self.first_arrival = self.last_write = None
        self.ttft_ms: list[float] = []
        self.gaps: list[float] = []
        self.cpu0 = _cpu()

    def to_json(self) -> dict:
        # plain Python, no numpy: its thread pool would take CPU the clients are measured on
        hist = collections.Counter(min(int(g * 1e6), GAP_BINS - 1) for g in self.gaps)
        bins = sorted(hist)
        return {"requests": self.requests, "chunks": self.chunks, "first_arrival": self.first_arrival,
                "last_write": self.last_write, "max_inflight": self.max_inflight, "inflight": self.inflight,
                "ttft_ms": self.ttft_ms, "gap_hist_us": {"bins": bins, "counts": [hist[b] for b in bins]},
                "cpu_s": _cpu() - self.cpu0}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Stream:
    __slots__ = ("proto", "chat", "left", "n", "usage", "final_usage", "arrival", "last", "rid")

    def __init__(self, proto, chat: bool, tokens: int, usage: bool, final_usage: bool, arrival: float, rid: int):
        self.proto, self.chat, self.left, self.n = proto, chat, tokens, 0
        self.usage, self.final_usage, self.arrival, self.last, self.rid = usage, final_usage, arrival, None, rid


class Server:
    def __init__(self, ttft_ms: float, itl_ms: float, always_usage: bool = False, vary: float = 0.0) -> None:
        self.ttft_s, self.itl_s, self.always_usage, self.vary = ttft_ms / 1000.0, itl_ms / 1000.0, always_usage, vary
        self.rng = random.Random(0)
        self.stats = Stats()
        self.running: list[Stream] = []
        self.stepping = False
        self.rid = 0

    def admit(self, st: Stream) -> None:
        s = self.stats
        s.requests += 1
        s.inflight += 1
        s.max_inflight = max(s.max_inflight, s.inflight)
        if s.first_arrival is None:
            s.first_arrival = st.arrival
        st.proto.transport.write(HEAD)
        loop = asyncio.get_running_loop()
        if self.ttft_s > 0:
            loop.call_later(self.ttft_s, self._first, st)
        else:
            self._first(st)

    def _first(self, st: Stream) -> None:
        if not self._write(st):
            return
        self.running.append(st)
        if not self.stepping:
            self.stepping = True
            loop = asyncio.get_running_loop()
            if self.itl_s > 0:
                loop.call_later(self.itl_s, self._step)
            else:
                loop.call_soon(self._step)

    def _step(self) -> None:
        keep = []
        for st in self.running:
            if st.proto.paused and not st.proto.closed:  # socket full: this request sits the step out
                keep.append(st)
            elif self._write(st):
                keep.append(st)
        self.running = keep
        if not keep:
            self.stepping = False
            return
        loop = asyncio.get_running_loop()
        if self.itl_s > 0:
            loop.call_later(self.itl_s, self._step)
        else:
            loop.call_soon(self._step)

    def _write(self, st: Stream) -> bool:
        """Write the next chunk of `st`; False when it is finished (or its connection is gone)."""
        s, t = self.stats, st.proto.transport
        if st.proto.closed:
            s.inflight -= 1
            return False
        st.n += 1
        st.left -= 1
        if st.chat:
            delta = b'{"reasoning_content":null,"content":" tok%d"}' % st.n
            choice = b'{"index":0,"delta":%s,"logprobs":null,"finish_reason":null,"matched_stop":null}' % delta
        else:
            choice = b'{"index":0,"text":" tok%d","logprobs":null,"finish_reason":null,"matched_stop":null}' % st.n
        usage = (b',"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":'
                 b'null,"reasoning_tokens":0}' % (8 + st.n, st.n)) if st.usage else b""
        obj = b'chat.completion.chunk' if st.chat else b'text_completion'
        ev = b'data: {"id":"r%d","object":"%s","created":1,"model":"m","choices":[%s]%s}\n\n' % (
            st.rid, obj, choice, usage)
        now = _perf()
        t.write(_chunk(ev))
        s.chunks += 1
        if st.last is None:
            s.ttft_ms.append((now - st.arrival) * 1000.0)
        else:
            s.gaps.append(now - st.last)
        st.last = s.last_write = now
        if st.left > 0:
            return True
        fin = (b'{"index":0,"delta":{},"finish_reason":"length","matched_stop":null}' if st.chat else
               b'{"index":0,"text":"","finish_reason":"length","matched_stop":null}')
        usage = (b',"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}' % (8 + st.n, st.n)
                 if st.usage or st.final_usage else b"")
        t.write(_chunk(b'data: {"id":"r%d","object":"%s","choices":[%s]%s}\n\n' % (st.rid, obj, fin, usage))
                + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        s.inflight -= 1
        st.proto.busy = False
        return False


class Conn(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server, self.buf, self.transport = server, b"", None
        self.paused = self.closed = self.busy = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc) -> None:
        self.closed = True

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            for h in head[1:]:
                k, _, v = h.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
            self.request(head[0].split(" ")[:2], body)

    def request(self, line: list[str], body: bytes) -> None:
        arrival = _perf()
        method, path = line[0], line[1] if len(line) > 1 else "/"
        if method == "GET":
            if path == "/stats":
                return self._reply(200, json.dumps(self.server.stats.to_json()).encode())
            if path == "/reset":
                self.server.stats = Stats()
                return self._reply(200, b"{}")
            return self._reply(200, b"ok") if path in ("/health", "/v1/models") else self._reply(404, b"")
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._reply(404, b'{"error":"not found"}')
        try:
            req = json.loads(body)
        except ValueError:
            return self._reply(400, b'{"error":"bad json"}')
        opts = req.get("stream_options") or {}
        self.busy = True
        self.server.rid += 1
        tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        if self.server.vary:  # lengths spread: requests that started together do not all end together
            tokens = max(1, round(tokens * (1 - self.server.vary + 2 * self.server.vary * self.server.rng.random())))
        self.server.admit(Stream(self, path.endswith("chat/completions"), tokens,
                                 self.server.always_usage or bool(opts.get("continuous_usage_stats")),
                                 bool(opts.get("include_usage")),
                                 arrival, self.server.rid))

    def _reply(self, status: int, body: bytes) -> None:
        self.transport.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, len(body), body))


async def serve(port: int, ttft_ms: float, itl_ms: float, stats_port: int | None = None,
                reuse_port: bool = False, host: str = "127.0.0.1", always_usage: bool = False,
                vary: float = 0.0) -> None:
    loop = asyncio.get_running_loop()
    server = Server(ttft_ms, itl_ms, always_usage, vary)
    await loop.create_server(lambda: Conn(server), host, port, reuse_port=reuse_port or None, backlog=4096)
    if stats_port:
        await loop.create_server(lambda: Conn(server), host, stats_port)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--itl-ms", type=float, default=5.0)
    ap.add_argument("--stats-port", type=int)
    ap.add_argument("--reuse-port", action="store_true")
    ap.add_argument("--always-usage", action="store_true",
                    help="per-chunk usage whatever the request asks: every client gets the same bytes")
    ap.add_argument("--vary", type=float, default=0.0,
                    help="output length max_tokens x U(1-v, 1+v), seeded (default 0: exactly max_tokens)")
    a = ap.parse_args()
    coro = serve(a.port, a.ttft_ms, a.itl_ms, a.stats_port, a.reuse_port, a.host, a.always_usage, a.vary)
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


if __name__ == "__main__":
    main()
