"""Derived results of a matrix run: paired speedups, crossovers, and methodology checks.

Speedup of a spec arm over the baseline arm, per domain x concurrency (repeats pooled):
- `throughput_ratio`: output tok/s of the arm / output tok/s of the baseline (the headline figure).
- `paired_ratio` with a 95% CI: both arms saw the same prompts in the same order, so the ratio of the
  arms' output rates over those prompts (sum of output tokens / sum of end-to-end seconds) is paired.
  The unit of replication is the server launch (toolkit/stats/launches.py): with two or more launch
  rounds, one paired ratio per round (both arms saw the same prompts in a round) and a t-interval over the
  rounds, the cell's own variance over its rounds; with one round, the paired bootstrap over prompts
  widened by the launch noise of both servers (a calibration run's, else the default launch CV), and
  labelled so (`ci_method`).
The crossover and the `speculative-disable-batch-threshold` advice (the patch shipped in envs/patches/)
are verdicts: toolkit/results/verdicts.py makes them, over the levels a verdict may use
(toolkit/schema/eligibility.py), for the runner and every reader alike.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

from toolkit.results.speedups import (BOOTSTRAP, PairedRatio, launch_paired, measured_ok, occurrence_keys,  # noqa: F401 (re-exported)
                                      paired_ratio, speedup_noise, speedups)
from toolkit.results.verdicts import crossovers, never_pays_off, recommended_threshold  # noqa: F401 (re-exported)
from toolkit.schema.eligibility import MIN_CELL_S, MIN_REQUESTS_PER_SLOT, short_why
from toolkit.schema.manifest import ArmState, Check, Speedup, Timing, Window
from toolkit.schema.records import CellSummary, RequestRecord


def halfwidth_pct(row: Speedup) -> float | None:
    """A speed-up row's 95% CI as ±percent of its ratio, on the log scale (the CI is a ratio's: symmetric in
    log space): sqrt(high / low) - 1. None when the row has no CI."""
    lo, hi = row.ci_low, row.ci_high
    if not lo or not hi or lo <= 0 or hi <= 0:
        return None
    return (math.sqrt(hi / lo) - 1.0) * 100.0


def overhead_ratio(timing: Timing, slot_arms: list[list[str]]) -> float | None:
    """Wall time over the busiest slot's own time (its arms' server starts, stops and cells): slots run
    side by side, so the run can take no less than its longest slot. 1.0 means no runner overhead."""
    spent = (timing.launch_s, timing.stop_s, timing.launch_failed_s, timing.warmup_launch_s, timing.arm_cells_s)
    longest = max((sum(d.get(a, 0.0) for d in spent for a in arms) for arms in slot_arms), default=0.0)
    return timing.wall_s / longest if longest > 0.5 else None  # nothing ran long enough to compare


def shared_hardware_overlaps(windows: dict[str, Window]) -> list[tuple[str, str, float]]:
    """Pairs of arms measured at the same time on shared hardware: (arm a, arm b, seconds of overlap)."""
    from toolkit.bench.slots import shares_hardware

    out = []
    arms = sorted(windows)
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            wa, wb = windows[a], windows[b]
            if not shares_hardware(wa.hardware, wb.hardware):
                continue
            start, end = max(wa.start, wb.start), min(wa.end or wa.start, wb.end or wb.start)
            if end > start:
                out.append((a, b, end - start))
    return out


def methodology_checks(*, matrix, cells: list[CellSummary], records: dict[tuple, list[RequestRecord]],
                       arm_info: dict[str, ArmState], flushed: dict[str, bool] | None = None,
                       representativeness: list[dict] | None = None,
                       windows: dict[str, Window] | None = None, dummy_arms: list[str] | None = None) -> list[Check]:
    """Problems with how a run measured, each a Check (check, severity, message). --strict fails on any error."""
    out: list[Check] = []

    def add(check: str, message: str, severity: str = "warning") -> None:
        out.append(Check(check=check, severity=severity, message=message))

    _overlap_checks(windows or {}, add)
    _server_checks(matrix, arm_info, add)
    for arm in dummy_arms or []:
        add("random-weights", f"arm {arm} serves random weights (a dummy model): acceptance lengths and speed-ups "
                              "say nothing about a real drafter or model; the run shows that the path works")
    if matrix.warmup == 0:
        add("no-warmup", "warmup is 0: the first requests of each cell pay compilation, cache and connection set-up")
    thin = sorted({(c.arm, c.domain, c.concurrency, p) for c in cells for m in c.metrics.values() for p in m.unreliable})
    if thin:
        pcts = sorted({t[3] for t in thin})
        add("percentile-from-few-samples",
            f"{len(thin)} cell percentiles ({', '.join(pcts)}) come from too few requests (p99 needs >= 100, "
            "p90 >= 10): they are marked unreliable")
    _prompt_checks(matrix, records, add)
    for arm, ok in (flushed or {}).items():
        if not ok:
            add("acceptance-counters-not-reset",
                f"arm {arm}: the server's cumulative acceptance counters could not be reset between cells "
                "(/flush_cache failed): server-wide acceptance figures mix cells")
    out += acceptance_checks(matrix, cells, arm_info)
    for c in cells:
        if c.status == "failed":
            add("cell-failed", f"{c.arm} {c.domain} {c.label}: {c.reason}", "error")
        elif c.error_rate > 0:
            add("request-errors", f"{c.arm} {c.domain} {c.label}: {c.n_errors} of {c.n_requests} requests "
                                  f"failed ({c.error_rate:.0%})", "error" if c.error_rate > 0.05 else "warning")
    _cell_checks(cells, add)
    _work_checks(getattr(matrix, "baseline_arm", None), cells, add)
    for rep in representativeness or []:
        if rep.get("verdict") == "far":
            add("workload-far-from-training-data",
                f"workload {rep['workload']} is far from the drafter's training data "
                f"(divergence {rep.get('divergence', float('nan')):.2f}): {rep.get('reason', '')}", "error")
    return out


def _overlap_checks(windows: dict[str, Window], add: Callable[..., None]) -> None:
    """Arms measured at the same time on shared hardware (an error)."""
    for a, b, secs in shared_hardware_overlaps(windows):
        hw = windows[a].hardware
        add("arms-overlapped-on-shared-hardware",
            f"arms {a} and {b} were measured at the same time for {secs:.0f} s on the same hardware "
            f"(host {hw.host}, GPUs {hw.gpus}): each one's figures include the other's load; "
            "run them one after another (one slot), or on separate GPU sets (`gpus:`), or declare external URLs "
            "`independent: true` only when they really are separate machines", "error")


def _server_checks(matrix, arm_info: dict[str, ArmState], add: Callable[..., None]) -> None:
    """What the servers said of themselves: settings other than the preset's, a cap below the tested
    concurrency, a stop that needed a harsher signal."""
    for arm, info in arm_info.items():
        for mm in info.preset_mismatches:
            ext = info.external
            add("server-differs-from-preset",
                f"arm {arm}: the server reports {mm['flag'].replace('-', '_')}={mm['server']!r} where the preset says "
                f"{mm['flag']}: {mm['preset']!r}" + (": this external server was started with other settings than "
                "the spec; the figures belong to the server, not to the preset" if ext else
                " (SGLang adjusted it at start-up)"), "error" if ext else "warning")
    for arm, info in arm_info.items():
        limit = info.max_running_requests
        over = [c for c in matrix.concurrency or [] if limit and c > limit]  # open loop: the queue is the load
        if not over:
            continue
        source = info.max_running_requests_source or "the launcher"
        if info.max_running_requests_implicit:
            said = info.max_running_requests_log_line
            add("concurrency-above-max-running-requests",
                f"arm {arm}: concurrency {over} exceeds max running requests {limit} ({source}), which SGLang set by "
                "itself because speculation is on and `max-running-requests` is unset"
                + (f' (its log: "{said}")' if said else "") + ": extra requests queue and the "
                "cell measures the queue; set max-running-requests in the preset", "error")
        else:
            add("concurrency-above-max-running-requests",
                f"arm {arm}: concurrency {over} exceeds the {limit} request(s) this server runs at once; extra "
                "requests queue (TTFT includes the wait, throughput cannot rise)")
    for arm, info in arm_info.items():
        for w in info.stop_warnings:
            add("server-stop-escalated", f"arm {arm}: {w} (a harsher signal ended it; its log's tail says why)")


def _prompt_checks(matrix, records: dict[tuple, list[RequestRecord]], add: Callable[..., None]) -> None:
    """Every arm of a (domain, level) was sent the same prompts in the same order (pairing)."""
    by_cell = defaultdict(dict)
    for (arm, domain, conc), recs in records.items():
        sent = defaultdict(list)  # per (repeat, launch): the prompts in the order they were sent
        for r in sorted((r for r in recs if not r.warmup), key=lambda r: (r.repeat, r.launch, r.send_s)):
            sent[(r.repeat, r.launch)].append(r.prompt_id)
        by_cell[(domain, conc)][arm] = sent
    timed = matrix.duration_s is not None
    for (domain, conc), arms in sorted(by_cell.items()):
        arms = {arm: runs for arm, runs in arms.items() if runs}
        # cells sized by time: every arm sends the same prompts in the same order and stops when the time is up,
        # so a faster arm sends more; per repeat and launch the arms must agree on the first requests, as many as
        # the slowest arm sent (the pairs). Sized by requests: on all of them.
        sent = {k: min(len(runs.get(k, [])) for runs in arms.values()) if timed else None
                for runs in arms.values() for k in runs}
        seqs = {arm: sorted((k, p) for k, ids in runs.items() for p in ids[:sent[k]]) for arm, runs in arms.items()}
        if len({tuple(s) for s in seqs.values()}) > 1:
            add("arms-saw-different-prompts",
                f"{domain} at {f'rate {conc:g} req/s' if isinstance(conc, float) else f'concurrency {conc}'}: arms "
                "were sent different prompt sets; pairing is broken", "error")


def acceptance_checks(matrix, cells: list[CellSummary], arm_info: dict[str, ArmState]) -> list[Check]:
    """A speculative arm whose cells carry no acceptance length, and server counts that hold other requests
    than the cell's (toolkit/bench/acceptance.py)."""
    out = []
    for arm, info in arm_info.items():
        alg = info.speculative_algorithm
        missing = [c for c in cells if c.arm == arm and c.status == "ok" and "accept_length" not in c.metrics]
        if alg and missing:
            how = ("set `enable-metrics: true` in the preset (a cell-level figure from /metrics)" if matrix.api == "generate"
                   else "set `api: generate` in the Matrix (per request, from meta_info) or `enable-metrics: true` in "
                        "the preset (a cell-level figure from /metrics)")
            out.append(Check(check="acceptance-unavailable", severity="warning", message=(
                f"arm {arm} ({alg}): {len(missing)} cell(s) without an acceptance length: over api "
                f"{matrix.api} no verification steps reach the client and the server gave no counts for "
                f"the cell; {how}")))
    for c in cells:
        got = (c.accept_counts or {}).get("requests")
        ok = c.n_requests - c.n_errors
        if c.accept_source == "server-metrics" and got is not None and int(got) != ok:
            out.append(Check(check="acceptance-counts-mismatch", severity="warning", message=(
                f"{c.arm} {c.domain} {c.label}: the server counted {int(got)} finished requests over "
                f"the measured phase, the cell has {ok}: another client used the server meanwhile (or its "
                "counters lagged); the cell's acceptance length mixes them")))
    return out


def _cell_checks(cells: list[CellSummary], add) -> None:
    """Run-level lines for what the cells' own checks found: stalls, a busy host, cells too short."""
    for c in cells:
        for chk in c.checks:
            add({"stall": "cell-stalled", "busy-host": "busy-host"}.get(chk.check, chk.check),
                f"{c.arm} {c.domain} {c.label}: {chk.message}"
                + (" (no verdict uses this cell)" if chk.excludes else ""))
    short = [(c, short_why(c)) for c in cells if c.status == "ok" and short_why(c)]
    if short:
        add("cells-too-short",
            f"{len(short)} of {len(cells)} cells are shorter than {MIN_CELL_S:g} s or have fewer than "
            f"{MIN_REQUESTS_PER_SLOT} requests per concurrency slot (e.g. {short[0][0].arm} {short[0][0].domain} "
            f"{short[0][0].label}: {short[0][1]}): one stall can move such a cell's throughput many-fold; "
            "size cells by time per level (`duration_s: {LEVEL: SECONDS}`, docs/bench.md)")


def _work_checks(baseline: str | None, cells: list[CellSummary], add: Callable[..., None]) -> None:
    """Speed-ups whose two sides answered more than WORK_TOLERANCE apart in output tokens a request
    (toolkit/schema/eligibility.py `unequal-work`): left out of every verdict; one line for the run."""
    from toolkit.schema.eligibility import Eligibility
    from toolkit.schema.keys import level_label

    if not baseline:
        return
    elig = Eligibility(cells)
    levels = sorted({(c.arm, c.domain, c.level, c.concurrency, c.rate) for c in cells if c.arm != baseline},
                    key=lambda k: (k[0], k[1], k[2]))
    flagged = [(a, d, level_label(conc, rate), f) for a, d, lvl, conc, rate in levels
               if (f := elig.work_flag(a, baseline, d, lvl)) is not None]
    if flagged:
        a, d, label, f = flagged[0]
        add("unequal-work", f"{len(flagged)} speed-up(s) compare answers of different lengths and are left out of "
                            f"every verdict and of the surface (e.g. {a} {d} {label}: {f.why}); hold every arm to one "
                            "answer length with the Matrix's `ignore_eos: true` at the domain's own answer length "
                            "(docs/bench.md)")
