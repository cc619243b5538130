"""A streaming server with a known schedule that records when it wrote each chunk: the truth a load
generator's timing is compared with (benchmarks/loadgen_workers.py, tests/loadgen/test_loadgen_workers.py).

    python benchmarks/loadgen_server.py --port 8000 --ttft-ms 20 --itl-ms 5 [--stats-port 8001] [--reuse-port]

It speaks SGLang's OpenAI chat/completions stream (the chunk shape of tests/data/sglang/chat_stream.txt:
per-chunk usage when `stream_options.continuous_usage_stats` is asked for or `--always-usage` is given,
a finish chunk, `[DONE]`) and its native /generate stream (meta_info.completion_tokens in every chunk,
the finish reason in the last, as tests/data/sglang/generate_stream.txt),
one HTTP chunk per SSE event, `max_tokens` content chunks per request (`--vary v`: max_tokens x U(1-v, 1+v),
seeded, so that requests started together do not all end together and the next ones arrive spread out). Like SGLang's decode loop it
is batch-synchronous: a request gets its first chunk `ttft_ms` after it arrived, then joins the running
batch, and every `itl_ms` one step writes the next chunk of every running request (`--itl-ms 0`: a step
per event-loop turn, as fast as the sockets take it; a request whose socket is full sits a step out).

What it records, per process (GET /stats as JSON; GET /reset clears it): requests, content chunks
written, the first request's arrival and the last write (perf_counter: CLOCK_MONOTONIC, the clock of
every process on the host), the most requests in flight at once (arrival to the final write), per
request its TTFT and the tag of its prompt, and a 1-us histogram of the gaps between one request's
writes, and the process's own CPU seconds.

Arrival is when the request's bytes reached the server's socket: the kernel's receive timestamp
(SO_TIMESTAMPNS, read with recvmsg, CLOCK_REALTIME turned into CLOCK_MONOTONIC), not when this process
got round to reading them. A busy server reads late (a request that arrives while it writes a step of
hundreds of chunks waits for the step), and a client sees that wait as TTFT; a truth that starts the
clock at the read leaves it out and charges it to the client. So the TTFT truth is first write -
arrival (`ttft_ms`), the time from the read is kept beside it (`ttft_read_ms`), and their difference
is the server's own read delay. A write's time is taken when send() has returned: on loopback the
bytes are then in the client's socket. Sockets are written with send() directly (no transport
buffer) and read with recvmsg, on the event loop's add_reader/add_writer.

A prompt ending in ` #N` (the load generator's `--prompts`) gives the request the tag `#N`, so the
benchmark can pair the server's TTFT with the client's request by request.

Several processes can share one port (`--reuse-port`, SO_REUSEPORT) so the server is never the
bottleneck; `--stats-port` gives each its own address for /stats and /reset.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import resource
import socket
import struct
import time

_perf = time.perf_counter
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
GAP_BINS = 100_000  # 1 us bins up to 100 ms; larger gaps land in the last bin


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux (x86, arm): 35; the cmsg type is the same
_ANC = socket.CMSG_SPACE(16)  # one struct timespec


def _kernel_time(anc: list, fallback: float) -> float:
    """The kernel's receive timestamp of the bytes just read, on the perf_counter clock."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data)
            # CLOCK_REALTIME -> CLOCK_MONOTONIC: their offset, read now (it only moves when the clock is stepped)
            off = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            return (sec * 1_000_000_000 + nsec - off) / 1e9
    return fallback


def _timestamps(sock: socket.socket) -> None:
    """Ask for receive timestamps; where the kernel has none (a sandbox's own network stack), the
    arrival is the read, and /stats counts such requests (`read_arrivals`)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        pass


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Stats:
    def __init__(self) -> None:
        self.requests = self.chunks = self.inflight = self.max_inflight = 0
        self.read_arrivals = 0  # requests without a kernel timestamp: their arrival is the read
        self.first_arrival = self.last_write = None
        self.ttft_ms: list[float] = []       # first write - arrival at the socket (the truth)
        self.ttft_read_ms: list[float] = []  # first write - when this process read the request
        self.tags: list[str | None] = []
        self.arrival: list[float] = []       # per request, beside ttft_ms: arrival and first write (perf_counter)
        self.first_write: list[float] = []
        self.gaps: list[float] = []
        self.cpu0 = _cpu()

    def to_json(self) -> dict:
        # plain Python, no numpy: its thread pool would take CPU the clients are measured on
        hist = collections.Counter(min(int(g * 1e6), GAP_BINS - 1) for g in self.gaps)
        bins = sorted(hist)
        return {"requests": self.requests, "chunks": self.chunks, "first_arrival": self.first_arrival,
                "last_write": self.last_write, "max_inflight": self.max_inflight, "inflight": self.inflight,
                "ttft_ms": self.ttft_ms, "ttft_read_ms": self.ttft_read_ms, "tags": self.tags,
                "arrival": self.arrival, "first_write": self.first_write,
                "read_arrivals": self.read_arrivals,
                "gap_hist_us": {"bins": bins, "counts": [hist[b] for b in bins]}, "cpu_s": _cpu() - self.cpu0}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Stream:
    __slots__ = ("proto", "api", "left", "n", "usage", "final_usage", "arrival", "read", "last", "rid", "tag")

    def __init__(self, proto, api: str, tokens: int, usage: bool, final_usage: bool, arrival: float,
                 read: float, rid: int, tag: str | None):
        self.proto, self.api, self.left, self.n = proto, api, tokens, 0
        self.usage, self.final_usage, self.arrival, self.read, self.last = usage, final_usage, arrival, read, None
        self.rid, self.tag = rid, tag


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
        s.read_arrivals += st.arrival == st.read
        if s.first_arrival is None:
            s.first_arrival = st.arrival
        st.proto.write(HEAD)
        loop = asyncio.get_running_loop()
        if self.ttft_s > 0:  # the schedule counts from the arrival, as an engine's queue would
            loop.call_later(max(0.0, st.arrival + self.ttft_s - _perf()), self._first, st)
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
        s, conn = self.stats, st.proto
        if conn.closed:
            s.inflight -= 1
            return False
        st.n += 1
        st.left -= 1
        if st.api == "generate":
            return self._write_generate(st)
        if st.api == "chat":
            delta = b'{"reasoning_content":null,"content":" tok%d"}' % st.n
            choice = b'{"index":0,"delta":%s,"logprobs":null,"finish_reason":null,"matched_stop":null}' % delta
        else:
            choice = b'{"index":0,"text":" tok%d","logprobs":null,"finish_reason":null,"matched_stop":null}' % st.n
        usage = (b',"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":'
                 b'null,"reasoning_tokens":0}' % (8 + st.n, st.n)) if st.usage else b""
        obj = b'chat.completion.chunk' if st.api == "chat" else b'text_completion'
        ev = b'data: {"id":"r%d","object":"%s","created":1,"model":"m","choices":[%s]%s}\n\n' % (
            st.rid, obj, choice, usage)
        self._sent(st, ev)
        if st.left > 0:
            return True
        fin = (b'{"index":0,"delta":{},"finish_reason":"length","matched_stop":null}' if st.api == "chat" else
               b'{"index":0,"text":"","finish_reason":"length","matched_stop":null}')
        usage = (b',"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}' % (8 + st.n, st.n)
                 if st.usage or st.final_usage else b"")
        self._end(st, b'data: {"id":"r%d","object":"%s","choices":[%s]%s}\n\n' % (st.rid, obj, fin, usage))
        return False

    def _write_generate(self, st: Stream) -> bool:
        """SGLang's /generate: each chunk carries the running completion_tokens; the last, the finish reason."""
        fin = b'{"type":"length","length":%d}' % st.n if st.left <= 0 else b"null"
        ev = (b'data: {"text":" tok%d","output_ids":[%d],"meta_info":{"id":"r%d","finish_reason":%s,'
              b'"prompt_tokens":8,"completion_tokens":%d,"cached_tokens":0}}\n\n' % (st.n, st.n, st.rid, fin, st.n))
        self._sent(st, ev)
        if st.left > 0:
            return True
        self._end(st, b"")
        return False

    def _sent(self, st: Stream, ev: bytes) -> None:
        """Write one content chunk and record when it went."""
        s = self.stats
        st.proto.write(_chunk(ev))
        now = _perf()  # send() has returned: on loopback the bytes are in the client's socket
        s.chunks += 1
        if st.last is None:
            s.ttft_ms.append((now - st.arrival) * 1000.0)
            s.ttft_read_ms.append((now - st.read) * 1000.0)
            s.tags.append(st.tag)
            s.arrival.append(st.arrival)
            s.first_write.append(now)
        else:
            s.gaps.append(now - st.last)
        st.last = s.last_write = now

    def _end(self, st: Stream, last: bytes) -> None:
        """The response's last event (if any), [DONE] and the end of the chunked body."""
        conn = st.proto
        conn.write((_chunk(last) if last else b"") + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        self.stats.inflight -= 1
        conn.busy = False
        if conn.buf:  # a request that came in while this one streamed (none from a one-at-a-time client)
            conn.parse()


class Conn:
    """One connection on a raw non-blocking socket: recvmsg (for the kernel's receive timestamp) when
    readable, send() at once when written (what does not fit waits for writable)."""

    __slots__ = ("server", "sock", "fd", "buf", "out", "paused", "closed", "busy", "arrival", "read", "loop")

    def __init__(self, server: "Server", sock: socket.socket) -> None:
        self.server, self.sock, self.fd = server, sock, sock.fileno()
        self.buf, self.out = b"", bytearray()
        self.paused = self.closed = self.busy = False
        self.arrival = self.read = 0.0
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _timestamps(sock)
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.fd, self.readable)

    def readable(self) -> None:
        try:
            data, anc, _, _ = self.sock.recvmsg(1 << 16, _ANC)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.close()
        now = _perf()
        if not data:
            return self.close()
        if not self.buf:  # a request's first bytes: when they reached the socket, and when they were read
            self.arrival, self.read = _kernel_time(anc, now), now
        self.buf += data
        if not self.busy:
            self.parse()

    def parse(self) -> None:
        while not self.busy and not self.closed:
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

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.out:
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                return self.close()
            if n == len(data):
                return
            data = data[n:]
            self.paused = True
            self.loop.add_writer(self.fd, self.writable)
        self.out += data

    def writable(self) -> None:
        try:
            n = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.close()
        del self.out[:n]
        if not self.out:
            self.loop.remove_writer(self.fd)
            self.paused = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.fd)
        if self.out:
            self.loop.remove_writer(self.fd)
        self.sock.close()

    def request(self, line: list[str], body: bytes) -> None:
        method, path = line[0], line[1] if len(line) > 1 else "/"
        if method == "GET":
            if path == "/stats":
                return self._reply(200, json.dumps(self.server.stats.to_json()).encode())
            if path == "/reset":
                self.server.stats = Stats()
                return self._reply(200, b"{}")
            return self._reply(200, b"ok") if path in ("/health", "/v1/models") else self._reply(404, b"")
        if path not in ("/v1/chat/completions", "/v1/completions", "/generate"):
            return self._reply(404, b'{"error":"not found"}')
        try:
            req = json.loads(body)
        except ValueError:
            return self._reply(400, b'{"error":"bad json"}')
        opts = req.get("stream_options") or {}
        self.busy = True
        self.server.rid += 1
        api = "generate" if path == "/generate" else "chat" if path.endswith("chat/completions") else "completions"
        tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or
                     (req.get("sampling_params") or {}).get("max_new_tokens") or 16)
        if self.server.vary:  # lengths spread: requests that started together do not all end together
            tokens = max(1, round(tokens * (1 - self.server.vary + 2 * self.server.vary * self.server.rng.random())))
        self.server.admit(Stream(self, api, tokens,
                                 self.server.always_usage or bool(opts.get("continuous_usage_stats")),
                                 bool(opts.get("include_usage")), self.arrival, self.read, self.server.rid,
                                 _tag(req)))

    def _reply(self, status: int, body: bytes) -> None:
        self.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                   % (status, len(body), body))


def _tag(req: dict) -> str | None:
    """`#N` when the prompt (or the last message) ends in ` #N`, else None."""
    text = req.get("prompt") or req.get("text")
    if text is None and req.get("messages"):
        text = req["messages"][-1].get("content")
    if isinstance(text, str):
        last = text.rsplit(" ", 1)[-1]
        if last.startswith("#"):
            return last
    return None


def _listen(server: Server, host: str, port: int, reuse_port: bool) -> socket.socket:
    loop = asyncio.get_running_loop()
    ls = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    _timestamps(ls)  # on before any request arrives (accepted sockets inherit it)
    ls.bind((host, port))
    ls.listen(4096)
    ls.setblocking(False)

    def accept() -> None:
        while True:
            try:
                sock, _ = ls.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors and the like: the client sees a reset
                return
            Conn(server, sock)

    loop.add_reader(ls.fileno(), accept)
    return ls


async def serve(port: int, ttft_ms: float, itl_ms: float, stats_port: int | None = None,
                reuse_port: bool = False, host: str = "127.0.0.1", always_usage: bool = False,
                vary: float = 0.0) -> None:
    server = Server(ttft_ms, itl_ms, always_usage, vary)
    socks = [_listen(server, host, port, reuse_port)]
    if stats_port:
        socks.append(_listen(server, host, stats_port, False))
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
