"""Service-level objectives (SLOs): what they are, and how one cell meets them. docs/slo.md shows the rules
with a real run.

An objective bounds one latency of the registry (toolkit/schema/metrics.py) in one of two ways:

    percentile    `tpot_ms: {p90: 50}`: the cell's p90 of the per-request TPOT is at most 50 ms. Judged on
                  the point estimate (numpy's percentile, what `results show` prints), with the quantile's
                  distribution-free 95% CI beside it (toolkit.stats.quantile_ci); `certain` when the whole CI is
                  on one side of the limit.
    per request   `ttft_ms: {per_request: 200}`: a request meets it when its own TTFT is at most 200 ms.
                  Goodput counts the requests that met every per-request objective.

Which per-request value an objective reads (the `sample`):

    ttft_ms  -> ttft_ms           tpot_ms -> tpot_ms           e2e_ms -> e2e_ms
    itl_ms   -> itl_req_mean_ms   each request's mean ITL: the pooled itl_ms is one value per chunk, so it
                                  has no per-request value to judge a request by, and no CI for a percentile.

A request without the value (TPOT or ITL with fewer than two tokens or chunks) has no gap that could
miss the limit: it meets that objective (vLLM's goodput counts TPOT 0 for one-token outputs the same
way). A failed request meets nothing.

Per cell: `met` = successful measured requests that met every per-request objective (all successful
requests when there is none); attainment = met / measured requests, with a Wilson interval; goodput =
the cell's throughput scaled to the requests (or their output tokens) that met them. The objectives
*hold* in a cell when every percentile objective holds and attainment >= `attainment` (default 0.9):
a level where more than one request in ten fails or misses its limits is not one the service runs at.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from toolkit.schema.metrics import figure_of
from toolkit.stats.samples import quantile_ci, wilson
from toolkit.schema.records import CellSummary

OBJECTIVE_SAMPLES = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_req_mean_ms", "e2e_ms": "e2e_ms"}
PERCENTILES = {"p50": 50.0, "p75": 75.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
PER_REQUEST = "per_request"
BOUNDS = tuple(PERCENTILES) + (PER_REQUEST,)
DEFAULT_ATTAINMENT = 0.9


class _Model(BaseModel):
    """Like the derived block (manifest._Open): a field a newer writer adds is kept, not refused."""

    model_config = ConfigDict(extra="allow")


class Objective(_Model):
    metric: str = Field(description="ttft_ms, tpot_ms, itl_ms or e2e_ms")
    bound: str = Field(description="p50, p75, p90, p95, p99 (a percentile of the cell) or per_request")
    limit: float = Field(gt=0, description="ms")

    @property
    def sample(self) -> str:
        """The per-request column this objective reads (itl_ms objectives: itl_req_mean_ms)."""
        return OBJECTIVE_SAMPLES[self.metric]

    @property
    def percentile(self) -> float | None:
        return PERCENTILES.get(self.bound)

    @property
    def name(self) -> str:
        """As `--slo` spells it: tpot_ms.p90, ttft_ms.per_request."""
        return f"{self.metric}.{self.bound}"

    def text(self) -> str:
        if self.bound == PER_REQUEST:
            return f"{self.metric} <= {self.limit:g} ms per request"
        return f"{self.metric} {self.bound} <= {self.limit:g} ms"


class Objectives(_Model):
    """A set of objectives and the attainment a cell needs for them to hold."""

    items: list[Objective] = Field(default_factory=list)
    attainment: float = Field(DEFAULT_ATTAINMENT, gt=0, le=1)

    @classmethod
    def of(cls, bounds: Iterable[tuple[str, str, float | None]], attainment: float | None = None) -> "Objectives | None":
        """(metric, bound, limit) triples -> Objectives (None when no limit is set). The Matrix's `Slo`
        (toolkit/specs/matrix.py) makes its objectives here, and so does an archived block."""
        items = [Objective(metric=m, bound=b, limit=float(v)) for m, b, v in bounds if v is not None and b in BOUNDS]
        return cls(items=items, attainment=attainment or DEFAULT_ATTAINMENT) if items else None

    @classmethod
    def from_block(cls, block: dict[str, Any] | None) -> "Objectives | None":
        """An archived `slo:` block (the Matrix's, as it was dumped: unset bounds are None) -> Objectives."""
        if not block:
            return None
        return cls.of(((m, b, v) for m in OBJECTIVE_SAMPLES for b, v in (block.get(m) or {}).items()),
                      block.get("attainment"))

    def block(self) -> dict[str, Any]:  # json-edge: the Matrix's slo: block (diff --json)
        """Back to the shape of the Matrix's `slo:` block."""
        out: dict[str, Any] = {}
        for o in self.items:
            out.setdefault(o.metric, {})[o.bound] = o.limit
        out["attainment"] = self.attainment
        return out

    @property
    def per_request(self) -> list[Objective]:
        return [o for o in self.items if o.bound == PER_REQUEST]

    @property
    def percentiles(self) -> list[Objective]:
        return [o for o in self.items if o.bound != PER_REQUEST]

    def text(self) -> str:
        return "; ".join(o.text() for o in self.items) + f"; attainment >= {self.attainment:.0%} of the requests"


# -- one cell (or the repeats of one cell, pooled) against the objectives

class ObjectiveResult(_Model):
    objective: str = Field(description="its name, e.g. tpot_ms.p90")
    limit: float
    value: float | None = Field(None, description="percentile: its value (ms); per request: the share that met it")
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    holds: bool | None = Field(None, description="percentile objectives: value <= limit")
    certain: bool = Field(False, description="the whole 95% CI is on the side of the limit the verdict says")


class CellSlo(_Model):
    arm: str
    domain: str
    concurrency: int
    rate: float | None = Field(None, description="open loop: the cell's rate (req/s), its level")
    output_len: int
    repeats: int = 1
    status: str = Field("ok", description="ok | failed (every repeat failed) | no-samples (a summary-only import)")
    n: int = Field(0, description="measured requests, failed ones included")
    ok: int = Field(0, description="successful measured requests")
    met: int = Field(0, description="successful requests that met every per-request objective")
    attainment: float | None = None
    attainment_low: float | None = None
    attainment_high: float | None = None
    request_s: float | None = None
    output_tok_s: float | None = None
    goodput_req_s: float | None = None
    goodput_tok_s: float | None = None
    objectives: list[ObjectiveResult] = Field(default_factory=list)

    @property
    def level(self) -> float:
        return self.rate if self.rate is not None else self.concurrency
    holds: bool = False
    certain: bool = False
    why: str = Field("", description="what failed, e.g. `tpot_ms.p90 31.2 > 30`")
    excluded: list[str] = Field(default_factory=list, description="why no verdict (capacity, advice) uses this "
                                "cell (toolkit/schema/eligibility.py)")
    qualified: list[str] = Field(default_factory=list, description="what a verdict using it must name")


def met_mask(cols: dict[str, np.ndarray], per_request: list[Objective]) -> np.ndarray:
    """Per successful request (the rows of the columns): did it meet every per-request objective? A
    missing value (NaN: fewer than two tokens or chunks) has nothing to miss and meets it."""
    n = len(cols.get("e2e_ms", ()))
    ok = np.ones(n, dtype=bool)
    for o in per_request:
        x = np.asarray(cols.get(o.sample, np.full(n, np.nan)), dtype=np.float64)
        ok &= ~(x > o.limit)  # NaN > limit is False
    return ok


def _figure(c: CellSummary, name: str) -> float | None:
    s = c.metrics.get(name)
    return figure_of(s) if s is not None else None


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def evaluate(cells: list[CellSummary], cols: list[dict[str, np.ndarray]], obj: Objectives) -> CellSlo:
    """One (arm, domain, concurrency, output_len) against the objectives: its repeats' requests pooled
    for attainment and percentiles; goodput per repeat (the repeat's throughput x the share of its
    requests, or tokens, that met the per-request objectives), then averaged like the throughputs."""
    c0 = cells[0]
    out = CellSlo(arm=c0.arm, domain=c0.domain, concurrency=c0.concurrency, output_len=c0.output_len,
                  repeats=len(cells))
    if c0.rate is not None:  # set only for open loop: summary.json keeps the fields that were set
        out.rate = c0.rate
    pairs = [(c, k) for c, k in zip(cells, cols) if c.status == "ok"]
    if not pairs:
        out.status, out.why = "failed", "the cell failed"
        return out
    if not any(len(k.get("e2e_ms", ())) for _, k in pairs) and any(c.n_requests > c.n_errors for c, _ in pairs):
        out.status, out.why = "no-samples", "no per-request samples (a summary-only import)"
        return out
    goodput_req, goodput_tok = [], []
    for c, k in pairs:
        mask = met_mask(k, obj.per_request)
        n_ok = len(mask)
        out.n += max(c.n_requests, n_ok)
        out.ok += n_ok
        out.met += int(mask.sum())
        tokens = np.asarray(k.get("output_tokens", np.zeros(n_ok)), dtype=np.float64)
        rs, ts = _figure(c, "request_s"), _figure(c, "output_tok_s")
        goodput_req.append(rs * mask.sum() / n_ok if rs is not None and n_ok else (0.0 if rs is not None else None))
        goodput_tok.append(ts * tokens[mask].sum() / tokens.sum() if ts is not None and tokens.sum() > 0
                           else (0.0 if ts is not None else None))
    out.request_s = _mean([_figure(c, "request_s") for c, _ in pairs])
    out.output_tok_s = _mean([_figure(c, "output_tok_s") for c, _ in pairs])
    out.goodput_req_s, out.goodput_tok_s = _mean(goodput_req), _mean(goodput_tok)
    if out.n:
        out.attainment = out.met / out.n
        out.attainment_low, out.attainment_high = wilson(out.met, out.n)
    pooled = {o.sample: np.concatenate([np.asarray(k.get(o.sample, np.empty(0)), dtype=np.float64)
                                        for _, k in pairs]) for o in obj.items}
    fails, certain, results = [], True, []
    for o in obj.items:
        x = pooled[o.sample]
        if o.bound == PER_REQUEST:
            met = int((~(x > o.limit)).sum())
            lo, hi = wilson(met, out.n)
            results.append(ObjectiveResult(objective=o.name, limit=o.limit, value=met / out.n if out.n else None,
                                           ci_low=lo, ci_high=hi, n=out.n))
            continue
        x = x[np.isfinite(x)]
        if not len(x):
            results.append(ObjectiveResult(objective=o.name, limit=o.limit))
            fails.append(f"{o.name}: no values")
            certain = False
            continue
        v = float(np.percentile(x, o.percentile))
        lo, hi = quantile_ci(x, o.percentile / 100)
        holds = v <= o.limit
        sure = lo is not None and (hi <= o.limit if holds else lo > o.limit)
        results.append(ObjectiveResult(objective=o.name, limit=o.limit, value=v, ci_low=lo, ci_high=hi,
                                       n=len(x), holds=holds, certain=sure))
        certain &= sure
        if not holds:
            fails.append(f"{o.name} {v:.4g} > {o.limit:g}")
    att_holds = out.attainment is not None and out.attainment >= obj.attainment
    if not att_holds:
        fails.append(f"attainment {out.attainment or 0:.1%} < {obj.attainment:.0%}")
    lo, hi = out.attainment_low, out.attainment_high
    certain &= lo is not None and (lo >= obj.attainment if att_holds else hi < obj.attainment)
    out.objectives = results  # assigned, not appended: summary.json keeps what was set (exclude_unset)
    out.holds, out.certain, out.why = not fails, certain, "; ".join(fails)
    return out


# -- a run against the objectives (toolkit/results/slo.py makes it; summary.json keeps it in derived.slo)

class Capacity(_Model):
    """One arm and domain: the highest tested level at which the objectives hold, and every level below it
    holds too; the first failing level named with what failed."""

    arm: str
    domain: str
    output_len: int
    axis: str = Field("concurrency", description="what a level is: concurrency (closed loop) or rate (open loop, "
                                                 "req/s: the capacity is then requests per second)")
    levels: list[int | float] = Field(default_factory=list, description="the tested levels")
    holding: list[int | float] = Field(default_factory=list, description="levels at which the objectives hold")
    capacity: int | float | None = Field(None, description="the highest level before the first failure; None: "
                                                           "fails at the lowest")
    first_failure: int | float | None = None
    first_failure_why: str = ""
    holds_again: list[int | float] = Field(default_factory=list, description="levels above the first failure that "
                                                                             "hold again")
    not_judged: list[int | float] = Field(default_factory=list, description="levels no verdict may use (excluded cells)")
    qualified: list[int | float] = Field(default_factory=list, description="levels the capacity rests on that "
                                                                           "verdicts name")
    goodput_tok_s: float | None = Field(None, description="goodput at the capacity level")
    note: str = ""


class LevelChoice(_Model):
    """A speculative arm against the baseline at one level, within the objectives."""

    concurrency: int
    arm_holds: bool
    baseline_holds: bool
    throughput_ratio: float | None = None
    ci_high: float | None = Field(None, description="upper end of the paired ratio's 95% CI (raw advice)")
    goodput_ratio: float | None = Field(None, description="arm goodput tok/s / baseline goodput tok/s")
    choice: str = Field(description="speculative | baseline | neither (no arm meets the objectives) | excluded "
                                    "(a cell of the level is one no verdict may use)")


class SloAdvice(_Model):
    """speculative-disable-batch-threshold advice for one speculative arm and domain, by raw throughput (the
    runner's crossover) and within the objectives."""

    arm: str
    domain: str
    baseline: str
    levels: list[LevelChoice] = Field(default_factory=list)
    crossover_concurrency: int | None = Field(None, description="within the objectives: the first level, after "
                                              "the last one where speculation is the choice, where the baseline is")
    never_pays_off: bool = False
    no_advice: bool = Field(False, description="no tested level is one a verdict may use")
    raw_crossover_concurrency: int | None = None
    raw_note: str = ""
    note: str = ""


class SloAnalysis(_Model):
    objectives: Objectives
    axis: str = "concurrency"
    baseline: str | None = None
    cells: list[CellSlo] = Field(default_factory=list)
    capacity: list[Capacity] = Field(default_factory=list)
    advice: list[SloAdvice] = Field(default_factory=list)
    recommended_disable_batch_threshold: dict[str, int | None] = Field(
        default_factory=dict, description="per speculative arm, within the objectives: the lowest crossover over "
                                          "its domains")
    never_pays_off: list[str] = Field(default_factory=list, description="within the objectives, in every domain")
