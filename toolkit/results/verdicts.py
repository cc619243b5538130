"""The raw-throughput verdicts of a run: per speculative arm and domain the crossover (from which
concurrency the arm is significantly slower than the baseline), per arm the speculative-disable-batch-
threshold advice and whether the preset never pays off. Made once, here, from the speed-up rows
(toolkit/bench/derive.py) and the rule of what a verdict may use (toolkit/schema/eligibility.py): the
runner stores them in summary.json, and every reader (`results show`, `report`, `slo`, the heatmap's box,
tune) recomputes them the same way, so an archive written before the rule reads under it too.

The crossover is the lowest tested concurrency from which the arm is significantly slower than the
baseline (throughput ratio < 1 and the paired CI entirely below 1) at that level and every higher one,
over the levels a verdict may use. A dip that the CI does not support, or that recovers, is no crossover.
Levels left out are named in the note; with none left, there is no advice at all.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from toolkit.errors import ToolkitError
from toolkit.schema.eligibility import Eligibility, stall_check
from toolkit.schema.keys import level_label
from toolkit.results.records import records_exist
from toolkit.schema.manifest import ArmState, Crossover, Derived, Speedup
from toolkit.schema.records import CellSummary


def mark(rows: list[Speedup], elig: Eligibility) -> list[Speedup]:
    """Each speed-up row (a copy) with what leaves it out of verdicts (`excluded`) and what it must name
    (`qualified`), from the arm's and the baseline's cells at that level."""
    out = []
    for r in rows:
        r = r.model_copy()
        ex, qu = [], []
        for arm in (r.arm, r.baseline):
            if arm is None:
                continue
            ex += [f"{arm}: {f.text()}" for f in elig.excluded(arm, r.domain, level(r))]
            qu += [f"{arm}: {f.text()}" for f in elig.qualified(arm, r.domain, level(r))]
        work = elig.work_flag(r.arm, r.baseline, r.domain, level(r)) if r.baseline else None
        if work is not None:
            ex.append(f"{r.arm}: {work.text()}")
        r.excluded, r.qualified = ex, qu
        out.append(r)
    return out


def level(r: Speedup) -> float:
    """A speed-up row's load level: its rate (req/s) for open-loop cells, else its concurrency."""
    return r.rate if r.rate is not None else r.concurrency


def _label(r: Speedup) -> str:
    return level_label(r.concurrency, r.rate)


def _slower(r: Speedup) -> bool:
    return (r.throughput_ratio is not None and r.throughput_ratio < 1
            and r.ci_high is not None and r.ci_high < 1)


def _why(rs: list[Speedup], field: str) -> str:
    """`c=64 (ngram: capped (...))` for the rows carrying `field`, short codes only."""
    parts = []
    for r in rs:
        codes = sorted({x.split(": ", 1)[1].split(" (", 1)[0] for x in getattr(r, field)})
        if codes:
            parts.append(f"{_label(r)} {'/'.join(codes)}")
    return ", ".join(parts)


def crossovers(rows: list[Speedup], speculative: set[str] | None = None, cells: list | None = None,
               arm_info: dict[str, ArmState] | None = None) -> list[Crossover]:
    """Per (speculative arm, domain): the crossover over the levels a verdict may use (rows without
    `excluded`), the note naming the levels left out and the ones that qualify it. `cells` and `arm_info`:
    a rate crossover's threshold as the running batch the arm's server saw there (running_batch)."""
    by = defaultdict(list)
    for r in rows:
        if speculative is None or r.arm in speculative:
            by[(r.arm, r.domain)].append(r)
    out = []
    for (arm, domain), every in sorted(by.items()):
        every = sorted(every, key=level)
        if any(r.rate is not None for r in every):
            out.append(_rate_crossover(arm, domain, every, cells or [], arm_info or {}))
            continue
        rs = [r for r in every if not r.excluded and r.throughput_ratio is not None]
        left_out = [r for r in every if r.excluded]
        if not rs:
            out.append(Crossover(arm=arm, domain=domain, crossover_concurrency=None, never_pays_off=False,
                                 recommended_disable_batch_threshold=None, no_advice=True,
                                 excluded=[r.concurrency for r in left_out], qualified=[],
                                 note="no advice: no tested level is one a verdict may use"
                                      + (f" ({_why(left_out, 'excluded')})" if left_out else "")))
            continue
        cross = next((r.concurrency for i, r in enumerate(rs) if all(_slower(x) for x in rs[i:])), None)
        dips = [r.concurrency for r in rs if r.throughput_ratio < 1 and r.concurrency != cross
                and not (cross is not None and r.concurrency > cross)]
        never = cross is not None and cross == rs[0].concurrency
        if never:
            span = (f"at every tested concurrency ({rs[0].concurrency} to {rs[-1].concurrency})" if len(rs) > 1
                    else f"at concurrency {rs[0].concurrency}, the one level a verdict may use")
            note = f"significantly slower {span}: this preset never pays off in the tested range; serve the baseline"
        elif cross is not None:
            note = f"significantly slower from concurrency {cross} on: set speculative-disable-batch-threshold: {cross}"
        elif any(r.concurrency > rs[-1].concurrency for r in left_out):
            note = (f"not significantly slower through concurrency {rs[-1].concurrency}, the highest level a "
                    "verdict may use: no threshold needed up to there")
        else:
            note = f"not significantly slower through concurrency {rs[-1].concurrency}: no threshold needed"
        if dips:
            note += f" (ratio below 1 but not sustained or not significant at concurrency {dips})"
        if left_out:
            note += f"; left out: {_why(left_out, 'excluded')}"
        qualified = [r for r in rs if r.qualified]
        if qualified:
            note += f"; qualified: {_why(qualified, 'qualified')}"
        out.append(Crossover(arm=arm, domain=domain, crossover_concurrency=cross, never_pays_off=never,
                             recommended_disable_batch_threshold=None if never else cross, no_advice=False,
                             levels=[r.concurrency for r in rs], excluded=[r.concurrency for r in left_out],
                             qualified=[r.concurrency for r in qualified], note=note))
    return out


def running_batch(cells: list, arm_info: dict[str, ArmState], arm: str, domain: str,
                  rate: float) -> tuple[float, str] | None:
    """The running batch an arm's server saw at one open-loop level, and whence: the mean requests in flight
    over its measured cells there (CellSummary.effective_concurrency: the summed request times over the
    cell's span, Little's law, from the client's stamps), at most the server's max_running_requests (from
    /server_info where it reported one: requests beyond it wait in the server's queue, outside the batch).
    None without such a cell."""
    seen = [c.effective_concurrency for c in cells if c.arm == arm and c.domain == domain and c.rate == rate
            and c.status == "ok" and c.effective_concurrency]
    if not seen:
        return None
    mean = sum(seen) / len(seen)
    info = arm_info.get(arm)
    cap = info.max_running_requests if info is not None else None
    if cap and mean > cap:
        return float(cap), f"the server's max_running_requests ({cap}): {mean:.1f} requests were in flight on average"
    under = f", under the server's cap of {cap}" if cap else ""
    return mean, f"mean requests in flight over {len(seen)} cell(s){under}"


def _rate_crossover(arm: str, domain: str, every: list[Speedup], cells: list,
                    arm_info: dict[str, ArmState]) -> Crossover:
    """The crossover of open-loop levels (`rates:`): the lowest rate from which the arm is significantly slower
    at that rate and every higher one. The disable-batch threshold is a batch size, not a rate: it is the
    running batch the arm's server saw at the crossover rate (running_batch), rounded down (disabling a little
    early, as the lowest crossover over domains does); none where the cells do not say it."""
    rs = [r for r in every if not r.excluded and r.throughput_ratio is not None]
    left_out = [r for r in every if r.excluded]
    base = Crossover(arm=arm, domain=domain, crossover_concurrency=None, recommended_disable_batch_threshold=None,
                     excluded=[level(r) for r in left_out], axis="rate")
    if not rs:
        return base.model_copy(update={
            "never_pays_off": False, "no_advice": True, "qualified": [],
            "note": "no advice: no tested rate is one a verdict may use"
                    + (f" ({_why(left_out, 'excluded')})" if left_out else "")})
    cross = next((r for i, r in enumerate(rs) if all(_slower(x) for x in rs[i:])), None)
    never = cross is rs[0]
    batch = running_batch(cells, arm_info, arm, domain, level(cross)) if cross is not None and not never else None
    threshold = max(1, int(batch[0])) if batch is not None else None
    if never:
        note = (f"significantly slower at every tested rate ({_label(rs[0])} to {_label(rs[-1])}): this preset "
                "never pays off in the tested range; serve the baseline")
    elif cross is not None and batch is not None:
        note = (f"significantly slower from {_label(cross)} on, where {arm}'s server ran {batch[0]:.1f} requests at "
                f"once ({batch[1]}): set speculative-disable-batch-threshold: {threshold}")
    elif cross is not None:
        note = (f"significantly slower from {_label(cross)} on (a rate: the threshold to set is the running batch "
                "size the server reaches there, which no cell recorded)")
    else:
        note = f"not significantly slower through {_label(rs[-1])}: no threshold needed"
    if left_out:
        note += f"; left out: {_why(left_out, 'excluded')}"
    qualified = [r for r in rs if r.qualified]
    if qualified:
        note += f"; qualified: {_why(qualified, 'qualified')}"
    if threshold is not None:
        base = base.model_copy(update={"recommended_disable_batch_threshold": threshold,
                                       "running_batch": round(batch[0], 2), "running_batch_source": batch[1]})
    return base.model_copy(update={
        "crossover_rate": level(cross) if cross is not None else None, "never_pays_off": never, "no_advice": False,
        "levels": [level(r) for r in rs], "qualified": [level(r) for r in qualified], "note": note})


def _level_text(cross: Any, x: float) -> str:
    """A level of a crossover row: `c=16`, or `r=2/s` for an open-loop (rate) crossover."""
    return level_label(int(x), x if _get(cross, "axis") == "rate" else None)


def _get(x: Any, key: str, default: Any = None) -> Any:
    return x.get(key, default) if isinstance(x, dict) else getattr(x, key, default)


def _advised(cross: list, arm: str) -> list:
    return [c for c in cross if _get(c, "arm") == arm and not _get(c, "no_advice", False)]


def never_pays_off(cross: list, arm: str) -> bool:
    """Slower than the baseline at every tested concurrency in every domain with advice: no threshold
    rescues it."""
    rows = _advised(cross, arm)
    return bool(rows) and all(_get(c, "never_pays_off") for c in rows)


def recommended_threshold(cross: list, arm: str) -> int | None:
    """One threshold per arm: the lowest crossover over its domains (the conservative choice). None when
    the arm never crosses, never pays off at all (a threshold at the lowest level is no advice), or has
    no level a verdict may use."""
    if never_pays_off(cross, arm):
        return None
    vals = [_get(c, "recommended_disable_batch_threshold") for c in _advised(cross, arm)
            if not _get(c, "never_pays_off") and _get(c, "recommended_disable_batch_threshold") is not None]
    return min(vals) if vals else None


def advice_text(cross: list, arm: str) -> str:
    """The one line of advice per speculative arm, as every renderer prints it. Never `no threshold
    needed` beside a domain where the arm never pays off."""
    rows = [c for c in cross if _get(c, "arm") == arm]
    advised = _advised(cross, arm)
    none = sorted(_get(c, "domain") for c in rows if _get(c, "no_advice", False))
    tail = f"; no advice for {', '.join(none)} (no level a verdict may use)" if none and advised else ""
    if not advised:
        return "no advice: no tested level is one a verdict may use"
    if never_pays_off(cross, arm):
        return ("never pays off in the tested range (slower than the baseline at every concurrency): serve the "
                "baseline" + tail)
    t = recommended_threshold(cross, arm)
    never = sorted(_get(c, "domain") for c in advised if _get(c, "never_pays_off"))
    if never:
        rest = sorted(_get(c, "domain") for c in advised if not _get(c, "never_pays_off"))
        return (f"never pays off in {', '.join(never)}: serve the baseline there; in {', '.join(rest)}: "
                + (f"set speculative-disable-batch-threshold: {t}" if t is not None
                   else "not significantly slower at any tested concurrency") + tail)
    if t is not None:
        return f"set speculative-disable-batch-threshold: {t}" + tail
    open_top = [f"{_get(c, 'domain')} above {_level_text(c, max(_get(c, 'levels')))}" for c in advised if _get(c, "levels")
                and any(x > max(_get(c, "levels")) for x in _get(c, "excluded") or [])]
    if open_top:
        return f"no threshold needed through the levels a verdict may use (not judged: {', '.join(open_top)})" + tail
    return "no threshold needed in the tested range" + tail


class Verdicts(NamedTuple):
    """The verdict fields of the derived block (Derived's own names: `Derived(**v._asdict())`)."""

    speedups: list[Speedup]
    crossovers: list[Crossover]
    recommended_disable_batch_threshold: dict[str, int | None]
    never_pays_off: list[str]


def verdicts(rows: list[Speedup], cells: list, arm_info: dict[str, ArmState], speculative: set[str]) -> Verdicts:
    """The verdict fields of the derived block: speed-up rows marked, crossovers, threshold and
    never-pays-off per speculative arm. The runner and every reader call this, on the same inputs."""
    marked = mark(rows, Eligibility(cells, arm_info))  # the runner's cells carry their checks
    cross = crossovers(marked, speculative, cells, arm_info)
    arms = sorted(speculative)
    return Verdicts(marked, cross,  # the fields each set, as summary.json holds
                    {a: recommended_threshold(cross, a) for a in arms}, [a for a in arms if never_pays_off(cross, a)])


def current(a, derived: Derived | None = None) -> Derived:
    """An archive's derived block (or `derived`, standing in for it while the runner finalizes) with its
    verdicts made again under the current rule, from its own speed-up rows and server facts and the run's
    judged cells: what every reader prints. Imports have no speed-ups."""
    derived = a.derived if derived is None else derived
    cells = judged_cells(a)
    if not derived.speedups:
        return derived
    spec = set(derived.speculative_arms) or {c.arm for c in derived.crossovers}
    return derived.model_copy(update=verdicts(derived.speedups, cells, derived.arm_info, spec)._asdict())


def judged_cells(a) -> list[CellSummary]:
    """An archive's cells (toolkit.results.archive.Archive) as the rule judges them: a cell written before
    the stall check existed gets it here, from its records (once per archive; nothing is written)."""
    hit = a.__dict__.get("_judged_cells")
    if hit is not None:
        return hit
    out = []
    for key, c in a.cell_map.items():
        if c.status == "ok" and "stall" not in c.checked and records_exist(a.path / "cells", key):
            try:
                chk = stall_check(list(a.iter_records(key)))
            except ToolkitError:  # unreadable records: `results verify` names them; no stall is claimed
                chk = None
            if chk is not None:
                chk.message += " (found on reading: the run predates the check)"
                c = c.model_copy(update={"checks": [*c.checks, chk]})
        out.append(c)
    a.__dict__["_judged_cells"] = out
    return out
