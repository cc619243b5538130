"""What a verdict may use: one rule, per cell. A verdict is any claim drawn from cells rather than a
figure of one: the crossover and the disable-threshold advice (toolkit/results/verdicts.py), SLO holds,
capacity and advice (toolkit/results/slo.py), the regressions `results diff --fail-on-regression` gates
on, and tune's verdicts (toolkit/tune/report.py). Each asks `cell_flags` (or an `Eligibility` over a
run's cells) and leaves an excluded cell out, naming it, or names a qualified one beside the claim.

Excluded (no verdict uses the cell; the verdict says which cells it left out and why):
    failed        the cell failed: it has no figures
    capped        its concurrency is above the requests the server runs at once (ArmState's
                  max_running_requests, or SGLang's implicit 48 with speculation): the extra requests queue,
                  so the cell measures the queue, not the server at that concurrency
    few-samples   fewer than MIN_SAMPLES successful measured requests: no paired CI, no test, and a
                  percentile is one request
    stall         a few requests far slower than the rest, all in flight together (stall_check): one
                  hiccup of the server or the host sets the cell's throughput
    late          open loop: the client sent late (late_check): p99 of how late the measured requests left
                  exceeds max(LATE_MIN_MS, LATE_GAP_SHARE of the mean gap), so the server did not see the
                  target rate's arrivals
    drift         tune's A/A check (the baseline measured twice differs); the caller passes it
    unequal-work  a comparison, not a cell: the arm's answers averaged more than WORK_TOLERANCE more or fewer
                  output tokens a request than the baseline's at that level (`work_flag`), so their speed-up
                  compares different work. Synthetic acceptance (SGLANG_SIMULATE_ACC_LEN) forces tokens the
                  target did not choose, so its answers do not end where the target's do: on the H100 every one
                  ran to output_len, agentic answers that end at ~41 tokens included (docs/speculation.md)
Qualified (a verdict may use the cell and names it):
    short         shorter than MIN_CELL_S seconds, or fewer than MIN_REQUESTS_PER_SLOT requests per
                  concurrency slot (docs/results.md says why these floors)
    busy-host     other load on the host while the cell ran (busy_check)
Excluded from the latency verdicts only (LATENCY_METRICS: TTFT, TPOT, ITL; throughput verdicts use the cell):
    bundled       most (> BUNDLED_SHARE) successful measured requests arrived bundled (`bundled`: the whole
                  answer of more than one token at one instant, in one streamed chunk or one read, e.g. the
                  embedded engine on a busy host), so TTFT is the whole generation, ITL 0 and TPOT no decode speed (bundled_check)

Stall, late, bundled and busy-host are found while a cell runs and archived in its summary (`checks`); the others
follow from what every archive holds, so archives written before this rule read under it too.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from toolkit.engines.sglang import IMPLICIT_SPEC_CAP
from toolkit.schema.keys import level_label
from toolkit.schema.manifest import ArmState
from toolkit.schema.records import CellCheck, CellSummary, HostLoadRecord, RequestRecord

MIN_SAMPLES = 10            # successful measured requests a verdict needs (the diff's test needs as many)
MIN_CELL_S = 10.0           # one 2 s stall (seen on the H200) moves a 10 s cell's throughput by < 17 %
MIN_REQUESTS_PER_SLOT = 4   # below 4 waves, ramp-up and drain (partial concurrency) are > 1/4 of the cell
STALL_RATIO = 5.0           # a stalled request took more than 5x the cell's median E2E ...
STALL_MIN_MS = 200.0        # ... and at least 200 ms more than it (a client-side pause is shorter) ...
STALL_SHARE = 0.1           # ... and the wait is at least a tenth of the cell: it moves throughput by 10 % or more
STEAL_MAX = 0.10            # the hypervisor took more than 10 % of the CPU time
BUSY_MARGIN_CORES = 0.5     # runnable-task samples are instantaneous: half a core of noise is no load
LATE_MIN_MS = 10.0          # open loop: a client late by p99 > max(10 ms, LATE_GAP_SHARE of the mean gap) ...
LATE_GAP_SHARE = 0.1        # ... did not send the schedule it was asked to: the server saw another load

WORK_TOLERANCE = 0.10      # a speed-up's two sides answer within 10 % the same output tokens a request
BUNDLED_SHARE = 0.5         # more than half the answers in one chunk: the cell's TTFT/ITL/TPOT measure no stream

EXCLUDING = ("failed", "capped", "few-samples", "stall", "late", "drift", "unequal-work")
QUALIFYING = ("short", "busy-host")
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "itl_req_mean_ms")  # what a bundled answer leaves unmeasured
EXCLUDING_METRICS: dict[str, tuple[str, ...]] = {"bundled": LATENCY_METRICS}  # flags that exclude some metrics only


@dataclass(frozen=True)
class Flag:
    code: str  # one of EXCLUDING, QUALIFYING or EXCLUDING_METRICS, or a check a cell's summary carries
    why: str
    excludes: bool
    metrics: tuple[str, ...] = ()  # a flag that does not exclude the cell: the metrics no verdict may use

    @classmethod
    def of(cls, code: str, why: str) -> "Flag":
        return cls(code, why, code in EXCLUDING, EXCLUDING_METRICS.get(code, ()))

    def excludes_metric(self, metric: str) -> bool:
        """May no verdict on `metric` use the flagged cell?"""
        return self.excludes or metric in self.metrics

    def text(self) -> str:
        return f"{self.code} ({self.why})"


def server_cap(arm: ArmState | None) -> tuple[int | None, str]:
    """(requests the arm's server runs at once, where that number comes from)."""
    if arm is None:
        return None, ""
    limit, implicit = arm.max_running_requests, arm.max_running_requests_implicit
    if limit is None and implicit:
        limit = IMPLICIT_SPEC_CAP
    if not limit:
        return None, ""
    return int(limit), ("set by SGLang itself: speculation on, max-running-requests unset" if implicit
                        else f"the server's max running requests ({arm.max_running_requests_source or 'launcher'})")


def short_why(cell: CellSummary) -> str | None:
    """Why the cell is too short for its throughput to mean much, or None."""
    parts = []
    if 0 < cell.duration_s < MIN_CELL_S:
        parts.append(f"{cell.duration_s:.2g} s < {MIN_CELL_S:g} s")
    per = cell.n_requests / cell.concurrency if cell.concurrency > 0 and cell.rate is None else None
    if per and per < MIN_REQUESTS_PER_SLOT:
        parts.append(f"{per:.2g} request{'' if per == 1 else 's'} per slot < {MIN_REQUESTS_PER_SLOT}")
    return ", ".join(parts) or None


def tokens_per_request(cell: CellSummary) -> float | None:
    """A cell's output tokens per successful request (its throughput over its request rate), or None."""
    tok, req = cell.metrics.get("output_tok_s"), cell.metrics.get("request_s")
    if cell.status != "ok" or tok is None or req is None or not tok.mean or not req.mean:
        return None
    return float(tok.mean) / float(req.mean)


def cell_flags(cell: CellSummary, arm: ArmState | None = None, drift: str | None = None) -> list[Flag]:
    """Every reason a verdict may not use this cell (excluding) or must name it (qualifying)."""
    if cell.status != "ok":
        return [Flag.of("failed", cell.reason or "the cell failed")]
    out = []
    ok = cell.n_requests - cell.n_errors
    if ok < MIN_SAMPLES:
        out.append(Flag.of("few-samples", f"{ok} successful requests < {MIN_SAMPLES}"))
    limit, source = server_cap(arm)
    if limit is not None and cell.concurrency > limit and cell.rate is None:  # open loop: the queue is the load
        out.append(Flag.of("capped", f"c={cell.concurrency} above the {limit} request{'' if limit == 1 else 's'} the server runs at once, "
                                  f"{source}: {cell.concurrency - limit} queue"))
    for c in cell.checks:
        excludes = c.excludes or c.check in EXCLUDING
        out.append(Flag(c.check, c.message, excludes, () if excludes else EXCLUDING_METRICS.get(c.check, ())))
    why = short_why(cell)
    if why:
        out.append(Flag.of("short", why))
    if drift:
        out.append(Flag.of("drift", drift))
    return out


class Eligibility:
    """The flags of a run's cells, by (arm, domain, concurrency): the repeats of a level pooled (a flag on
    any repeat flags the level, since the level's figures pool them)."""

    def __init__(self, cells: Iterable[CellSummary], arm_info: dict[str, ArmState] | None = None,
                 drift: dict[tuple[str, str, int], str] | None = None):
        self._by: dict[tuple[str, str, int], list[Flag]] = defaultdict(list)
        self._work: dict[tuple[str, str, int], list[tuple[float, int]]] = defaultdict(list)
        self._synthetic: set[str] = set()
        self._rates = False
        for c in cells:
            self._rates = self._rates or c.rate is not None
            key = (c.arm, c.domain, c.level)
            if c.synthetic_acceptance is not None:
                self._synthetic.add(c.arm)
            per = tokens_per_request(c)
            if per is not None:
                self._work[key].append((per, c.n_requests - c.n_errors))
            for f in cell_flags(c, (arm_info or {}).get(c.arm), (drift or {}).get(key)):
                if all(f.code != g.code for g in self._by[key]):
                    self._by[key].append(f)

    def _label(self, level: float) -> str:
        return level_label(int(level), level if self._rates else None)

    def flags(self, arm: str, domain: str, concurrency: int) -> list[Flag]:
        return list(self._by.get((arm, domain, concurrency), []))

    def excluded(self, arm: str, domain: str, concurrency: int) -> list[Flag]:
        return [f for f in self.flags(arm, domain, concurrency) if f.excludes]

    def qualified(self, arm: str, domain: str, concurrency: int) -> list[Flag]:
        return [f for f in self.flags(arm, domain, concurrency) if not f.excludes]

    def excluded_for(self, arm: str, domain: str, concurrency: int, metric: str) -> list[Flag]:
        """The flags that leave the level out of a verdict on `metric` (the excluding ones, and those that
        exclude that metric only: `bundled` for TTFT/ITL/TPOT)."""
        return [f for f in self.flags(arm, domain, concurrency) if f.excludes_metric(metric)]

    def work(self, arm: str, domain: str, level: float) -> float | None:
        """Output tokens a successful request of the level's cells, weighted by their requests; None unknown."""
        got = self._work.get((arm, domain, level), [])
        n = sum(k for _, k in got)
        return sum(v * k for v, k in got) / n if n else None

    def work_flag(self, arm: str, baseline: str, domain: str, level: float) -> Flag | None:
        """`unequal-work` when the arm's answers are more than WORK_TOLERANCE longer or shorter than the
        baseline's at that level (a speed-up is a ratio of rates: of the same work only), else None."""
        a, b = self.work(arm, domain, level), self.work(baseline, domain, level)
        if a is None or b is None or b <= 0 or abs(a / b - 1) <= WORK_TOLERANCE:
            return None
        why = f"{arm} answered {a:.0f} output tokens a request, {baseline} {b:.0f}: the speed-up compares different work"
        if arm in self._synthetic:
            why += ("; synthetic acceptance forces tokens the target did not choose, so its answers do not end "
                    "where the target's do")
        return Flag.of("unequal-work", why)

    def usable(self, arm: str, domain: str, concurrency: int) -> bool:
        return not self.excluded(arm, domain, concurrency)

    def items(self) -> list[tuple[tuple[str, str, int], list[Flag]]]:
        return sorted((k, v) for k, v in self._by.items() if v)

    def lines(self, excluding: bool, skip: tuple[str, ...] = ()) -> list[str]:
        """One line per flagged level: `arm domain c=N: code (why); ...` (`r=Q/s` for open-loop levels; flags
        whose code is in skip left out)."""
        out = []
        for (arm, domain, level), flags in self.items():
            fs = [f for f in flags if f.excludes == excluding and f.code not in skip]
            if fs:
                out.append(f"{arm} {domain} {self._label(level)}: " + "; ".join(f.text() for f in fs))
        return out


def stall_check(records: list[RequestRecord]) -> CellCheck | None:
    """A stall: a few measured requests (fewer than half) took more than STALL_RATIO x the median E2E (and
    STALL_MIN_MS more, and STALL_SHARE of the cell's span), all of them in flight at one instant, and most
    requests in flight then are among them: the server or the host stopped for everything in flight, which
    a long prompt does not do."""
    meas = [r for r in records if not r.warmup and r.ok and r.e2e_ms]
    if len(meas) < MIN_SAMPLES:
        return None
    e2e = np.array([r.e2e_ms for r in meas], float)
    med = float(np.median(e2e))
    slow = [r for r in meas if r.e2e_ms > STALL_RATIO * med and r.e2e_ms - med >= STALL_MIN_MS]
    span_ms = (max(r.send_s * 1000 + r.e2e_ms for r in meas) - min(r.send_s for r in meas) * 1000)
    if not slow or 2 * len(slow) >= len(meas) or max(r.e2e_ms for r in slow) - med < STALL_SHARE * span_ms:
        return None
    t = max(r.send_s for r in slow)
    if t >= min(r.send_s + r.e2e_ms / 1000 for r in slow):
        return None  # never all in flight together: scattered slow requests, not one stall
    flying = [r for r in meas if r.send_s <= t < r.send_s + r.e2e_ms / 1000]
    if 2 * len(slow) < len(flying):
        return None  # most requests in flight then were fine: those few were slow on their own
    worst = max(r.e2e_ms for r in slow)
    p99 = float(np.percentile(e2e, 99))
    return CellCheck(check="stall", excludes=True, n_slow=len(slow), median_ms=med, worst_ms=worst, at_s=t,
                     message=f"{len(slow)} of {len(meas)} requests took {STALL_RATIO:g}x the median E2E or more "
                             f"({min(r.e2e_ms for r in slow):,.0f}-{worst:,.0f} ms vs {med:,.0f} ms; p99/p50 "
                             f"{p99 / med:.1f}), all in flight at {t:.2f} s: one stall sets this cell's throughput")


def bundled(r: RequestRecord) -> bool | None:
    """Did the answer arrive bundled: every output token (more than one) at one instant, in a single streamed
    chunk or in chunks that came in one read (the client stamps a chunk with its arrival: toolkit/loadgen/
    http.py)? Then its TTFT is the whole generation and its inter-token gaps are 0. None where unknown (a
    record without chunk timings: a failed request, or an import that kept none)."""
    if not r.chunk_ms:
        return None
    return r.output_tokens > 1 and r.chunk_ms[-1] == r.chunk_ms[0]


def bundled_check(records: list[RequestRecord]) -> tuple[float | None, CellCheck | None]:
    """(the share of successful measured requests that arrived bundled, the `bundled` check when it is above
    BUNDLED_SHARE): such a cell's TTFT, ITL and TPOT measure no stream, so no latency verdict uses it
    (throughput ones do). (None, None) where no request says (records from before the field)."""
    ok = [r for r in records if not r.warmup and r.ok and r.e2e_ms is not None]
    known = [r.bundled for r in ok if r.bundled is not None]
    if not known:
        return None, None
    n = sum(known)
    share = n / len(known)
    if share <= BUNDLED_SHARE:
        return share, None
    return share, CellCheck(check="bundled", excludes=False, n_bundled=n, n=len(known), share=share,
                            metrics=list(LATENCY_METRICS),
                            message=f"{n} of {len(known)} answers arrived at once, every token in one chunk or "
                                    f"one read (> {BUNDLED_SHARE:.0%}): "
                                    "TTFT is the whole generation, ITL and TPOT measure no stream; no TTFT/ITL/TPOT "
                                    "verdict uses the cell")


def late_bound_ms(rate: float) -> float:
    """How late (p99, ms) an open-loop client may send at this rate: max(LATE_MIN_MS, LATE_GAP_SHARE x 1/rate)."""
    return max(LATE_MIN_MS, LATE_GAP_SHARE * 1000.0 / rate)


def max_in_flight(records: list[RequestRecord]) -> int:
    """The most measured requests in flight at once (from their send times and E2E)."""
    ev = sorted([(r.send_s, 1) for r in records if not r.warmup and r.e2e_ms is not None]
                + [(r.send_s + r.e2e_ms / 1000, -1) for r in records if not r.warmup and r.e2e_ms is not None],
                key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, d in ev:
        now += d
        most = max(most, now)
    return most


def late_check(records: list[RequestRecord], rate: float | None,
               cap: int | None = None) -> tuple[float | None, CellCheck | None]:
    """(p99 of the measured requests' lateness in ms, the `late` check when it exceeds late_bound_ms): a client
    that could not keep the schedule (too few slots under `max_concurrency`, a busy host, an event loop behind)
    sent another arrival process than the one declared. Closed-loop cells: (None, None)."""
    lags = [r.lag_ms for r in records if not r.warmup and r.lag_ms is not None]
    if rate is None or not lags:
        return None, None
    p99, bound = float(np.percentile(lags, 99)), late_bound_ms(rate)
    if p99 <= bound:
        return p99, None
    full = cap is not None and max_in_flight(records) >= cap
    why = (f"; all {cap} slots were in flight (`max_concurrency`): arrivals waited for one, the server is slower "
           "than this rate" if full else "")
    return p99, CellCheck(check="late", excludes=True, p99_ms=p99, bound_ms=bound, cap_full=full,
                          message=f"the client sent late: p99 {p99:,.0f} ms behind the schedule > {bound:,.0f} ms "
                                  f"(max({LATE_MIN_MS:g} ms, {LATE_GAP_SHARE:.0%} of the mean gap)): the server "
                                  f"did not see {rate:g} req/s as declared{why}")


def busy_check(host: HostLoadRecord | None) -> CellCheck | None:
    """Busy host: other processes wanted more CPU than this run left free (the cores less what the run
    itself used, plus BUSY_MARGIN_CORES of sampling noise), the hypervisor stole more than STEAL_MAX, or
    another toolkit run was running on the host. `host`: toolkit/bench/hostload.py's samples."""
    if not host:
        return None
    why = []
    cpus, own, foreign = host.cpus or 0, host.own_cores or 0.0, host.foreign_cores
    if foreign is not None and cpus and foreign > max(cpus - own, 0.0) + BUSY_MARGIN_CORES:
        why.append(f"other processes wanted {foreign:.1f} cores while this run used {own:.1f} of {cpus}")
    if (host.steal or 0.0) > STEAL_MAX:
        why.append(f"the hypervisor took {host.steal:.0%} of the CPU time (steal)")
    if host.other_runs:
        why.append("other toolkit runs on this host: " + ", ".join(
            f"{r.get('matrix') or '?'} (pid {r.get('pid')})" for r in host.other_runs))
    if not why:
        return None
    return CellCheck(check="busy-host", message="; ".join(why) + ": the cell's figures include their load")
