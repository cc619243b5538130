"""Paired speed-ups of arms over a baseline arm, per (domain, concurrency): one home for the runner
(toolkit/bench/derive.py re-exports these), tune, and `results import` of several result files.

- `throughput_ratio`: output tok/s of the arm / output tok/s of the baseline (the headline figure).
- `paired_ratio` with a 95% CI: both arms saw the same prompts in the same order, so the ratio of the
  arms' output rates over those prompts (sum of output tokens / sum of end-to-end seconds) is paired.
  The unit of replication is the server launch (toolkit/stats/launches.py): with two or more launch
  rounds, one paired ratio per round and a t-interval over the rounds with the cell's own variance
  (toolkit.stats.cell_noise: a pool over the arm's cells is calibrated only on average); with one round, the
  paired bootstrap over prompts widened by the launch noise of both servers.
- A `launches_auto` run (sequential rounds) reports Stein's two-stage interval instead (`round_interval` with
  `stage1`): the variance of the cell's first `stage1` rounds, which alone decided how many rounds ran, over
  the mean of every round. Its 95 % covers 95 % whatever the stop; the cell's own variance over the rounds a
  width rule stopped at does not (it stops when that variance came out low:
  docs/results.md#sequential-launches-launches_auto).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Callable, Iterable

import numpy as np

from toolkit.schema.manifest import Speedup
from toolkit.schema.metrics import cell_throughput
from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.stats import (BOOTSTRAP, DEFAULT, SHARED, PairedRatio, cell_noise, interval, paired_bootstrap_ratio,
                           rate, stein_interval, widen)


def paired_ratio(arm: list[RequestRecord], base: list[RequestRecord], seed: int = 0) -> PairedRatio:
    """Ratio of output rates over prompts both arms completed, with a paired-bootstrap 95% CI
    (toolkit.stats.paired_bootstrap_ratio)."""
    # pair by (repeat, prompt id, occurrence): the same prompt can be sent more than once in a cell
    a_keys = occurrence_keys(measured_ok(arm))
    b_keys = occurrence_keys(measured_ok(base))
    common = sorted(set(a_keys) & set(b_keys))
    n = len(common)
    if n < 2:
        return PairedRatio(None, None, None, n)
    ta = np.array([a_keys[k].output_tokens for k in common], float)
    ea = np.array([a_keys[k].e2e_ms for k in common], float)
    tb = np.array([b_keys[k].output_tokens for k in common], float)
    eb = np.array([b_keys[k].e2e_ms for k in common], float)
    point, lo, hi = paired_bootstrap_ratio(ta, ea, tb, eb, seed, BOOTSTRAP)
    return PairedRatio(point, lo, hi, n)


def measured_ok(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and not r.warmup and r.e2e_ms and r.output_tokens > 0]


def occurrence_keys(records: list[RequestRecord]) -> dict:  # data-keyed: request key
    """(launch, repeat, prompt id, occurrence) -> record: what pairs a request of one arm with the other's."""
    seen: dict = defaultdict(int)
    out = {}
    for r in records:
        k = (r.launch, r.repeat, r.prompt_id)
        out[(*k, seen[k])] = r
        seen[k] += 1
    return out


def _point(arm: list[RequestRecord], base: list[RequestRecord]) -> float | None:
    """The paired ratio of output rates over the prompts both arms completed (no interval)."""
    a, b = occurrence_keys(measured_ok(arm)), occurrence_keys(measured_ok(base))
    common = [k for k in a if k in b]
    if len(common) < 2:
        return None
    ra = rate(np.array([a[k].output_tokens for k in common], float), np.array([a[k].e2e_ms for k in common], float))
    rb = rate(np.array([b[k].output_tokens for k in common], float), np.array([b[k].e2e_ms for k in common], float))
    return ra / rb if rb and np.isfinite(ra / rb) else None


def _rounds(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:  # data-keyed: launch
    out: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        out[r.launch].append(r)
    return out


def round_ratios(arm: list[RequestRecord], base: list[RequestRecord]) -> dict[int, float]:  # data-keyed: launch
    """One cell's paired ratio per launch round both arms measured ({round: ratio}; a round with fewer than two
    pairs has none): what a t-interval over rounds (round_interval) is made of."""
    ra, rb = _rounds(arm), _rounds(base)
    return {k: x for k in sorted(set(ra) & set(rb)) if (x := _point(ra[k], rb[k])) is not None}


def common_pairs(arm: list[RequestRecord], base: list[RequestRecord]) -> int:
    """How many measured requests both arms completed on the same prompt occurrence: a paired ratio's n."""
    return len(set(occurrence_keys(measured_ok(arm))) & set(occurrence_keys(measured_ok(base))))


def launch_paired(arm: list[RequestRecord], base: list[RequestRecord], seed: int = 0,
                  noise: tuple | None = None) -> PairedRatio:
    """The paired ratio of one cell with a launch-aware CI, for a cell measured in one round: the paired
    bootstrap widened by the launch noise of both servers (`noise`: (arm's Noise, baseline's Noise), default:
    the default launch CV for each). Cells of two or more rounds: see speedups (the cell's own variance over
    its rounds)."""
    pr = paired_ratio(arm, base, seed)
    na, nb = noise or (DEFAULT, DEFAULT)
    if pr.ratio is None or pr.ci_low is None or pr.ci_low <= 0:
        return replace(pr, ci_method="paired bootstrap over the requests")
    lo, hi, method = widen(pr.ratio, pr.ci_low, pr.ci_high, na, nb)
    return replace(pr, ci_low=lo, ci_high=hi, ci_method=method)


STAGE1_MIN = 3  # Stein's first stage: fewer rounds leave the variance 1 df (t 12.7): no useful rule


def stage1_rounds(launches: int) -> int:
    """The rounds of a `launches_auto` run's first stage: `launches`, at least STAGE1_MIN."""
    return max(launches, STAGE1_MIN)


def round_interval(ratios: dict[int, float], stage1: int | None = None) -> tuple[float, float, float, str] | None:
    """A cell's paired ratios, one per round ({round: ratio}, two or more), as (centre, low, high, how): the
    geometric mean with a 95 % t-interval. The variance is the cell's own over every round (toolkit.stats.interval
    with cell_noise), or with `stage1` (a `launches_auto` run) Stein's two-stage interval (toolkit.stats.
    stein_interval: the variance of the first `stage1` rounds only, with their df; the stopping rule saw only that
    variance, so the rounds it ran say nothing about the mean's error)."""
    if stage1 is not None and len(ratios) >= stage1:
        got = stein_interval(ratios, stage1)
        if got is None:
            return None
        *out, own = got
        return (*out, f"Stein two-stage t-interval over {len(ratios)} rounds (paired per round; the variance of the "
                      f"first {stage1} rounds, which set the rounds run, df {own.df:.0f})")
    own = cell_noise(ratios)
    if own is None:
        return None
    out = interval(ratios, own)
    return (*out, f"t-interval over {len(ratios)} rounds (paired per round; the cell's own launch variance, "
                  f"df {own.df:.0f})") if out is not None else None


def speedups(cells: list[CellSummary], records: dict[tuple, list[RequestRecord]], baseline: str,
             seed: int = 0, noise: Callable[[str], object] | None = None,
             shared: set[str] = frozenset(), stage1: int | None = None) -> list[Speedup]:
    """One row per (arm != baseline, domain, concurrency). `records` is keyed by (arm, domain, conc).
    `noise(arm)`: the launch noise (toolkit.stats.Noise) of an arm's output rate, for cells of one
    round (a calibration's; default: the default launch CV). `shared`: arms served by the baseline's own
    server (one launch for both: the request bootstrap alone). `stage1`: a `launches_auto` run's first-stage
    rounds (round_interval)."""
    by = defaultdict(list)
    for c in cells:
        by[(c.arm, c.domain, c.level)].append(c)
    rows, per_round = [], defaultdict(dict)  # arm -> {(domain, conc): {round: ratio}}
    for (arm, domain, conc), arm_cells in sorted(by.items()):
        if arm == baseline or (baseline, domain, conc) not in by:
            continue
        ta, tb = cell_throughput(arm_cells), cell_throughput(by[(baseline, domain, conc)])
        ratios = round_ratios(records.get((arm, domain, conc), []), records.get((baseline, domain, conc), []))
        if len(ratios) >= 2:
            per_round[arm][(domain, conc)] = ratios
            pr = PairedRatio(None, None, None, rounds=len(ratios),
                             n_pairs=common_pairs(records[(arm, domain, conc)], records[(baseline, domain, conc)]))
        else:
            sides = (SHARED, SHARED) if arm in shared else (noise(arm), noise(baseline)) if noise is not None else None
            pr = launch_paired(records.get((arm, domain, conc), []), records.get((baseline, domain, conc), []), seed,
                               sides)
        rows.append(Speedup(  # rate and synthetic_acceptance only where set: summary.json keeps what was set
            arm=arm, baseline=baseline, domain=domain, concurrency=arm_cells[0].concurrency,
            **({"rate": conc} if arm_cells[0].rate is not None else {}),
            arm_tok_s=ta, baseline_tok_s=tb,
            throughput_ratio=(ta / tb) if ta and tb else None,
            paired_ratio=pr.ratio, ci_low=pr.ci_low, ci_high=pr.ci_high, n_pairs=pr.n_pairs,
            rounds=pr.rounds, ci_method=pr.ci_method or "",
            **({"synthetic_acceptance": arm_cells[0].synthetic_acceptance}
               if arm_cells[0].synthetic_acceptance is not None else {}),
        ))
    for row in rows:  # cells of two or more rounds: a t-interval over rounds, the cell's own variance
        ratios = per_round.get(row.arm, {}).get((row.domain, row.rate if row.rate is not None else row.concurrency))
        if ratios is None:
            continue
        got = round_interval(ratios, stage1)
        if got is not None:
            row.paired_ratio, row.ci_low, row.ci_high, row.ci_method = got
    return rows


def speedup_noise(run_dir, launches: int, shared: set[str] = frozenset()) -> tuple[Callable[[str], object] | None, dict]:
    """The launch noise the speed-ups of cells measured in one round are widened by: a calibration run of this
    GPU and environment under the run's results root (its arms' output tok/s noise), else the default launch
    CV (a calibration made on a busy host is refused, and the note says why). Returns (arm -> Noise, the note
    derived.noise records; `shared`: the arms on the baseline's server,
    which speedups() does not widen)."""
    from pathlib import Path

    from toolkit.results.archive import open_archive
    from toolkit.results.cells import CellReader
    from toolkit.stats import DEFAULT, DEFAULT_LAUNCH_CV
    from toolkit.results.noise import LaunchView, NoiseModel, find_calibration

    if launches > 1:
        return None, {"source": "runs", "launches": launches}
    if shared:
        note = {"shared_server": sorted(shared)}
    else:
        note = {}
    run = open_archive(run_dir)
    refused: list[str] = []  # a calibration made on a busy host is never used: the note says why
    cal = find_calibration(Path(run_dir).resolve().parent.parent, run, refused)
    if refused:
        note["calibration_refused"] = refused
    if cal is None:
        return (lambda arm: DEFAULT), {"source": "default", "launch_cv": DEFAULT_LAUNCH_CV, **note}
    view = LaunchView(CellReader(cal), source=f"calibration {cal.run_id}")
    model = NoiseModel(view, view, view)
    return (lambda arm: model.calibrated(arm, "output_tok_s") or DEFAULT), \
        {"source": "calibration", "calibration": cal.run_id, **note}


PAIR_SEP = "/"  # ARM/REF: an arm name never holds a slash (toolkit.specs.base.NAME_RE)


def parse_pairs(texts: list[str], arms: list[str], baseline: str | None) -> list[tuple[str, str]]:
    """`--pair ARM/REF` options as (arm, reference) pairs of the run's arms, each once; a mistake is a
    ToolkitError (exit 2) naming the arms the run has."""
    from toolkit.errors import ToolkitError, did_you_mean

    out: list[tuple[str, str]] = []
    for text in texts:
        arm, sep, ref = text.partition(PAIR_SEP)
        if not sep or not arm or not ref or PAIR_SEP in ref:
            raise ToolkitError(f"--pair {text!r}: write ARM/REF, two arms of the run, e.g. "
                               f"{(arms + ['ngram'])[-1]}/{baseline or arms[0]}", hint=f"the run's arms: {', '.join(arms)}")
        for name in (arm, ref):
            if name not in arms:
                raise ToolkitError(f"--pair {text!r}: the run has no arm {name!r}",
                                   hint=did_you_mean(name, arms) or f"the run's arms: {', '.join(arms)}")
        if arm == ref:
            raise ToolkitError(f"--pair {text!r}: an arm over itself is 1 by definition",
                               hint="name two different arms, ARM/REF")
        if (arm, ref) not in out:
            out.append((arm, ref))
    return out


def pair_speedups(a, arm: str, ref: str) -> list[Speedup]:
    """The paired speed-ups of `arm` over `ref` in one archived run (toolkit.results.archive.Archive), per
    (domain, level), made as the runner makes those over the baseline (speedups: one paired ratio per launch
    round and a t-interval over the rounds; one round: the bootstrap widened by the launch noise of both
    servers, speedup_noise; a launches_auto run: Stein's interval). Any two arms: an engine against another in
    the same role, or a speculative arm against its own engine's baseline. Unmarked (verdicts.verdicts marks)."""
    d = a.derived
    m = a.manifest
    cells = [c for c in a.cells if c.arm in (arm, ref)]
    records: dict[tuple, list[RequestRecord]] = defaultdict(list)  # data-keyed: cell
    for c in cells:
        records[(c.arm, c.domain, c.level)].extend(a.iter_records(c.key))
    on_base = set((d.noise or {}).get("shared_server") or [])  # arms served by the baseline's own server
    shared = {arm} if ({arm, ref} <= on_base | {d.baseline}) else set()
    noise, _ = speedup_noise(a.path, m.launches, shared)
    seed = int((m.matrix.resolved or {}).get("seed") or 0)
    return speedups(cells, records, ref, seed=seed, noise=noise, shared=shared,
                    stage1=stage1_rounds(m.launches) if d.launches_auto is not None else None)
