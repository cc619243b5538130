"""A minimal HTTP/1.1 client for streamed POSTs: keep-alive connections, chunked or Content-Length
bodies, the body handed to a sink once per socket read with the time those bytes reached the socket.

Why not aiohttp (which measured faster than httpx): its per-chunk StreamReader wake-ups cost about as
much as the whole of this client (docs/lab/loadgen.md). Here the bytes are parsed in the read callback,
with no coroutine switch per chunk.

    async with Pool(host, port) as pool:
        status, error_body = await pool.post(b"/v1/completions", body, sink)   # sink.feed(bytes, t)

A read's time is when its bytes reached the socket, as early as the kernel allows: plain http:// reads
its own non-blocking socket (the event loop's add_reader, recvmsg) with the kernel's receive timestamp
(SO_TIMESTAMPNS, on the perf_counter clock), so a chunk that waits in the socket while this process
parses other connections' reads, or is preempted, keeps the time it arrived. Without a kernel timestamp
(another OS, a network stack without them) it is the read callback's first clock read, before any parse.

https:// goes through asyncio's own TLS transport (loop.create_connection with an SSLContext): the
protocol sees decrypted bytes in data_received, timed on entry (before any parse), and the per-read
parse is the same. Extra headers (an Authorization: Bearer key) are part of the fixed request head; an
error body that echoes the key has it masked before it leaves the pool.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import itertools
import os
import socket
import ssl as _ssl
import struct
import sys
import time
from typing import Protocol

_perf = time.perf_counter
_HEX = itertools.repeat(16)
_LAST = b"\r\n0\r\n\r\n"
_READ = 1 << 18  # bytes a read takes at most (uvloop's stream buffer is the same size)
# kernel receive timestamps: Linux's SO_TIMESTAMPNS (CLOCK_REALTIME), turned into perf_counter's clock,
# which is CLOCK_MONOTONIC there; anywhere else a read is timed by the read callback
_KERNEL_TS = sys.platform == "linux" and time.get_clock_info("perf_counter").implementation == \
    "clock_gettime(CLOCK_MONOTONIC)"
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_ANC = socket.CMSG_SPACE(16) if _KERNEL_TS else 0  # one struct timespec
_TIMESPEC = struct.Struct("qq").unpack_from


class Sink(Protocol):
    def feed(self, data: bytes, now: float) -> None: ...


class _Conn(asyncio.Protocol):
    __slots__ = ("transport", "buf", "state", "need", "sink", "done", "status", "keep", "err", "last_rx", "closed")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reset(None, None)

    def _reset(self, sink, done) -> None:
        self.buf, self.state, self.need, self.sink, self.done = b"", 0, 0, sink, done
        self.status, self.keep, self.err, self.last_rx = 0, True, bytearray(), _perf()

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # what the pool does with a connection (here through the transport; _Raw has its own socket)
    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.transport.abort()

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.state == 3:  # body until EOF: EOF is the end
            self._finish()
        elif self.done is not None and not self.done.done():
            self.done.set_exception(exc or ConnectionResetError("server closed the connection mid-response"))

    def _finish(self) -> None:
        self.state = 4
        if self.done is not None and not self.done.done():
            self.done.set_result((self.status, bytes(self.err)))

    def _body(self, data: bytes, now: float) -> None:
        if self.status == 200:
            try:
                self.sink.feed(data, now)
            except Exception as exc:  # noqa: BLE001 - a malformed stream fails this request only
                if self.done is not None and not self.done.done():
                    self.done.set_exception(exc)
                self.keep = False
        elif len(self.err) < 4096:
            self.err += data

    def _whole_chunks(self, buf: bytes, now: float) -> bool:
        """The common read of a chunked body in a few C-level calls instead of a loop turn per chunk:
        split at CRLF, the pieces alternate size line and data; when every size is the length of the
        data after it (no chunk extension, no CRLF inside the data, not the last chunk), that is the
        framing. A read may begin inside a chunk (its rest is taken first) and end inside a chunk (its
        data so far goes out now), inside a size line (kept for the next read) or with the last chunk
        (a zero size, no trailers: the end of the body). A read of exactly one chunk (a chunk a read is
        what a realistic load gives) is taken by its size line alone. False, with nothing changed, when
        the read is anything else: the loop in data_received takes it, byte-exact."""
        need = self.need
        if not need:  # the commonest read under load: one whole chunk, nothing more
            nl = buf.find(b"\r\n", 0, 10)
            if nl > 0:
                try:
                    size = int(buf[:nl], 16)
                except ValueError:  # a chunk extension: below
                    size = -4
                # framed by its size alone (its data may hold a CRLF); a zero size is the body's end: below
                if len(buf) == nl + size + 4 and size and buf[-2:] == b"\r\n":
                    self.buf = b""
                    self._body(buf[nl + 2:-2], now)
                    return True
        head = b""
        last = buf.endswith(_LAST)  # and the body ends here (the zero-size chunk, no trailers)
        if last:
            buf = buf[:-5]
        if need:  # the rest of a chunk that began in an earlier read, then its CRLF
            if need > len(buf) or buf[max(0, need - 2):need] != b"\r\n"[max(0, 2 - need):]:
                return False
            head, buf = buf[:max(0, need - 2)], buf[need:]
        parts = buf.split(b"\r\n")
        m = (len(parts) - 1) >> 1
        end = 2 * m
        datas = parts[1:end:2]
        try:
            if list(map(int, parts[0:end:2], _HEX)) != list(map(len, datas)) or b"" in datas:
                return False
            if len(parts) & 1:  # ends at a chunk boundary or inside a size line
                rest, need = parts[-1], 0
            else:               # ends inside a chunk's data: a size line, then part of its data
                size, rest = int(parts[-2], 16), b""
                part = parts[-1]
                need = size + 2 - len(part)
                if size == 0 or need < 1:
                    return False
                datas.append(part[:size])
        except ValueError:  # a size line that is not plain hex (an extension, a stray CRLF)
            return False
        if last and (rest or need):
            return False
        self.buf, self.need = rest, need
        if head:
            datas.insert(0, head)
        if datas:
            data = datas[0] if len(datas) == 1 else b"".join(datas)
            self._body(data, now)
        if last:
            self._finish()
        return True

    def data_received(self, data: bytes) -> None:
        """The transport's read callback (https): timed on entry, before any parse."""
        self.received(data, _perf())

    def received(self, data: bytes, now: float) -> None:  # noqa: C901 - one small state machine
        """One read's bytes, `now` the time they reached the socket (or the read callback's entry)."""
        self.last_rx = now
        buf = self.buf + data if self.buf else data
        if self.state == 1 and self._whole_chunks(buf, now):
            return
        if self.state == 0:  # status line and headers
            if buf[:1] == b"\r":
                buf = buf.lstrip(b"\r\n")  # the last CRLF of the previous chunked body, if it came late
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buf = buf
                return
            lines = buf[:end].split(b"\r\n")
            self.status = int(lines[0].split(b" ", 2)[1])
            headers = {}
            for h in lines[1:]:
                k, _, v = h.partition(b":")
                headers[k.strip().lower()] = v.strip().lower()
            self.keep = headers.get(b"connection") != b"close" and lines[0].startswith(b"HTTP/1.1")
            buf = buf[end + 4:]
            if b"chunked" in headers.get(b"transfer-encoding", b""):
                self.state = 1
                if buf and self._whole_chunks(buf, now):
                    return
            elif b"content-length" in headers:
                self.state, self.need = 2, int(headers[b"content-length"])
            else:
                self.state, self.keep = 3, False
        if self.state == 1:  # chunked: size line, data, CRLF
            parts: list[bytes] = []
            append = parts.append
            pos, n, need = 0, len(buf), self.need
            while pos < n:
                if need == 0:
                    nl = buf.find(b"\r\n", pos)
                    if nl < 0:
                        break
                    line = buf[pos:nl]
                    size = int(line.split(b";", 1)[0] if b";" in line else line, 16)
                    if size == 0:
                        if parts:
                            self._body(b"".join(parts), now)
                        self.buf, self.need = b"", 0
                        self._finish()  # trailers (none from these servers) are ignored
                        return
                    pos = nl + 2
                    end = pos + size
                    if end + 2 <= n:  # the whole chunk is in this read: the common case
                        append(buf[pos:end])
                        pos = end + 2
                        continue
                    need = size + 2
                # a chunk that goes on in later reads: its data, not the 2 bytes of CRLF after it
                take = min(need, n - pos)
                data = min(take, need - 2)
                if data > 0:
                    append(buf[pos:pos + data])
                need -= take
                pos += take
            self.need = need
            self.buf = buf[pos:]
            if parts:
                self._body(parts[0] if len(parts) == 1 else b"".join(parts), now)
        elif self.state == 2:
            take = buf[:self.need]
            self.need -= len(take)
            self.buf = b""
            if take:
                self._body(take, now)
            if self.need <= 0:
                self._finish()
        elif self.state == 3:
            self.buf = b""
            self._body(buf, now)


class _Raw(_Conn):
    """A plain-TCP connection on its own non-blocking socket, read on the event loop's add_reader with
    recvmsg: each read comes with the kernel's receive timestamp (the time of the read's newest bytes),
    so what this process did before it got round to the read (other connections' reads, a GC pause,
    being descheduled) is not in the time. The read callback's own clock read stands in where the kernel
    gave none, or gave one outside [request written, read] (a clock stepped in between)."""

    __slots__ = ("sock", "fd", "loop", "recv", "bufs", "view", "out", "off_s", "off_ns", "floor")

    def __init__(self, sock: socket.socket, loop, buf: bytearray) -> None:
        super().__init__()
        self.sock, self.fd, self.loop, self.recv = sock, sock.fileno(), loop, sock.recvmsg_into
        self.bufs, self.view = (buf,), memoryview(buf)  # one buffer per pool: a read is copied out at once
        self.out = b""
        self.off_s, self.off_ns, self.floor = 0, 0, 0.0
        loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            n, anc, _, _ = self.recv(self.bufs, _ANC)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            return self._lost(exc)
        now = _perf()
        if not n:
            return self._lost(None)
        if anc:
            sec, nsec = _TIMESPEC(anc[0][2])
            t = (sec - self.off_s) + (nsec - self.off_ns) * 1e-9
            if self.floor <= t <= now:
                now = t
        self.received(self.view[:n].tobytes(), now)

    def write(self, data: bytes) -> None:
        if _KERNEL_TS:  # the clocks' offset for this request's reads (it moves when the wall clock is stepped),
            # in whole seconds and nanoseconds, so that a read's conversion is small-int arithmetic
            self.off_s, self.off_ns = divmod(time.clock_gettime_ns(time.CLOCK_REALTIME) -
                                             time.clock_gettime_ns(time.CLOCK_MONOTONIC), 1_000_000_000)
        self.floor = _perf()  # no byte of the answer reached the socket before this
        if not self.out:
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                return self._lost(exc)
            if n == len(data):
                return
            data = data[n:]
            self.loop.add_writer(self.fd, self._writable)
        self.out += data

    def _writable(self) -> None:
        try:
            n = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            return self._lost(exc)
        self.out = self.out[n:]
        if not self.out:
            self.loop.remove_writer(self.fd)

    def usable(self) -> bool:
        return not self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.remove_reader(self.fd)
            if self.out:
                self.loop.remove_writer(self.fd)
            self.sock.close()

    abort = close

    def _lost(self, exc: BaseException | None) -> None:
        if not self.closed:
            self.close()
            self.connection_lost(exc)

    @classmethod
    async def open(cls, loop, addrs: list, buf: bytearray) -> tuple["_Raw", tuple]:
        """Connect to the first address of `addrs` (getaddrinfo's) that answers; the connection and it."""
        err: OSError | None = None
        for family, kind, proto, _, where in addrs:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if _KERNEL_TS:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                    except OSError:  # no kernel timestamps here: reads are timed by the callback
                        pass
                await _connect(loop, sock, where)
            except OSError as exc:
                sock.close()
                err = exc
                continue
            except BaseException:
                sock.close()
                raise
            return cls(sock, loop, buf), (family, kind, proto, "", where)
        raise err or OSError(f"no address to connect to: {addrs}")


async def _connect(loop, sock: socket.socket, where: tuple) -> None:
    """A non-blocking connect to an address (loop.sock_connect would look the address up again, in a
    thread: milliseconds for each of a cell's first connections on a busy host)."""
    err = sock.connect_ex(where)
    if err in (0, errno.EISCONN):
        return
    if err not in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
        raise OSError(err, f"Connect call failed {where[:2]}: {os.strerror(err)}")
    try:  # on loopback the handshake is often done already: no wait for the loop
        sock.getpeername()
        return
    except OSError:
        pass
    fd = sock.fileno()
    done = loop.create_future()
    loop.add_writer(fd, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        loop.remove_writer(fd)
    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:  # OSError(errno, ...) is the errno's subclass: ConnectionRefusedError, ...
        raise OSError(err, f"Connect call failed {where[:2]}: {os.strerror(err)}")


class Pool:
    """Keep-alive connections to one host:port; one request per connection at a time."""

    def __init__(self, host: str, port: int, read_timeout_s: float = 300.0, connect_timeout_s: float = 30.0, *,
                 ssl: _ssl.SSLContext | None = None, headers: dict[str, str] | None = None):
        self.host, self.port = host, port
        self.read_timeout_s, self.connect_timeout_s = read_timeout_s, connect_timeout_s
        self.ssl = ssl
        self.idle: list[_Conn] = []
        self.all: set[_Conn] = set()
        default_port = 443 if ssl is not None else 80
        authority = f"[{host}]" if ":" in host else host
        authority += "" if port == default_port else f":{port}"
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.head = f"Host: {authority}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n{extra}"
        # values to mask in error bodies (an API key a server echoes back)
        self.secrets = [v.split()[-1].encode() for k, v in (headers or {}).items() if k.lower() == "authorization"]
        self.addrs: list | None = None  # plain TCP: the host's addresses, resolved once
        self.buf = bytearray(_READ)     # plain TCP: every connection's reads land here first

    async def _conn(self, fresh: bool = False) -> tuple[_Conn, bool]:
        while self.idle and not fresh:
            c = self.idle.pop()
            if c.usable():
                return c, True
            self.all.discard(c)
        loop = asyncio.get_running_loop()
        if self.ssl is None:
            c = await asyncio.wait_for(self._open(loop), self.connect_timeout_s)
        else:
            connect = loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl, server_hostname=self.host)
            _, c = await asyncio.wait_for(connect, self.connect_timeout_s)
        self.all.add(c)
        return c, False

    async def _open(self, loop) -> _Raw:
        if self.addrs is None:
            try:  # an address, not a name: no lookup (a first getaddrinfo costs a millisecond, the loop's a thread)
                ip = ipaddress.ip_address(self.host)
                addrs = [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (self.host, self.port, 0, 0))
                         if ip.version == 6 else
                         (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (self.host, self.port))]
            except ValueError:
                addrs = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            self.addrs = self.addrs or addrs
        c, addr = await _Raw.open(loop, self.addrs, self.buf)
        self.addrs = [addr] + [a for a in self.addrs if a != addr]  # the one that answered first from now on
        return c

    async def post(self, path: str, body: bytes, sink: Sink) -> tuple[int, bytes]:
        """Send; feed the 200 body to sink as it comes. Returns (status, first 4 KiB of a non-200 body).
        Raises ConnectionError / TimeoutError when the connection fails or stays silent too long.
        A kept-alive connection the server closed before answering is retried once on a new one."""
        c, reused = await self._conn()
        try:
            return await self._once(c, path, body, sink)
        except ConnectionError:
            if not reused or c.state != 0 or c.buf:
                raise
        c, _ = await self._conn(fresh=True)
        return await self._once(c, path, body, sink)

    async def _once(self, c: _Conn, path: str, body: bytes, sink: Sink) -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        c._reset(sink, done)
        c.write(f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        timer = loop.call_later(self.read_timeout_s, self._check, c, done)
        try:
            status, err = await done
        except BaseException:
            c.abort()
            self.all.discard(c)
            raise
        finally:
            timer.cancel()
        if c.keep and not c.closed:
            self.idle.append(c)
        else:
            c.close()
            self.all.discard(c)
        for secret in self.secrets:
            if err and secret in err:
                err = err.replace(secret, b"***")
        return status, err

    def _check(self, c: _Conn, done: asyncio.Future) -> None:
        if done.done():
            return
        idle = _perf() - c.last_rx
        if idle >= self.read_timeout_s:
            done.set_exception(TimeoutError(f"no data for {self.read_timeout_s:.0f} s"))
        else:
            asyncio.get_running_loop().call_later(self.read_timeout_s - idle, self._check, c, done)

    async def close(self) -> None:
        for c in list(self.all):
            c.close()
        self.all.clear()
        self.idle.clear()

    async def __aenter__(self) -> "Pool":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
