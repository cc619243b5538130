"""Every metric the toolkit reports, defined once: its name, unit, better direction, what one sample
is, and how a cell's figures and confidence interval come from the RequestRecords. docs/results.md
shows the same table, with which peer tool uses which convention.

What one sample is (`Metric.kind`):

    request  one value per successful measured request. Percentiles over the requests; the median has
             a 95% CI; `results diff` tests a change with Mann-Whitney U on these samples.
    chunk    one value per streamed chunk, pooled over every chunk of every successful request (what
             sglang.bench_serving and vLLM report as ITL). Percentiles over the chunks; no CI and no
             test: the chunks of one request are not independent samples, so an interval or p-value
             over them would claim more certainty than the data holds (itl_req_mean_ms is the tested
             per-request view of the same gaps).
    cell     one figure per cell (a throughput or a ratio of sums): stored as mean = p50, no CI, no test.
    share    one proportion per cell: the requests that met something out of the measured requests
             (slo_attainment). A 95% Wilson score interval; `results diff` tests a change with Fisher's
             exact test on the two counts.

Goodput and attainment (goodput_req_s, goodput_tok_s, slo_attainment) exist only under service-level
objectives (toolkit/schema/slo.py, docs/slo.md): a Matrix's `slo:` block, or `--slo` on `results slo`
and `results diff`. They are computed from the per-request columns when a run is read, never stored
in a cell summary, so the same archive answers for any objectives.

The CI of a median, everywhere: the distribution-free interval between two order statistics, chosen
with the exact binomial distribution (X(k) <= median <= X(n-k+1) holds with probability >= 95% for
any continuous distribution). Deterministic (no seed, no resampling), O(n), valid for skewed latency
distributions, and what benchstat reports; with fewer than 6 samples no 95% interval exists and
none is given (toolkit.stats.median_ci).

A successful measured request: not warmup, no error, an end time. Times are ms after the send.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

import numpy as np

from toolkit.schema.records import CellSummary, RequestRecord, Stat
from toolkit.stats.samples import median_ci, wilson

MIN_N = {"p90": 10, "p99": 100}  # fewer samples than this: the percentile is marked unreliable


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    better: Literal["lower", "higher"]
    kind: Literal["request", "chunk", "cell", "share"]
    definition: str
    # The metric whose change this one repeats (derived from the same figures: request_s is output_tok_s over
    # the output length). The one place that says which metrics are independent: a test of a metric that
    # tracks another is no member of a diff's Holm family where the tracked metric is tested in the same cell
    # (toolkit/results/diff.py `family`), so duplicates do not spend the family's alpha.
    tracks: str | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    @property
    def ci(self) -> str:
        """How the 95% CI is made: `order-statistic` (the median of request metrics), `wilson` (a share) or
        `none`."""
        return {"request": "order-statistic", "share": "wilson"}.get(self.kind, "none")

    @property
    def tested(self) -> bool:
        """Does `results diff` test a change of this metric for significance?"""
        return self.kind in ("request", "share")


# -- per-request values (None: the request has no such value)

def successful(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if not r.warmup and r.error is None and r.e2e_ms is not None]


def _tokens_in_chunks(r: RequestRecord) -> list[int]:
    """Tokens each chunk carried; one per chunk when the client did not record them."""
    return r.chunk_tokens if len(r.chunk_tokens) == len(r.chunk_ms) else [1] * len(r.chunk_ms)


def chunk_itls(r: RequestRecord) -> list[float]:
    """Per chunk after the first: the gap to the previous chunk divided by the tokens it carries."""
    t, k = r.chunk_ms, _tokens_in_chunks(r)
    return [(t[i] - t[i - 1]) / max(k[i], 1) for i in range(1, len(t))]


def _ttft(r: RequestRecord) -> float | None:
    return r.ttft_ms


def _e2e(r: RequestRecord) -> float | None:
    return r.e2e_ms


def _tpot(r: RequestRecord) -> float | None:
    if r.ttft_ms is None or r.e2e_ms is None or r.output_tokens < 2:
        return None
    return (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1)


def _itl_req_mean(r: RequestRecord) -> float | None:
    gaps = chunk_itls(r)
    return sum(gaps) / len(gaps) if gaps else None


def _req_output_tok_s(r: RequestRecord) -> float | None:
    return r.output_tokens / (r.e2e_ms / 1000.0) if r.e2e_ms else None


def _req_accept_length(r: RequestRecord) -> float | None:
    if r.accept_length is not None:
        return float(r.accept_length)
    return r.output_tokens / r.spec_verify_ct if r.spec_verify_ct else None


PER_REQUEST: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft_ms": _ttft, "tpot_ms": _tpot, "itl_req_mean_ms": _itl_req_mean, "e2e_ms": _e2e,
    "req_output_tok_s": _req_output_tok_s, "req_accept_length": _req_accept_length}

REGISTRY: tuple[Metric, ...] = (
    Metric("ttft_ms", "TTFT", "ms", "lower", "request",
           "time to first token: send -> first content chunk"),
    Metric("tpot_ms", "TPOT", "ms", "lower", "request",
           "time per output token after the first: (e2e - ttft) / (output tokens - 1); "
           "requests with fewer than 2 tokens have none"),
    Metric("itl_ms", "ITL", "ms", "lower", "chunk",
           "inter-token latency: per chunk after the first, the gap to the previous chunk divided by the "
           "tokens in the chunk, pooled over all chunks of all successful requests", tracks="tpot_ms"),
    Metric("itl_req_mean_ms", "ITL req mean", "ms", "lower", "request",
           "per request: the mean over its chunks of gap / tokens in the chunk (the itl_ms gaps, averaged "
           "within each request first); requests with fewer than 2 chunks have none", tracks="tpot_ms"),
    Metric("e2e_ms", "E2E", "ms", "lower", "request", "end-to-end latency: send -> end of stream"),
    Metric("req_output_tok_s", "req tok/s", "tok/s", "higher", "request",
           "per request: output tokens / e2e seconds (the speed one user sees, first-token wait included)"),
    Metric("req_accept_length", "req accept", "tokens/step", "higher", "request",
           "per request: output tokens per verification step (speculative decoding), as SGLang reports it "
           "(meta_info), else output tokens / verification steps"),
    Metric("output_tok_s", "tok/s", "tok/s", "higher", "cell",
           "cell throughput: output tokens of the successful requests / the measured span (first send -> "
           "last end)"),
    Metric("request_s", "req/s", "req/s", "higher", "cell",
           "cell throughput: successful requests / the measured span", tracks="output_tok_s"),
    Metric("accept_length", "accept", "tokens/step", "higher", "cell",
           "cell acceptance length: sum of output tokens / sum of verification steps (a ratio of sums, not a "
           "mean of ratios), over the requests that report steps, else from the server's own counts for the "
           "cell; the cell's accept_source says which (ACCEPT_SOURCES)", tracks="req_accept_length"),
    Metric("goodput_req_s", "goodput req/s", "req/s", "higher", "cell",
           "under service-level objectives: requests that met every per-request objective / the measured span "
           "(request_s x met / successful)"),
    Metric("goodput_tok_s", "goodput tok/s", "tok/s", "higher", "cell",
           "under service-level objectives: output tokens of the requests that met every per-request objective / "
           "the measured span (output_tok_s x their tokens / all successful tokens)", tracks="goodput_req_s"),
    Metric("slo_attainment", "attainment", "share", "higher", "share",
           "under service-level objectives: the share of measured requests (failed ones included) that succeeded "
           "and met every per-request objective, with a 95% Wilson interval"),
)
METRICS: dict[str, Metric] = {m.name: m for m in REGISTRY}

# Where a cell's accept_length comes from (CellSummary.accept_source). One definition, several counters:
# each is sum of output tokens / sum of verification steps. toolkit/bench/acceptance.py reads the server's.
ACCEPT_SOURCES: dict[str, str] = {
    "requests": "per request: the wire's verification steps (SGLang /generate meta_info spec_verify_ct), "
                "summed over the cell's measured requests",
    "server-metrics": "per cell, from the server: SGLang /metrics counters generation_tokens_total / "
                      "spec_verify_calls_total over the measured phase (enable-metrics: true)",
    "server-info": "per cell, from the server: SGLang /server_info avg_spec_accept_length since the /flush_cache "
                   "before the cell (warmup included; whole decode-log intervals only)",
    "server-log": "per cell, from the server: the embedded engine's own count per request (tokens, steps) "
                  "over the measured phase",
}
NAMES: tuple[str, ...] = tuple(METRICS)
REQUEST_METRICS: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.kind == "request")
SLO_METRICS: tuple[str, ...] = ("goodput_req_s", "goodput_tok_s", "slo_attainment")  # only under objectives


# -- a cell's figures (the intervals are toolkit/stats/samples.py: median_ci, wilson)

def share(k: int, n: int) -> Stat:
    """A share-kind metric's Stat: mean = p50 = k / n with its Wilson interval; n = the requests counted."""
    if n <= 0:
        return Stat(n=0)
    lo, hi = wilson(k, n)
    return Stat(mean=k / n, p50=k / n, ci_low=lo, ci_high=hi, n=n)


def describe(values, *, ci: bool = True) -> Stat:
    """mean, p50, p90, p99 (numpy's linear interpolation), n, unreliable marks and, with ci, the median's
    CI. Non-finite values (a request without the value) are left out. The one place a Stat is made from
    samples: the runner's summaries, `results show` and `results diff` all call it."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Stat(n=0)
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    lo, hi = median_ci(x) if ci else (None, None)
    return Stat(mean=float(x.mean()), p50=float(p50), p90=float(p90), p99=float(p99), ci_low=lo, ci_high=hi,
                n=n, unreliable=[p for p, k in MIN_N.items() if n < k])


def figure(value: float | None, n: int) -> Stat:
    """A cell metric's Stat: one figure (mean = p50), n = the requests behind it."""
    if value is None or not math.isfinite(value):
        return Stat(n=n)
    return Stat(mean=float(value), p50=float(value), n=n)


def figure_of(stat: Stat) -> float | None:
    """The one figure of a cell metric's Stat (older archives kept other fields beside the mean)."""
    return stat.mean if stat.mean is not None else stat.p50


def cell_throughput(cells: Iterable[CellSummary]) -> float | None:
    """The output throughput of one (arm, domain, concurrency): the mean of its ok cells' output_tok_s
    (repeats and launches alike). A speed-up's throughput_ratio is the arm's over the baseline's."""
    vals = [figure_of(c.metrics["output_tok_s"]) for c in cells
            if c.status == "ok" and "output_tok_s" in c.metrics and figure_of(c.metrics["output_tok_s"])]
    return float(np.mean(vals)) if vals else None


# data-keyed: cell
def throughput_ratios(cells: Iterable[CellSummary], baseline: str) -> dict[tuple[str, str, int], float]:
    """(arm, domain, concurrency) -> the arm's cell_throughput over the baseline's at that level: the one
    speed-up every reader uses (the runner's derived speed-ups hold it as throughput_ratio)."""
    by: dict[tuple[str, str, int], list[CellSummary]] = {}
    for c in cells:
        by.setdefault((c.arm, c.domain, c.level), []).append(c)
    out = {}
    for (arm, domain, conc), own in sorted(by.items()):
        if arm == baseline or (baseline, domain, conc) not in by:
            continue
        ta, tb = cell_throughput(own), cell_throughput(by[(baseline, domain, conc)])
        if ta and tb:
            out[(arm, domain, conc)] = ta / tb
    return out


def achieved_rate(records: Iterable[RequestRecord]) -> float | None:
    """The rate an open-loop cell's client achieved, req/s: the measured requests sent, over the span of
    their send times, (n - 1) / (last send - first send) (n sends span n - 1 gaps: the unbiased form of
    "requests sent / span"). None with fewer than two sends."""
    sends = sorted(r.send_s for r in records if not r.warmup)
    if len(sends) < 2 or sends[-1] <= sends[0]:
        return None
    return (len(sends) - 1) / (sends[-1] - sends[0])


def request_values(records: list[RequestRecord], name: str) -> np.ndarray:
    """One float32 per successful request (NaN where the request has no value): the stored column."""
    f = PER_REQUEST[name]
    return np.asarray([_nan(f(r)) for r in records], dtype=np.float32)


def _nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def cell_stats(records: list[RequestRecord]) -> tuple[dict[str, Stat], float]:
    """Every metric of one cell from its records (warmup and failed requests left out of the samples;
    the span runs from the first measured send to the last measured end, failed requests included).
    Request metrics are computed from their float32 column, the values the archive stores, so a Stat
    recomputed from the archive equals the one written. Returns (stats by name, span in seconds)."""
    measured = [r for r in records if not r.warmup]
    ok = successful(measured)
    out: dict[str, Stat] = {}
    if not measured:
        return out, 0.0
    for name in REQUEST_METRICS:
        s = describe(request_values(ok, name))
        if s.n:
            out[name] = s
    gaps = [g for r in ok for g in chunk_itls(r)]
    if gaps:
        out["itl_ms"] = describe(gaps, ci=False)
    figures, span = cell_figures(measured)
    out.update(figures)
    return {m: out[m] for m in NAMES if m in out}, span


def cell_figures(measured: list[RequestRecord]) -> tuple[dict[str, Stat], float]:
    """The cell-kind figures of a cell's measured (non-warmup) records: output_tok_s, request_s and, where
    requests report verification steps, accept_length. Returns (figures, span in seconds)."""
    if not measured:
        return {}, 0.0
    ok = successful(measured)
    start = min(r.send_s for r in measured)
    end = max(r.send_s + (r.e2e_ms or 0.0) / 1000.0 for r in measured)
    span = max(end - start, 1e-9)
    out = {"output_tok_s": figure(sum(r.output_tokens for r in ok) / span, len(ok)),
           "request_s": figure(len(ok) / span, len(ok))}
    steps = [r for r in ok if r.spec_verify_ct]
    if steps:
        out["accept_length"] = figure(sum(r.output_tokens for r in steps) / sum(r.spec_verify_ct for r in steps),
                                      len(steps))
    return out, span
