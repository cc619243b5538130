"""A request trace: when each request arrives and how long it is, replayed open loop (docs/loadgen.md#traces).

The toolkit's trace format is JSON lines, one object per request:

    {"timestamp": 0.512, "input_length": 812, "output_length": 128}
    {"timestamp": 0.731, "prompt": "Summarise ...", "output_length": 64}

- `timestamp`: SECONDS (a number >= 0; only differences matter: the first request is sent at the start).
  Lines are replayed in time order (a stable sort, so equal times keep their file order).
- `input_length`: prompt tokens, for a synthesized prompt (prompt_text); `prompt`: the text itself (then
  input_length is what it was, informational). One of the two is required.
- `output_length`: the request's max output tokens (optional: the load's output_len otherwise).
- `hash_ids`: optional, Mooncake's prefix blocks (BLOCK_TOKENS tokens each): requests sharing a leading run
  of ids get the same leading text, so a prefix cache sees what it saw in production.

Mooncake's FAST'25 traces (JSON lines of `timestamp` in MILLISECONDS, `input_length`, `output_length`,
`hash_ids`) are converted by `from_mooncake` (`toolkit bench trace-import FILE --from mooncake`); a Mooncake
file given where a trace is expected is refused (its milliseconds would replay 1000x slower).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkit.errors import ToolkitError
from toolkit.schema.records import Prompt

BLOCK_TOKENS = 512  # Mooncake's hash_ids: one id per 512-token block of the prompt
# common English words that are one token each in the GPT-2/Llama/Qwen BPE vocabularies (with the leading
# space), so a synthesized prompt of N words is close to N tokens on a real tokenizer
WORDS = ("the of and to in is that for it as with was on be by at this from or an are not have but had "
         "which one all were when we there can more if out so what up about into than them some time would "
         "only other new also two first could after people made most over such way well many back where "
         "much good through year work long day great world life part place").split()
FORMAT_HINT = ('one JSON object per line: {"timestamp": SECONDS, "input_length": N, "output_length": N} or '
               '{"timestamp": SECONDS, "prompt": "...", "output_length": N} (docs/loadgen.md#traces)')


# more tokens than any model's context: a prompt of input_length words is built before the cell starts (a
# length of 10**12 filled memory instead of reaching the server)
MAX_TOKENS = 1 << 24


class TraceRequest(BaseModel):
    """One line of a trace (JSON's Infinity and NaN, which Python's json reads, are refused)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    timestamp: float = Field(ge=0, description="seconds; the replay sends it at (timestamp - first) / speed")
    input_length: int | None = Field(None, ge=1, le=MAX_TOKENS)
    output_length: int | None = Field(None, ge=1, le=MAX_TOKENS)
    prompt: str | None = None
    hash_ids: list[int] | None = None


def _json_lines(path: Path, what: str, hint: str | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, decoded object) of each non-blank line of a JSON-lines file; unreadable files and lines
    that are not JSON are errors naming the file (and line)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ToolkitError(f"cannot read {what}: {exc.strerror}", file=path) from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ToolkitError(f"line is not JSON ({exc.msg})", file=path, line=i, hint=hint) from None


def read_trace(path: str | Path) -> list[TraceRequest]:
    """The requests of a trace file in time order; bad lines are errors naming file:line."""
    path = Path(path)
    out = []
    for i, obj in _json_lines(path, "the trace", FORMAT_HINT):
        if isinstance(obj, dict) and "hash_ids" in obj and "prompt" not in obj and i == 1 and _ms_like(obj):
            raise ToolkitError("this looks like a Mooncake trace (timestamp in milliseconds, hash_ids)", file=path,
                               line=i, hint=f"convert it first: toolkit bench trace-import {path} --from mooncake "
                                            "-o trace.jsonl")
        try:
            req = TraceRequest.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "line"
            if err["type"] == "less_than_equal":  # a length no model takes, whose prompt would fill the memory
                raise ToolkitError(f"{where}: {err['input']:,} tokens is more than any model's context (at most "
                                   f"{MAX_TOKENS:,})", file=path, line=i,
                                   hint="check the column: a length in tokens, the time in `timestamp`") from None
            raise ToolkitError(f"{where}: {err['msg']}", file=path, line=i, hint=FORMAT_HINT) from None
        if req.prompt is None and req.input_length is None:
            raise ToolkitError("neither `prompt` nor `input_length`", file=path, line=i, hint=FORMAT_HINT)
        out.append(req)
    if not out:
        raise ToolkitError("the trace has no requests", file=path, hint=FORMAT_HINT)
    return sorted(out, key=lambda r: r.timestamp)


def _ms_like(obj: dict) -> bool:
    """Mooncake's lines carry integer milliseconds and hash_ids; the toolkit's keep hash_ids only beside
    seconds that were converted (floats)."""
    return isinstance(obj.get("timestamp"), int)


def arrivals(trace: list[TraceRequest], speed: float = 1.0) -> list[float]:
    """The schedule of send times (seconds after the start): the trace's times from its first, / speed."""
    if not speed > 0:
        raise ToolkitError(f"speed {speed}: must be > 0 (2.0 replays twice as fast)")
    t0 = trace[0].timestamp
    return [(r.timestamp - t0) / speed for r in trace]


def offered_rate(times: list[float], speed: float = 1.0) -> float:
    """The mean rate a trace offers at this speed, req/s, in 4 significant digits: (n - 1) / span, the form of
    the achieved rate (toolkit.schema.metrics.achieved_rate), so a client that kept the schedule achieves it.
    A trace cell of a Matrix is keyed by it (its rate)."""
    return float(f"{(len(times) - 1) * speed / (times[-1] - times[0]):.4g}")


def prompt_text(req: TraceRequest, index: int, seed: int = 0) -> str:
    """The request's prompt: its own text, or `input_length` words (see WORDS), block by block from its
    hash_ids (the same id: the same block of text) and seeded per request beyond them. It ends with ` #index`
    (a tag the truth server in benchmarks/ pairs requests by; the same in every arm)."""
    if req.prompt is not None:
        return req.prompt
    n = req.input_length or 1
    words: list[str] = []
    for h in req.hash_ids or []:
        if len(words) >= n:
            break
        rng = random.Random(f"trace-block:{seed}:{h}")
        words += rng.choices(WORDS, k=BLOCK_TOKENS)
    if len(words) < n:
        rng = random.Random(f"trace-request:{seed}:{index}")
        words += rng.choices(WORDS, k=n - len(words))
    return " ".join(words[:max(1, n - 2)]) + f" #{index}"  # the tag is about two tokens


def trace_prompts(trace: list[TraceRequest], domain: str, output_len: int, seed: int = 0) -> list[Prompt]:
    """One prompt per request, in time order (id t<i>: request i, the same in every replay): its text
    (prompt_text) and its max tokens (`output_length`, else `output_len`). The loadgen's --trace and a
    Matrix's `trace:` workload both send these."""
    return [Prompt(id=f"t{i}", domain=domain, prompt=prompt_text(r, i, seed),
                   target_output_len=r.output_length or output_len) for i, r in enumerate(trace)]


def from_mooncake(src: str | Path, dest: str | Path) -> int:
    """Convert a Mooncake trace (JSON lines: timestamp in ms, input_length, output_length, hash_ids) to the
    toolkit's format (seconds) at dest (its folder made where missing); returns the number of requests written.
    `bench trace-import` writes convert_mooncake's lines atomically (toolkit.fsutil) instead."""
    lines = convert_mooncake(src)
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    Path(dest).write_text("\n".join(lines) + "\n")
    return len(lines)


def convert_mooncake(src: str | Path) -> list[str]:
    """The toolkit's trace lines (JSON, seconds) of a Mooncake trace; bad lines are errors naming file:line."""
    src = Path(src)
    out = []
    for i, obj in _json_lines(src, "the Mooncake trace"):
        missing = [k for k in ("timestamp", "input_length", "output_length") if not isinstance(obj.get(k), (int, float))]
        if missing:
            raise ToolkitError(f"no numeric {', '.join(missing)}: not a Mooncake trace line", file=src, line=i,
                               hint='Mooncake lines are {"timestamp": MS, "input_length": N, "output_length": N, '
                                    '"hash_ids": [...]}')
        row = {"timestamp": float(obj["timestamp"]) / 1000.0, "input_length": int(obj["input_length"]),
               "output_length": int(obj["output_length"])}
        if isinstance(obj.get("hash_ids"), list):
            row["hash_ids"] = [int(h) for h in obj["hash_ids"]]
        try:
            TraceRequest.model_validate(row)
        except ValidationError as exc:
            raise ToolkitError(f"{exc.errors()[0]['msg']}", file=src, line=i) from None
        out.append(json.dumps(row))
    if not out:
        raise ToolkitError("the Mooncake trace has no requests", file=src)
    if not any(_ms_like(obj) for _, obj in _json_lines(src, "the Mooncake trace")):
        raise ToolkitError("this looks like a trace already converted (every timestamp in seconds, as the toolkit "
                           "writes them; Mooncake's are whole milliseconds): converting it again would divide its "
                           "times by 1000 once more", file=src, line=1,
                           hint=f"use it as it is: `--trace {src}` or `workloads: [{{trace: {src.name}}}]`")
    return out
