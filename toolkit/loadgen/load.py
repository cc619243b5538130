"""What one cell sends: its API, concurrency, request size and sampling, how many requests (or how long),
the warmup, the open-loop rate, the seed, the client processes and the arm's per-request parameters.

    load = CellLoad.of(matrix, concurrency=16, request_params=env.request_params["ngram"])
    records = run(run_cell(url, load, prompts, model=srv.model, arm="ngram", domain="coding"))

A CellLoad is built from a Matrix in one place, `CellLoad.of`: each of its fields takes the Matrix field of
the same name. A field declared with `sent(...)` is a request parameter, put into every request body by
`body_sampling` (client.build_body). So a Matrix field that only changes what a cell sends is a field of
the Matrix spec and one here, nothing else. The loadgen reads the Matrix by duck typing: it imports no spec.

What makes two cells comparable is declared here too: `CellLoad.recorded` is a cell summary's `sampling`
record (every sent field among it), and `results diff` compares two cells' records field by field, except the
fields declared `uncompared(...)` (`CellLoad.not_compared`). A new sent field is recorded and compared with no
other edit.

A sent field added after archives were written, whose default is what a server does unasked (`ignore_eos`:
false), is declared `sent(..., omit_default=True)`: at its default it is neither sent nor recorded, so every
request body and `sampling` record of a run that does not set it stays byte for byte what it was; `results
diff` reads a toolkit record without it as its default (`CellLoad.complete`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Mapping

Api = Literal["completions", "chat", "generate"]

# What one worker carries with its timing intact (docs/lab/loadgen.md: measured capacity is several times
# this), and what a GPU server streams per request at most (a 4 ms token).
CHUNKS_PER_WORKER = 25_000
CHUNKS_PER_STREAM = 250


def sent(openai: str, generate: str | None = None, *, default: Any, omit_default: bool = False) -> Any:
    """A CellLoad field carried by every request: under `openai` in a /v1 body, under `generate` (default: the
    same name) in /generate's sampling_params. `omit_default`: at its default it is left out of every body and
    of the `sampling` record (the server's own default, and the archives' records from before the field)."""
    return field(default=default, metadata={"sent": (openai, generate or openai),
                                            **({"omit_default": True} if omit_default else {})})


def uncompared(why: str, *, default: Any) -> Any:
    """A CellLoad field that does not change what a request is (`why`): `results diff` compares two cells whose
    records differ in it."""
    return field(default=default, metadata={"compared": False, "why": why})


# the `sampling` record's fields as archives have always written them, in their order; every other sent field
# follows, in field order (a record with no new field stays byte for byte what it was)
RECORDED = ("api", "temperature", "output_len", "seed", "warmup", "requests", "duration_s")


def auto_workers(concurrency: int, rate: float | None = None, output_len: int = 128, cpus: int | None = None) -> int:
    """Processes for a cell: its expected chunk rate over CHUNKS_PER_WORKER, one when small, at most
    half the CPUs this process may run on (the rest for the parent and a local server)."""
    expected = concurrency * CHUNKS_PER_STREAM
    if rate:
        expected = min(expected, rate * output_len)
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(math.ceil(expected / CHUNKS_PER_WORKER), cpus // 2, concurrency))


def resolve_workers(workers: int | None, concurrency: int, rate: float | None = None, output_len: int = 128) -> int:
    """The processes a cell runs on: `workers` as asked (never more than the concurrency), else auto_workers."""
    return auto_workers(concurrency, rate, output_len) if workers is None else max(1, min(workers, concurrency))


@dataclass(frozen=True)
class CellLoad:
    """What one cell sends. Closed loop: `concurrency` requests in flight until `requests` are done (or
    `duration_s` passed); open loop: Poisson arrivals at `rate` req/s (seeded), at most `concurrency` in
    flight; `arrival` and `burstiness` shape the gaps (toolkit.loadgen.share.schedule); a trace: request i at
    `arrivals[i]`. `warmup` requests run first. `workers`: client processes (None: enough for the chunk rate)."""

    api: Api = "chat"
    concurrency: int = 1
    output_len: int = sent("max_tokens", "max_new_tokens", default=128)
    temperature: float = sent("temperature", default=0.0)
    # decode every answer to output_len, past end of sequence (SGLang's and vLLM's request extension)
    ignore_eos: bool = sent("ignore_eos", default=False, omit_default=True)
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = uncompared("warmup requests are not measured", default=0)
    rate: float | None = None
    arrival: Literal["poisson", "gamma", "constant", "trace"] = "poisson"
    burstiness: float = 1.0
    seed: int = 0
    # a trace replay (toolkit/schema/trace.py): request i (prompt i) is sent at arrivals[i] seconds after the
    # start, open loop, instead of the Poisson schedule; with output_from_prompt each request's max tokens
    # is its prompt's target_output_len (the trace's output_length)
    arrivals: tuple[float, ...] | None = None
    output_from_prompt: bool = False
    workers: int | None = uncompared("client processes change no request", default=None)
    request_params: Mapping[str, Any] = field(default_factory=dict)  # the arm's (Environment request_params)

    def __post_init__(self) -> None:
        if (self.requests is None) == (self.duration_s is None):
            raise ValueError("give exactly one of requests or duration_s")
        if self.concurrency < 1:
            raise ValueError(f"concurrency {self.concurrency}: at least 1 request in flight")

    @classmethod
    def of(cls, matrix: Any, concurrency: int, request_params: Mapping[str, Any] | None = None,
           rate: float | None = None, arrivals: tuple[float, ...] | None = None) -> "CellLoad":
        """The load of a Matrix's cells at one level: every field from the Matrix field of the same name, the
        duration and warmup at this level (Matrix.duration_at, warmup_at), the arm's request parameters; an
        open-loop cell (`rate`) also the Matrix's `arrival:` process. `arrivals`: a trace's cell, every request
        of the trace at its time (rate: the trace's mean rate), each with its own max tokens."""
        given: dict[str, Any] = {"concurrency": concurrency, "request_params": dict(request_params or {})}
        arrival = getattr(matrix, "arrival", None)  # the Matrix's `arrival:` block: its process and burstiness
        if arrival is not None:
            given.update(arrival=arrival.process, burstiness=arrival.burstiness)
        if rate is not None:
            given["rate"] = rate
        if arrivals is not None:
            given.update(arrivals=arrivals, arrival="trace", burstiness=1.0, output_from_prompt=True,
                         requests=len(arrivals), duration_s=None)
        elif getattr(matrix, "duration_s", None) is not None:
            given["duration_s"] = matrix.duration_at(concurrency)
        if hasattr(matrix, "warmup_at"):
            given["warmup"] = matrix.warmup_at(concurrency)
        taken = {f.name: getattr(matrix, f.name) for f in fields(cls)
                 if f.name not in given and f.name in type(matrix).model_fields}
        return cls(**{**taken, **given})

    # json-edge: the cell summary's sampling record (Matrix field names)
    @classmethod
    def recorded(cls, matrix: Any) -> dict[str, Any]:
        """A cell summary's `sampling` record: RECORDED, then every other sent field, each as the Matrix field of
        its name declares it (`warmup: concurrency`, a duration per level; a field the Matrix lacks: its default);
        a field declared `omit_default` only off its default."""
        sent_too = [f for f in fields(cls) if "sent" in f.metadata and f.name not in RECORDED]
        defaults = {f.name: f.default for f in fields(cls)}
        out = {name: getattr(matrix, name, defaults.get(name)) for name in RECORDED}
        for f in sent_too:
            value = getattr(matrix, f.name, f.default)
            if not (_omitted(f) and value == f.default):
                out[f.name] = value
        return out

    @classmethod
    def complete(cls, record: Mapping[str, Any]) -> dict[str, Any]:  # json-edge: a cell's sampling record
        """A `sampling` record as `results diff` compares it: a record of the toolkit's (it holds RECORDED) with
        each omit-at-default field it leaves out at its default; another (an imported run's, empty) as it is."""
        if not set(RECORDED) <= set(record):
            return dict(record)
        return {**{f.name: f.default for f in fields(cls) if _omitted(f)}, **record}

    @classmethod
    def not_compared(cls) -> frozenset[str]:
        """The fields `results diff` does not compare (declared `uncompared`); every other recorded field it does."""
        return frozenset(f.name for f in fields(cls) if f.metadata.get("compared") is False)

    @property
    def processes(self) -> int:
        """The client processes this cell runs on (`workers`, or enough for its expected chunk rate)."""
        rate = self.rate
        if rate is None and self.arrivals:  # a trace: its mean rate
            rate = len(self.arrivals) / max(self.arrivals[-1] - self.arrivals[0], 1e-3)
        return resolve_workers(self.workers, self.concurrency, rate, self.output_len)

    def own_sampling(self, prompt: Any) -> dict[str, Any]:  # json-edge: request body fields
        """What one request sets for itself: a trace request's max tokens (output_from_prompt)."""
        if not self.output_from_prompt:
            return {}
        return {"max_new_tokens" if self.api == "generate" else "max_tokens": prompt.target_output_len}

    def body_sampling(self) -> dict[str, Any]:  # json-edge: request body fields
        """The request parameters every request of the cell carries, by the API's names, in field order."""
        i = 1 if self.api == "generate" else 0
        return {f.metadata["sent"][i]: getattr(self, f.name) for f in fields(self)
                if "sent" in f.metadata and not (_omitted(f) and getattr(self, f.name) == f.default)}


def _omitted(f: Any) -> bool:
    """A sent field declared `omit_default`: left out of bodies and records at its default."""
    return bool(f.metadata.get("omit_default"))
