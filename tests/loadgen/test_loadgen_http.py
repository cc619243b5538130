"""toolkit.loadgen.http: chunked and Content-Length bodies split at every byte, keep-alive reuse, a
server that closes a kept-alive connection, a server that dies mid-body."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import read_request

from toolkit.loadgen.http import Pool, _Conn


class Sink:
    def __init__(self):
        self.data = b""
        self.calls = 0

    def feed(self, data, now):
        self.data += data
        self.calls += 1


def _feed_bytewise(raw: bytes):
    async def go():
        c = _Conn()
        fut = asyncio.get_running_loop().create_future()
        s = Sink()
        c._reset(s, fut)
        for i in range(len(raw)):
            c.data_received(raw[i:i + 1])
        return fut.result() if fut.done() else None, s.data

    return asyncio.run(go())


def test_chunked_split_at_every_byte():
    raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1a;ext=1\r\n" + b"x" * 26 +
           b"\r\n0\r\n\r\n")
    assert _feed_bytewise(raw) == ((200, b""), b"hello" + b"x" * 26)


def test_error_body_with_content_length():
    assert _feed_bytewise(b"HTTP/1.1 500 Internal\r\nContent-Length: 4\r\n\r\nboom") == ((500, b"boom"), b"")


def test_keep_alive_reuse_and_server_side_close():
    served = []
    connections = iter(range(1000))  # one number per connection (id() of a closed writer can be reused)

    async def handler(reader, writer):
        conn = next(connections)
        while await read_request(reader):  # keep-alive for two requests, then close without saying so
            served.append(conn)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            await writer.drain()
            if served.count(conn) == 2:
                break
        writer.close()

    async def go():
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        out = []
        async with Pool("127.0.0.1", port) as pool:
            for _ in range(5):
                s = Sink()
                out.append((await pool.post("/x", b"{}", s), s.data))
        server.close()
        return out

    out = asyncio.run(go())
    assert out == [((200, b""), b"hello")] * 5
    assert len(set(served)) == 3  # 2 + 2 + 1 requests: connections were reused, closed ones replaced


def test_server_dying_mid_body_is_an_error():
    async def handler(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
        await writer.drain()
        writer.transport.abort()

    async def go():
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with Pool("127.0.0.1", port) as pool:
            with pytest.raises(ConnectionError):
                await pool.post("/x", b"", Sink())
        server.close()

    asyncio.run(go())
