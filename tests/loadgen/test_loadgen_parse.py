"""The per-read fast paths of the client (toolkit.loadgen.http._Conn._whole_chunks, client._Stream._ordinary
and _bulk) against a plain oracle: every event JSON-decoded on its own, stamped with the read in which its
line ended. Streams: SGLang's recorded bytes (tests/data/sglang), the schedule server's shape with per-chunk
usage (tokens per chunk 1, or 1-4 as with speculative decoding), usage only at the end, reasoning, an
in-stream error, spaced JSON, CRLF event separators; HTTP framing of one event per chunk, several per
chunk, an event split over chunks, chunk extensions; reads cut at random places (seeded), byte by byte
and whole."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from toolkit.loadgen.client import _Stream
from toolkit.loadgen.http import _Conn

DATA = Path(__file__).resolve().parents[1] / "data" / "sglang"


def oracle(api: str, events: list[bytes], ends: list[int]) -> dict:
    """What the stream means, event by event: content chunks (read index, tokens), finish, error, usage."""
    times, tokens, last, finish, error, total, deltas, done = [], [], 0, None, None, None, False, False
    for ev, t in zip(events, ends):
        line = ev.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            break
        obj = json.loads(payload)
        if obj.get("error"):
            error = obj["error"].get("message") if isinstance(obj["error"], dict) else str(obj["error"])
            continue
        content = False
        for ch in obj.get("choices") or ():
            delta = ch.get("delta") or {}
            for v in (ch.get("text"), delta.get("content"), delta.get("reasoning_content")):
                content |= isinstance(v, str) and v != ""
            content |= isinstance(delta.get("tool_calls"), list)
            finish = ch.get("finish_reason") or finish
        n = 1
        usage = obj.get("usage")
        if usage:
            total = usage["completion_tokens"]
            if content:
                n, deltas = total - last, True
            last = total
        if content:
            times.append(t)
            tokens.append(n)
    return {"times": times, "tokens": tokens, "finish": finish, "error": error, "usage_total": total,
            "usage_deltas": deltas, "done": done}


def frame(events: list[bytes], rng: random.Random, mode: str) -> tuple[bytes, list[int]]:
    """HTTP chunked body of the events; also where in it each event's data line ends (its newline)."""
    if mode == "one per chunk":
        pieces = events
    elif mode == "several per chunk":
        pieces, i = [], 0
        while i < len(events):
            k = rng.randint(1, 5)
            pieces.append(b"".join(events[i:i + k]))
            i += k
    else:  # "split": chunks cut anywhere, an event over two or more chunks
        whole = b"".join(events)
        cuts = sorted(rng.sample(range(1, len(whole)), min(len(whole) - 1, len(events) * 2)))
        pieces = [whole[a:b] for a, b in zip([0] + cuts, cuts + [len(whole)])]
    body, where = b"", []  # where[j] = (offset in the joined events, offset in the body) of piece j
    acc = 0
    for p in pieces:
        ext = b";x=1" if mode == "split" and rng.random() < 0.1 else b""
        body += b"%x%s\r\n" % (len(p), ext)
        where.append((acc, len(body)))
        body += p + b"\r\n"
        acc += len(p)
    body += b"0\r\n\r\n"
    marks, acc = [], 0
    for e in events:
        nl = acc + e.index(b"\n")  # the data line's newline, in the joined events
        j = max(k for k, (s, _) in enumerate(where) if s <= nl)
        marks.append(where[j][1] + nl - where[j][0])
        acc += len(e)
    return body, marks


def chunk_ends(body: bytes) -> list[int]:
    """Where each chunk of a chunked body ends (after its CRLF), the zero-size one included."""
    ends, pos = [], 0
    while pos < len(body):
        nl = body.index(b"\r\n", pos)
        size = int(body[pos:nl].split(b";")[0], 16)
        pos = nl + 2 + size + 2
        ends.append(pos)
    return ends


def feed(api: str, raw: bytes, cuts: list[int]) -> dict:
    """The client's view: the response (head + body) in reads cut at `cuts`; `now` = the read's index."""
    import toolkit.loadgen.http as http

    async def go():
        c, st = _Conn(), _Stream(api)
        fut = asyncio.get_running_loop().create_future()
        c._reset(st, fut)
        for i, (a, b) in enumerate(zip([0] + cuts, cuts + [len(raw)])):
            http._perf = lambda i=i: float(i)  # the read's timestamp: its index
            c.data_received(raw[a:b])
        return fut.result() if fut.done() else None, st

    perf = http._perf
    try:
        res, st = asyncio.run(go())
    finally:
        http._perf = perf
    assert res == (200, b""), res
    return {"times": st.times, "tokens": st.tokens, "finish": st.finish, "error": st.error,
            "usage_total": st.usage_total, "usage_deltas": st.usage_deltas, "done": st.done}


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def sglang_like(n: int, rng: random.Random, usage: str = "each", step: tuple[int, int] = (1, 1),
                reasoning: int = 0, error_at: int | None = None, sep: bytes = b"\n\n", spaced: bool = False,
                api: str = "chat") -> list[bytes]:
    dumps = (lambda o: json.dumps(o).encode()) if spaced else (lambda o: json.dumps(o, separators=(",", ":")).encode())
    evs, total = [], 0
    if api == "chat":
        evs.append({"id": "r", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
    for i in range(n):
        if error_at == i:
            evs.append({"error": {"message": "boom", "code": 500}})
            continue
        total += rng.randint(*step)
        text = f" t{i}\"\\n" if i % 7 == 0 else f" t{i}"
        if api == "chat":
            delta = {"reasoning_content": text, "content": None} if i < reasoning else \
                {"reasoning_content": None, "content": text}
            ch = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, "matched_stop": None}
            ev = {"id": "r", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [ch]}
        else:
            ev = {"id": "r", "object": "text_completion", "choices": [
                {"index": 0, "text": text, "logprobs": None, "finish_reason": None}]}
        if usage == "each":
            ev["usage"] = {"prompt_tokens": 8, "total_tokens": 8 + total, "completion_tokens": total,
                           "prompt_tokens_details": None}
        evs.append(ev)
    fin = {"id": "r", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    if usage == "each":
        fin["usage"] = {"prompt_tokens": 8, "total_tokens": 8 + total, "completion_tokens": total}
    evs.append(fin)
    if usage == "end":
        evs.append({"id": "r", "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": total}})
    out = [b"data: " + dumps(e) + sep for e in evs]
    return out + [b"data: [DONE]" + sep]


def recorded(name: str) -> list[bytes]:
    raw = (DATA / f"{name}.txt").read_bytes()
    return [e + b"\n\n" for e in raw.split(b"\n\n") if e.strip()]


STREAMS = {
    "sglang chat (recorded)": ("chat", lambda rng: recorded("chat_stream")),
    "sglang completions (recorded)": ("completions", lambda rng: recorded("completions_stream")),
    "usage each chunk": ("chat", lambda rng: sglang_like(300, rng)),
    "usage, 1-4 tokens a chunk": ("chat", lambda rng: sglang_like(300, rng, step=(1, 4))),
    "usage at the end only": ("chat", lambda rng: sglang_like(300, rng, usage="end")),
    "completions, usage each": ("completions", lambda rng: sglang_like(200, rng, api="completions")),
    "reasoning then content": ("chat", lambda rng: sglang_like(120, rng, reasoning=40)),
    "error mid-stream": ("chat", lambda rng: sglang_like(120, rng, error_at=60)),
    "spaced JSON": ("chat", lambda rng: sglang_like(120, rng, spaced=True)),
    "CRLF separators": ("chat", lambda rng: sglang_like(120, rng, sep=b"\r\n\r\n")),
}


@pytest.mark.parametrize("mode", ["one per chunk", "several per chunk", "split"])
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_fast_paths_agree_with_the_oracle(name, mode):
    api, make = STREAMS[name]
    for seed in range(4):
        rng = random.Random(seed)
        events = make(rng)
        body, ends = frame(events, rng, mode)
        raw = HEAD + body
        ends = [len(HEAD) + e for e in ends]
        n = len(raw)
        plans = [sorted(rng.sample(range(1, n), k)) for k in (1, 3, 20, 200) if k < n]
        if seed == 0:
            plans.append(list(range(1, n)) if n < 6000 else list(range(1, n, 7)))  # (near) byte by byte
        plans.append([len(HEAD) + e for e in chunk_ends(body)][:-1])  # a chunk a read, as under real load
        for cuts in plans:
            bounds = cuts + [n]

            def read_of(pos: int) -> int:  # the index of the read that holds byte `pos`
                lo = 0
                for i, b in enumerate(bounds):
                    if pos < b:
                        return i
                return lo
            want = oracle(api, events, [read_of(e) for e in ends])
            got = feed(api, raw, cuts)
            assert got == want, (name, mode, seed, len(cuts))


def test_one_read_of_whole_chunks_is_taken_by_the_fast_paths():
    """The fast paths are what runs on the common read (not only correct because the slow ones take over)."""
    rng = random.Random(1)
    events = sglang_like(50, rng)[1:-2]  # content chunks with usage only
    body, _ = frame(events, rng, "one per chunk")
    c, st = _Conn(), _Stream("chat")
    c._reset(st, None)
    c.status, c.state = 200, 1
    assert c._whole_chunks(body[:-5] + b"3", 0.5)  # every chunk but the last (zero-size) one, a size begun
    assert c.buf == b"3" and c.need == 0
    assert len(st.times) == 50 and st.times == [0.5] * 50 and sum(st.tokens) == st.usage_total
    st2 = _Stream("chat")
    assert st2._ordinary(b"".join(events), 1.0) and st2.tokens == st.tokens
    c3, st3 = _Conn(), _Stream("chat")  # a chunk a read: each taken whole (by its size line), one event each
    c3._reset(st3, None)
    c3.status, c3.state = 200, 1
    ends = chunk_ends(body)
    for i, (a, b) in enumerate(zip([0] + ends, ends[:-1])):
        assert c3._whole_chunks(body[a:b], float(i)) and c3.buf == b"" and c3.need == 0
    assert st3.times == [float(i) for i in range(50)] and st3.tokens == st.tokens
    crlf_inside = b"%x\r\n%s\r\n" % (len(b"a\r\nb"), b"a\r\nb")
    c4 = _Conn()
    got = []
    c4._reset(type("Sink", (), {"feed": lambda self, d, t: got.append(d)})(), None)
    c4.status, c4.state = 200, 1
    assert c4._whole_chunks(crlf_inside, 0.0) and got == [b"a\r\nb"]  # framed by its size, CRLF and all
    assert not _Stream("chat")._ordinary(b"".join(sglang_like(5, rng)), 1.0)  # role chunk, finish, [DONE]
