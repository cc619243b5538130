"""The search itself, on numbers only (no servers, no files): which trials, how many requests per rung,
how trials are scored and which survive. Deterministic: the same per-request records give the same
choices, which is what `--resume` and the tests rely on.

Successive halving over requests per cell: every trial runs every cell with `first` requests; the best
1/eta (by score) go on to the next rung, which adds requests so that each survivor's pooled total is
first x eta^k; and so on until one is left. A rung stops the search early when its ranking is already
sure (the leader's 95 % interval lies above every other trial's): the rest of the budget is not spent on
a question that is answered.

Score of a trial: the geometric mean over cells (domain x concurrency) of its paired speedup over the
baseline (toolkit.bench.derive.paired_ratio: both arms saw the same prompts; decode rates compared on
the pairs), pooled over the rungs it ran in. Its interval combines the cells' bootstrap intervals in log
space (toolkit.stats.combine: independent cells, the width of each 95 % interval taken as 2 z standard
errors), plus, where each trial has a server of its own (server flags), the launch noise of both sides once: a rung is one
launch per trial, and a request-level interval alone would call a relaunch a better setting (issue 24).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Iterable

from toolkit.bench.derive import PairedRatio, launch_paired, paired_ratio
from toolkit.results.speedups import common_pairs, round_interval, round_ratios
from toolkit.schema.records import RequestRecord
from toolkit.stats import cell_noise, combine, geomean, interval, of_interval


@dataclass(frozen=True)
class Score:
    geomean: float | None
    low: float | None
    high: float | None
    cells: int


def choose_trials(candidates: list[dict], budget: int, seed: int) -> list[dict]:
    """All candidates when the budget covers them; else a seeded sample of `budget`, kept in grid order."""
    if len(candidates) <= budget:
        return list(candidates)
    picked = sorted(random.Random(f"tune:{seed}").sample(range(len(candidates)), budget))
    return [candidates[i] for i in picked]


def schedule(n: int, eta: int) -> list[int]:
    """Trials per rung: n, ceil(n/eta), ... while more than one is left (the last rung picks the winner)."""
    sizes = [n]
    while sizes[-1] > eta:
        sizes.append(math.ceil(sizes[-1] / eta))
    return sizes


def rung_requests(first: int, eta: int, k: int) -> int:
    """Measured requests per cell that rung k adds, so that a survivor's pooled total is first x eta^k."""
    return first if k == 0 else first * eta ** (k - 1) * (eta - 1)


def _bracket(before: list[RequestRecord], after: list[RequestRecord]) -> list[RequestRecord]:
    """The baseline measured before and after the trials of a run, as one reference: per prompt occurrence the
    mean of the two end-to-end times (a drift linear in time cancels out at the trials' midpoint)."""
    from toolkit.bench.derive import measured_ok, occurrence_keys

    a, b = occurrence_keys(measured_ok(before)), occurrence_keys(measured_ok(after))
    return [r.model_copy(update={"e2e_ms": (r.e2e_ms + b[k].e2e_ms) / 2,
                                 "output_tokens": round((r.output_tokens + b[k].output_tokens) / 2)})
            for k, r in a.items() if k in b]


# data-keyed: cell
def pooled_cells(rungs: Iterable[dict[tuple, list[RequestRecord]]], trial: str, baseline: str,
                 again: str | None = None, seed: int = 0, noise=None) -> dict[tuple[str, int], PairedRatio]:
    """(domain, concurrency) -> paired ratio of `trial` over `baseline` with its 95 % CI and n, pooled over the
    rungs both ran in. Each rung's records are keyed (arm, domain, concurrency); a rung's pairs stay its own
    (the prompt ids of two rungs are not the same requests). With `again` (the baseline measured once more
    after the trials), the reference is the mean of both measurements (_bracket). `noise(arm)`: the arms ran
    on servers of their own, so the CI is widened by both launches' noise (toolkit.bench.derive.launch_paired,
    what the runner's one-round speed-ups use); None: one shared server, the request bootstrap alone."""
    arm, base = _pooled(rungs, trial, baseline, again)
    if noise is not None:
        return {cell: launch_paired(arm[cell], base.get(cell, []), seed, (noise(trial), noise(baseline)))
                for cell in sorted(arm)}
    return {cell: paired_ratio(arm[cell], base.get(cell, []), seed) for cell in sorted(arm)}


# data-keyed: cell
def round_cells(rungs: Iterable[dict[tuple, list[RequestRecord]]], trial: str, baseline: str,
                seed: int = 0) -> dict[tuple[str, int], PairedRatio]:
    """pooled_cells for a run of two or more launch rounds (the confirmation with `confirm_launches`): the launch
    is the unit, as in the runner's speed-ups (toolkit.results.speedups): one paired ratio per round and a
    t-interval over the rounds with the cell's own variance (round_interval). A cell with fewer than two rounds
    measured: the request bootstrap widened by the default launch CV of both servers."""
    arm, base = _pooled(rungs, trial, baseline)
    out = {}
    for cell in sorted(arm):
        a, b = arm[cell], base.get(cell, [])
        ratios = round_ratios(a, b)
        got = round_interval(ratios) if len(ratios) >= 2 else None
        if got is None:
            out[cell] = launch_paired(a, b, seed)
            continue
        out[cell] = PairedRatio(got[0], got[1], got[2], common_pairs(a, b), rounds=len(ratios), ci_method=got[3])
    return out


def round_score(rungs: Iterable[dict[tuple, list[RequestRecord]]], trial: str, baseline: str,
                usable: Iterable[tuple[str, int]]) -> Score | None:
    """The geometric mean over the `usable` cells of `trial` over `baseline`, the launch as the unit: per launch
    round, the geometric mean over the cells of that round's paired ratios (a launch moves all of its cells
    together, so the round's figure carries it once, with the round's request noise); the 95 % t-interval over
    the rounds with their own variance (toolkit.stats.interval, cell_noise: df rounds - 1). Only rounds every
    cell measured count. None when fewer than two such rounds."""
    arm, base = _pooled(rungs, trial, baseline)
    keep = set(usable)
    per = {cell: r for cell in sorted(arm) if cell in keep and (r := round_ratios(arm[cell], base.get(cell, [])))}
    rounds = sorted(set.intersection(*(set(r) for r in per.values()))) if per else []
    if len(rounds) < 2:
        return None
    figures = {k: geomean([r[k] for r in per.values()]) for k in rounds}
    got = interval(figures, cell_noise(figures))
    return None if got is None else Score(got[0], got[1], got[2], len(per))


def _pooled(rungs: Iterable[dict[tuple, list[RequestRecord]]], trial: str, baseline: str,
            again: str | None = None) -> tuple[dict, dict]:
    """(domain, concurrency) -> the trial's records and the baseline's, pooled over the rungs both ran in (see
    pooled_cells); a record keeps its launch round."""
    arm: dict[tuple, list[RequestRecord]] = {}
    base: dict[tuple, list[RequestRecord]] = {}
    for k, recs in enumerate(rungs):
        for (a, d, c), rs in recs.items():
            if a != trial or (baseline, d, c) not in recs:
                continue
            ref = recs[(baseline, d, c)]
            if again and (again, d, c) in recs:
                ref = _bracket(ref, recs[(again, d, c)])
            arm.setdefault((d, c), []).extend(r.model_copy(update={"repeat": k * 1000 + r.repeat}) for r in rs)
            base.setdefault((d, c), []).extend(r.model_copy(update={"repeat": k * 1000 + r.repeat}) for r in ref)
    return arm, base


def score(cells: dict[tuple[str, int], PairedRatio], launch_var: float = 0.0) -> Score:
    """The geometric mean over cells of the paired ratios, with its 95 % interval: toolkit.stats.combine of the
    cells (equal weights, each cell's se from its interval, toolkit.stats.of_interval; a cell without one adds
    none), `launch_var` shared by every cell. `launch_var`: the variance (log scale) the trial's and the
    baseline's launches add to the geometric mean when they ran on servers of their own. A launch moves every
    cell of it together, so it is added once, not divided among the cells as the requests' sampling noise is
    (docs/results.md, launch noise)."""
    parts = [(of_interval(r.ratio, r.ci_low, r.ci_high), 1) for r in cells.values() if r.ratio and r.ratio > 0]
    c = combine(parts, shared=(launch_var, math.inf))
    if c is None:
        return Score(None, None, None, 0)
    return Score(c.ratio, c.low, c.high, len(parts))


def launch_var(noise, trial: str, baseline: str, launches: int) -> float:
    """What the launches add to a trial's score: each side's launch variance of a mean over cells (Noise.arm_var,
    else var), over the launches pooled (one per rung the trial ran in). `noise` None: one shared server."""
    if noise is None or launches < 1:
        return 0.0
    per = [n.arm_var if n.arm_var is not None else n.var for n in (noise(trial), noise(baseline))]
    return sum(per) / launches


def ranking(scores: dict[str, Score]) -> list[str]:
    """Best first; ties and unscored trials (all cells failed) by name, unscored last."""
    return sorted(scores, key=lambda t: (scores[t].geomean is None, -(scores[t].geomean or 0.0), t))


def survivors(scores: dict[str, Score], keep: int) -> list[str]:
    return ranking(scores)[:keep]


def settled(scores: dict[str, Score]) -> bool:
    """Is the leader's interval above every other trial's? Then more requests would not change the answer."""
    order = [t for t in ranking(scores) if scores[t].geomean is not None]
    if len(order) < 2:
        return len(order) == 1
    lead = scores[order[0]]
    return lead.low is not None and all(scores[t].high is not None and lead.low > scores[t].high for t in order[1:])


def cell_winners(per_trial: dict[str, dict[tuple[str, int], PairedRatio]]) -> list[dict]:
    """Per (domain, concurrency): the trial with the highest paired speedup there, and whether speculation
    should be off (even that trial is significantly slower than the baseline: its CI lies below 1)."""
    cells = sorted({c for cs in per_trial.values() for c in cs})
    out = []
    for cell in cells:
        rows = [(t, cs[cell]) for t, cs in per_trial.items() if cell in cs and cs[cell].ratio]
        if not rows:
            continue
        trial, r = min(rows, key=lambda tr: (-tr[1].ratio, tr[0]))
        off = r.ci_high is not None and r.ci_high < 1
        out.append({"domain": cell[0], "concurrency": cell[1], "trial": trial, "speedup": r.ratio,
                    "ci_low": r.ci_low, "ci_high": r.ci_high, "n_pairs": r.n_pairs,
                    "speculation_off": off})
    return out
