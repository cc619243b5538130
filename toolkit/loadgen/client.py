"""One streamed request -> one RequestRecord. HTTP by toolkit.loadgen.http (asyncio Protocols, keep-alive
connections: cheaper per chunk than aiohttp, which measured cheaper than httpx: docs/lab/loadgen.md); SSE
parsed incrementally from raw reads.

Per chunk only what is needed is parsed: a content chunk is recognised by a byte search; JSON is
decoded only for chunks that carry usage, a finish reason or an error (and the last /generate chunk
for meta_info). All events that arrive in one read get that read's timestamp.
"""

from __future__ import annotations

import json
import re
import time
from itertools import repeat
from operator import sub

from urllib.parse import urlsplit

from toolkit.errors import ToolkitError
from toolkit.loadgen.http import Pool
from toolkit.loadgen.load import Api, CellLoad
from toolkit.schema.eligibility import bundled
from toolkit.schema.records import Prompt, RequestRecord

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
_perf = time.perf_counter

# A content chunk has a non-empty string after one of these keys (a JSON string cannot contain an
# unescaped quote, so the keys cannot occur inside generated text). The slow keys need a JSON decode
# when their value is an object/string (not null).
_CONTENT = (b'"text":', b'"content":', b'"reasoning_content":')
_QUOTE, _BRACE, _BRACKET = 34, 123, 91
# Per read, not per event: when none of these occurs in the complete lines of a read, every event in
# it is a content chunk (with or without a per-chunk usage object) or an empty one: one regex count
# gives the content chunks, one findall the usage totals; no JSON is decoded (docs/lab/loadgen.md, profile).
_SPECIAL = (b'"finish_reason":"', b'"finish_reason": "', b'"error"', b'"tool_calls":[', b'"tool_calls": [', b'[DONE]')
_CONTENT_RE = re.compile(rb'"(?:text|content|reasoning_content)": ?"(?!")')
_USAGE_RE = re.compile(rb'"completion_tokens": ?(\d+)')
# _ordinary: compact JSON, finish reason null in every event, and the content key with a non-empty
# string (chat: `content` and `reasoning_content`, both end in `content":"`)
_NULL_FINISH = b'"finish_reason":null'
_TAIL = 2048  # bytes at the end of a read where a stream's last events are looked for first
_COMPACT = ((b'content":"', b'content":""'), (b'"text":"', b'"text":""'))


def _first_special(whole: bytes, lo: int) -> int:
    """Where the first special key is in whole[lo:] (an index into whole), or -1."""
    first = -1
    for key in _SPECIAL:  # bytes.find per literal: a regex alternation of them scans every quote (30x slower)
        i = whole.find(key, lo)
        if i >= 0 and (first < 0 or i < first):
            first = i
    return first


def _value_at(p: bytes, key: bytes) -> int:
    """Index of the first byte of `key`'s value (JSON allows spaces after the colon), or -1."""
    i = p.find(key)
    if i < 0:
        return -1
    j = i + len(key)
    while j < len(p) and p[j] == 32:
        j += 1
    return j if j < len(p) else -1


def build_body(load: CellLoad, prompt: Prompt, model: str | None = None) -> dict:  # json-edge: request body
    """The JSON body for one request of a cell: its sampling (CellLoad.body_sampling) and the arm's request
    parameters. `generation_config` dicts become the JSON string transformers wants; a request_params value
    of None removes that key (e.g. stream_options for a server that rejects it)."""
    api = load.api
    params = dict(load.request_params)
    own = load.own_sampling(prompt)
    if isinstance(params.get("generation_config"), dict):
        params["generation_config"] = json.dumps(params["generation_config"], sort_keys=True)
    if api == "generate":
        sampling = {**load.body_sampling(), **own, **params.pop("sampling_params", {})}
        return {"text": prompt.as_text(), "sampling_params": sampling, "stream": True, **params}
    body: dict = {**load.body_sampling(), **own, "stream": True,
                  "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if model:
        body["model"] = model
    if api == "chat":
        if prompt.messages is not None:
            body["messages"] = prompt.messages
        else:
            body["messages"] = [{"role": "user", "content": prompt.prompt or ""}]
        if prompt.tools:
            body["tools"] = prompt.tools
    else:
        body["prompt"] = prompt.as_text()
    body.update(params)
    return {k: v for k, v in body.items() if v is not None}  # request_params may drop a key with null


class _Stream:
    """Incremental SSE state for one response."""

    __slots__ = ("api", "times", "tokens", "last_usage", "usage_deltas", "finish", "error", "done", "last_payload",
                 "rest", "input_tokens", "usage_total")

    def __init__(self, api: Api):
        self.api = api
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.last_usage = 0       # cumulative completion tokens seen so far (usage or meta_info)
        self.usage_deltas = False
        self.usage_total: int | None = None
        self.input_tokens: int | None = None
        self.finish: str | None = None
        self.error: str | None = None
        self.done = False
        self.last_payload = b""
        self.rest = b""

    def feed(self, data: bytes, now: float) -> None:
        if self.done:
            return
        buf = self.rest + data if self.rest else data
        start = 0
        if self.api != "generate":
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                self.rest = buf
                return
            whole = buf[:cut] if cut < len(buf) else buf
            start = cut if self._ordinary(whole, now) else self._bulk(whole, now)
            if start == cut:
                self.rest = buf[cut:]
                return
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line[:5] != b"data:":
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
            elif self.api == "generate":
                self._generate(payload, now)
            else:
                self._openai(payload, now)
        self.rest = buf[start:]

    def _bulk(self, whole: bytes, now: float) -> int:
        """Complete lines that are not one ordinary block (feed tried that), taken in bulk where they can
        be: all of them (no special key: _plain), or those before the first special event (the rest goes
        event by event). Returns how many bytes were taken (0: none). A stream's end, its finish chunk
        and [DONE], is in its last events: the special keys are looked for in the last _TAIL bytes first."""
        n = len(whole)
        if n > _TAIL:
            first = _first_special(whole, n - _TAIL)
            head = whole.rfind(b"\n", 0, first) + 1 if first >= 0 else 0
            if head and self._ordinary(whole[:head], now):
                return head
        first = _first_special(whole, 0)
        if first < 0:
            return n if self._plain(whole, now) else 0
        head = whole.rfind(b"\n", 0, first) + 1  # the lines before the first special one
        if head and (self._ordinary(whole[:head], now) or self._plain(whole[:head], now)):
            return head
        return 0

    def _ordinary(self, whole: bytes, now: float) -> bool:
        """The common read, in a few counts over its bytes: every event a content chunk whose finish
        reason is null, each with a per-chunk usage total or none with one (SGLang, vLLM, OpenAI write
        compact JSON). Then nothing in it is special (a finish reason, [DONE], an error or a usage-only
        event has no `"finish_reason":null`) and each event is a chunk; False otherwise, nothing changed.
        (Counting newlines in place of `data:` was quicker on the 2-core AMD machine and 1.16-1.19x slower
        per chunk on the H200 host's Intel CPU and Python build, at 3 to 455 chunks a read: a one-byte count
        is a plain loop there; benchmarks/results/loadgen_parse_h200_one_chunk_read.txt.)"""
        events = whole.count(b"data:")
        if not events or whole.count(_NULL_FINISH) != events:
            return False
        key, empty = _COMPACT[self.api == "completions"]
        if whole.count(key) - whole.count(empty) != events:
            return False
        totals = _USAGE_RE.findall(whole)
        if not totals:
            self.times.extend(repeat(now, events))
            self.tokens.extend(repeat(1, events))
            return True
        if len(totals) != events:
            return False
        if events == 1:  # a chunk a read (a realistic load): no lists to build
            total = int(totals[0])
            self.tokens.append(total - self.last_usage)
            self.times.append(now)
            self.last_usage = self.usage_total = total
            self.usage_deltas = True
            return True
        ints = list(map(int, totals))
        prev = [self.last_usage]
        prev += ints[:-1]
        self.tokens.extend(map(sub, ints, prev))
        self.times.extend(repeat(now, events))
        self.last_usage = self.usage_total = ints[-1]
        self.usage_deltas = True
        return True

    def _plain(self, whole: bytes, now: float) -> bool:
        """Complete lines with no finish, error or tool call: content chunks counted by regex, usage
        totals (SGLang's continuous usage: one per content chunk) turned into tokens per chunk. False
        when usage objects and content chunks do not pair up one per event (then: event by event)."""
        n = len(_CONTENT_RE.findall(whole))
        totals = _USAGE_RE.findall(whole)
        if not totals:
            if n:
                self.times.extend([now] * n)
                self.tokens.extend([1] * n)
            return True
        if len(totals) != n or whole.count(b"data:") != n:
            return False
        last, tokens = self.last_usage, self.tokens
        for t in map(int, totals):
            tokens.append(t - last)
            last = t
        self.times.extend([now] * n)
        self.last_usage = self.usage_total = last
        self.usage_deltas = True
        return True

    def _openai(self, p: bytes, now: float) -> None:
        content = False
        for key in _CONTENT:
            j = _value_at(p, key)
            if j >= 0 and p[j] == _QUOTE and j + 1 < len(p) and p[j + 1] != _QUOTE:
                content = True
                break
        if not content:
            j = _value_at(p, b'"tool_calls":')
            content = j >= 0 and p[j] == _BRACKET
        n = 1
        u, f = _value_at(p, b'"usage":'), _value_at(p, b'"finish_reason":')
        if (u >= 0 and p[u] == _BRACE) or (f >= 0 and p[f] == _QUOTE) or b'"error"' in p:
            obj = json.loads(p)
            if "error" in obj and obj["error"]:
                err = obj["error"]
                self.error = err.get("message", str(err)) if isinstance(err, dict) else str(err)
                return
            usage = obj.get("usage")
            for ch in obj.get("choices") or ():
                if ch.get("finish_reason"):
                    self.finish = ch["finish_reason"]
            if usage:
                total = int(usage.get("completion_tokens") or 0)
                self.input_tokens = usage.get("prompt_tokens", self.input_tokens)
                self.usage_total = total
                if content:
                    n = total - self.last_usage
                    self.usage_deltas = True
                self.last_usage = total
        if content:
            self.times.append(now)
            self.tokens.append(n)

    def _generate(self, p: bytes, now: float) -> None:
        i = p.rfind(b'"completion_tokens":')
        j = i + 20
        while j < len(p) and p[j] == 32:
            j += 1
        if i < 0:
            if b'"error"' in p:
                obj = json.loads(p)
                err = obj.get("error")
                self.error = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            return
        k = j
        while p[k:k + 1] in b" 0123456789" and k < len(p):
            k += 1
        total = int(p[j:k])
        if total > self.last_usage:
            self.times.append(now)
            self.tokens.append(total - self.last_usage)
            self.last_usage = total
        self.last_payload = p


async def send_one(pool: Pool, path: str, api: Api, body: bytes, rec: RequestRecord, t0: float) -> RequestRecord:
    """POST `body` to `path`, stream the answer, fill `rec` (its send_s is set here, relative to t0)."""
    st = _Stream(api)
    sent = _perf()
    rec.send_s = round(sent - t0, 6)  # to the microsecond, as the chunk times below
    try:
        rec.status, err = await pool.post(path, body, st)
        if rec.status != 200:
            rec.error = f"HTTP {rec.status}: {err.decode(errors='replace').strip()[:300]}"
    except (ConnectionError, OSError, TimeoutError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:300]
    except ValueError as exc:  # a malformed response or chunk (bad JSON, a non-numeric count): this request only
        rec.error = f"malformed stream: {exc}"[:300]
    secrets = getattr(pool, "secrets", ())
    if rec.error is not None and secrets:  # an API key echoed back by the server is masked
        rec.error = _redact(rec.error, secrets)
    end = _perf()
    # times to the microsecond (the clock's jitter and the event loop's are larger): full float digits made a
    # c=64 cell's raw records ~4x larger compressed, for no information (docs/lab/pair.md, third sitting)
    rec.chunk_ms = [round((t - sent) * 1000.0, 3) for t in st.times]
    rec.chunk_tokens = st.tokens
    if st.times:
        rec.ttft_ms = rec.chunk_ms[0]
    rec.e2e_ms = round((end - sent) * 1000.0, 3)
    rec.input_tokens = st.input_tokens
    if api == "generate":
        rec.tokens_source = "meta_info"
        rec.output_tokens = st.last_usage
        if st.last_payload:
            try:
                meta = json.loads(st.last_payload).get("meta_info") or {}
            except ValueError as exc:
                meta, rec.error = {}, rec.error or f"malformed stream: {exc}"[:300]
            fr = meta.get("finish_reason")
            rec.finish_reason = fr.get("type") if isinstance(fr, dict) else fr
            rec.input_tokens = meta.get("prompt_tokens")
            if meta.get("spec_verify_ct"):
                rec.spec_verify_ct = int(meta["spec_verify_ct"])
                rec.accept_length = rec.output_tokens / rec.spec_verify_ct
            spec = {k: float(v) for k, v in meta.items() if k.startswith("spec_") and k != "spec_verify_ct"
                    and isinstance(v, (int, float)) and not isinstance(v, bool)}
            if spec:
                rec.spec_meta = spec
    else:
        rec.tokens_source = "usage" if st.usage_deltas else "chunks"
        rec.output_tokens = st.usage_total if st.usage_total is not None else sum(st.tokens)
        rec.finish_reason = st.finish
    if rec.error is None:
        if st.error is not None:
            rec.error = _redact(f"server error in stream: {st.error}", secrets)[:300]
        elif not st.done and rec.finish_reason is None:
            rec.error = "stream ended without a finish reason or [DONE]"
        elif not st.times:
            rec.error = "no output tokens"
    if rec.error is None:
        rec.bundled = bundled(rec)
    return rec


def _redact(text: str, secrets: list[bytes]) -> str:
    for secret in secrets:
        text = text.replace(secret.decode(errors="replace"), "***")
    return text


def make_pool(base_url: str, read_timeout_s: float = 300.0) -> tuple[Pool, str]:
    """A keep-alive connection pool for `base_url` and its path prefix ("" for http://host:port).

    https:// is verified against the system trust store, or the CA bundle of the endpoint registered for
    this URL (toolkit.endpoints), which also gives the API key sent as `Authorization: Bearer ...`."""
    from toolkit import endpoints

    u = urlsplit(base_url.rstrip("/"))
    if u.scheme not in ("http", "https"):
        raise ToolkitError(f"the load generator speaks http:// and https://, not {u.scheme or 'a bare address'}: "
                           f"{base_url}", hint="give the server's base URL, e.g. https://host:8443 or http://host:30000")
    ep = endpoints.lookup(base_url) or endpoints.Endpoint(base_url)
    tls = u.scheme == "https"
    pool = Pool(u.hostname or "127.0.0.1", u.port or (443 if tls else 80), read_timeout_s,
                ssl=ep.ssl_context() if tls else None, headers=ep.headers())
    return pool, u.path
