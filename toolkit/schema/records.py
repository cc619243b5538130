"""The data that crosses stage boundaries in a benchmark: one record per request, one summary per cell.

These models are the contract between the load generator (bench), the matrix runner and the
archive/diff stage (results). Times are milliseconds unless a name says otherwise.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from toolkit.schema.keys import cell_key, level_label

class Prompt(BaseModel):
    """One workload item: OpenAI chat `messages` (with optional `tools`) or a plain `prompt`."""

    model_config = ConfigDict(extra="forbid")

    id: str
    domain: str
    messages: list[dict] | None = None
    tools: list[dict] | None = None
    prompt: str | None = None
    target_output_len: int = Field(256, ge=1)

    def as_text(self) -> str:
        """The prompt as one string (for /v1/completions and /generate, and for token counts)."""
        if self.prompt is not None:
            return self.prompt
        parts = []
        for m in self.messages or []:
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
            if m.get("tool_calls"):
                import json

                content = (content or "") + json.dumps(m["tool_calls"], sort_keys=True)
            parts.append(f"{m.get('role', 'user')}: {content or ''}")
        return "\n".join(parts)


class RequestRecord(BaseModel):
    """Everything measured about one request. Raw chunk timings are kept so every ITL convention
    can be derived later: per-chunk gap, gap / tokens in the chunk, (e2e - ttft) / (tokens - 1)."""

    model_config = ConfigDict(extra="forbid")

    arm: str
    domain: str
    concurrency: int
    repeat: int = 0
    launch: int = Field(0, description="which server launch of the arm served it (0: the first, or the only one)")
    prompt_id: str
    warmup: bool = False
    send_s: float = Field(description="send time, seconds since the cell started (monotonic clock)")
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int = 0
    chunk_ms: list[float] = Field(default_factory=list, description="arrival of each content chunk, ms after send")
    chunk_tokens: list[int] = Field(default_factory=list, description="tokens carried by each chunk")
    tokens_source: Literal["usage", "tokenizer", "chunks", "meta_info"] = "chunks"
    finish_reason: str | None = None
    error: str | None = None
    status: int | None = Field(None, description="HTTP status")
    spec_verify_ct: int | None = Field(None, description="SGLang meta_info: verification steps (speculative)")
    accept_length: float | None = Field(None, description="output tokens per verification step")
    spec_meta: dict[str, float] | None = Field(
        None, description="SGLang meta_info: every numeric spec_* field the server sent (0.5.17: spec_accept_rate, "
                          "spec_accept_length, spec_num_correct_drafts, spec_num_proposed_drafts, ...)")
    lag_ms: float | None = Field(None, description="open loop: how late the request left vs its scheduled time")
    rate: float | None = Field(None, description="open loop (`rates:`): the cell's target rate, req/s; None: a "
                                                 "closed-loop cell, keyed by its concurrency")
    bundled: bool | None = Field(None, description="the answer arrived bundled: more than one output token, all at "
                                                   "one instant (toolkit.schema.eligibility.bundled); None: "
                                                   "unknown (no chunk timings, or a record from before 2026-12-06)")

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def level(self) -> float:
        """The cell's load level: its rate when open loop, else its concurrency (CellSummary.level)."""
        return self.rate if self.rate is not None else self.concurrency


class Stat(BaseModel):
    """One metric over a cell's successful requests."""

    model_config = ConfigDict(extra="forbid")

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    ci_low: float | None = Field(None, description="95% CI of the median (p50); how: toolkit/schema/metrics.py")
    ci_high: float | None = None
    n: int = 0
    unreliable: list[str] = Field(default_factory=list, description="percentiles with too few samples, e.g. ['p99']")


class CellCheck(BaseModel):
    """A methodology warning about one cell, found while it ran (toolkit/schema/eligibility.py: a stall, a
    busy host) and archived in its summary; `excludes`: no verdict may use the cell."""

    model_config = ConfigDict(extra="allow")

    check: str
    message: str
    excludes: bool = False


class HostLoadRecord(BaseModel):
    """The host's load while a cell ran (toolkit/bench/hostload.py), judged by toolkit.schema.eligibility.busy_check:
    its cores, the samples and span, the cores this run and other processes used, the busy share, the hypervisor's
    steal, the load average, and the other toolkit runs seen on the host."""

    model_config = ConfigDict(extra="allow")

    cpus: int | None = None
    samples: int | None = None
    wall_s: float | None = None
    own_cores: float | None = None
    foreign_cores: float | None = None
    busy_share: float | None = None
    steal: float | None = None
    load1: float | None = None
    other_runs: list[dict] = Field(default_factory=list, description="{pid, matrix, run} of each")


class ProcessArrival(BaseModel):
    """An open-loop cell's seeded arrival process (the Matrix's `arrival:`), as CellSummary.arrival records it."""

    model_config = ConfigDict(extra="forbid")

    process: str = Field(description="poisson | gamma | constant")
    burstiness: float | None = None


class TraceArrival(BaseModel):
    """A trace's cell (CellSummary.arrival): the trace replayed at `speed`, its `requests`, not a seeded process."""

    model_config = ConfigDict(extra="forbid")

    process: Literal["trace"] = "trace"
    speed: float
    requests: int


class CellSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    domain: str
    concurrency: int
    repeat: int = 0
    launch: int = Field(0, description="the server launch of the arm (0: the first; absent in single-launch "
                                       "archives of older writers)")
    output_len: int
    workload_hash: str
    sampling: dict = Field(default_factory=dict, description="api, temperature, output_len, seed, warmup")
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    log_tail: str | None = None
    n_requests: int = 0
    n_errors: int = 0
    error_rate: float = 0.0
    duration_s: float = 0.0
    effective_concurrency: float | None = None
    itl_convention: str = "per-chunk gap divided by tokens in the chunk"
    metrics: dict[str, Stat] = Field(default_factory=dict)
    accept_source: str | None = Field(
        None, description="where metrics.accept_length came from: a key of toolkit.schema.metrics.ACCEPT_SOURCES "
                          "(requests: per request from the wire; server-*: one figure per cell from the server's "
                          "own counts). None: no acceptance, or an archive written before sources were recorded")
    accept_counts: dict[str, float] | None = Field(
        None, description="the server's counts behind a server-sourced accept_length (tokens, steps, requests)")
    synthetic_acceptance: float | None = Field(
        None, description="the mean acceptance length the arm's server was forced to (SGLANG_SIMULATE_ACC_LEN: the "
                          "Matrix's synthetic_acceptance, or set by hand): its acceptance and speed-ups are the "
                          "system's at that length, never the drafter's; None: real acceptance")
    checks: list[CellCheck] = Field(default_factory=list, description="methodology warnings found while the cell "
                                    "ran (stall, busy-host); archives before 2026-12 have none")
    checked: list[str] = Field(default_factory=list, description="the checks that ran while the cell ran (stall, "
                               "busy-host): a reader makes the stall check itself for a cell without it")
    host: HostLoadRecord | None = Field(None, description="the host's load while the cell ran (toolkit/bench/hostload.py): "
                                                    "cpus, own and foreign cores, steal, load average, other runs")
    rate: float | None = Field(None, description="open loop (`rates:`): the target rate, req/s, which keys the cell "
                                                 "(its concurrency is then the cap on requests in flight); None: a "
                                                 "closed-loop cell, keyed by concurrency (every older archive)")
    arrival: TraceArrival | ProcessArrival | None = Field(
        None, description="open loop: the arrival process (process, burstiness), or the trace replayed (speed, "
                          "requests)")
    achieved_rate: float | None = Field(None, description="open loop: measured requests sent over the span of their "
                                                          "send times, (n - 1) / (last send - first send), req/s")
    lag_p99_ms: float | None = Field(None, description="open loop: p99 of how late the measured requests left")
    bundled_share: float | None = Field(None, description="the share of successful measured requests that arrived "
                                        "bundled (RequestRecord.bundled); above one half the cell is flagged "
                                        "`bundled` (no TTFT/ITL/TPOT verdict uses it); None: unknown (older archives)")

    @property
    def level(self) -> float:
        """The load level the cell is keyed and compared by: its rate (req/s) when open loop, else its
        concurrency. Levels of one run are of one kind (a Matrix has `rates:` or `concurrency:`)."""
        return self.rate if self.rate is not None else self.concurrency

    @property
    def label(self) -> str:
        """`c=16` or `r=2/s` (toolkit.schema.keys.level_label)."""
        return level_label(self.concurrency, self.rate)

    @property
    def key(self) -> str:
        """Its cell key (toolkit.schema.keys.cell_key): the archive's file names."""
        return cell_key(self.arm, self.domain, self.concurrency, self.repeat, self.launch, self.rate)
