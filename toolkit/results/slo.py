"""A run against service-level objectives (toolkit/schema/slo.py says what one cell's figures are):
per cell goodput, attainment and whether the objectives hold; per arm and domain the capacity; per
speculative arm the speculative-disable-batch-threshold advice by raw throughput and within the
objectives. Everything is computed from the per-request columns of the archive, which is only read:
the runner stores the result in summary.json (derived.slo), and `toolkit results slo RUN --slo ...`
recomputes it for any other objectives without touching the archive.

Capacity (per arm, domain): the highest tested concurrency (or, for a Matrix with `rates:`, the highest
tested rate in req/s: DistServe's goodput capacity) at which the objectives hold *and hold at
every lower tested level*; the next level up is the first failure, named with what failed. Levels
above it that hold again are listed, not counted: a service that meets its targets at 16 but not at 4
cannot be run at 16 without passing through 4. Holding is judged on point estimates, so tightening
an objective can only lower a capacity and loosening it only raise it.

Within the objectives, at each level a speculative arm is compared with the baseline:
    both hold        the raw rule decides: the baseline if the arm is significantly slower (throughput
                     ratio < 1 and the paired 95% CI below 1), else speculation
    only one holds   that one (speculation may lose throughput and still be the only arm on target)
    neither holds    neither (no threshold choice serves that level within the objectives)
The crossover within the objectives is the first level, after the last level where speculation is the
choice, where the baseline is; the threshold per arm is the lowest crossover over its domains, like the
raw advice (toolkit/results/verdicts.py).

What a verdict may use (toolkit/schema/eligibility.py) holds here too: a cell that failed, queued behind
the server's cap, had too few requests or stalled is judged (its figures are shown) but never counted.
Capacity stops below the first such level (`not judged`, with why: a capped arm gets no "test higher
levels"); the advice leaves such levels out (choice `excluded`), and with no level left gives none.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import defaultdict

from toolkit.errors import ToolkitError
from toolkit.results.archive import Archive
from toolkit.results.cells import CellReader
from toolkit.schema.eligibility import Eligibility
from toolkit.schema.keys import level_label
from toolkit.schema.manifest import Derived, Manifest
from toolkit.schema.slo import (BOUNDS, OBJECTIVE_SAMPLES, Capacity, CellSlo, LevelChoice, Objectives, SloAdvice,
                                SloAnalysis)


def objectives_for(manifest: Manifest, derived: Derived | None) -> Objectives | None:
    """A run's own objectives: the ones its analysis used (derived.slo), else its Matrix's slo block."""
    if derived is not None and derived.slo is not None:
        return derived.slo.objectives
    return Objectives.from_block(manifest.matrix.resolved.get("slo"))


def analyse(a: Archive, objectives: Objectives, derived: Derived | None = None) -> SloAnalysis:
    """The run against the objectives. `derived` stands in for summary.json while the runner finalizes
    (its speedups, crossovers and speculative arms feed the advice)."""
    from toolkit.results.verdicts import current, judged_cells

    derived = current(a, derived)
    reader = CellReader(a, objectives)
    elig = Eligibility(judged_cells(a), derived.arm_info)
    cells = [reader.slo(keys) for _, keys in sorted(reader.groups().items())]
    for c in cells:  # assigned only where flagged: summary.json keeps the fields that were set
        ex, qu = elig.excluded(c.arm, c.domain, c.level), elig.qualified(c.arm, c.domain, c.level)
        # a flag that leaves out some metrics (bundled: TTFT/ITL/TPOT) leaves the cell out of objectives on them
        judged = {o.metric for o in objectives.items} | {o.sample for o in objectives.items}
        ex += [f for f in qu if judged & set(f.metrics)]
        qu = [f for f in qu if f not in ex]
        if ex:
            c.excluded = [f.text() for f in ex]
        if qu:
            c.qualified = [f.text() for f in qu]
    launch_certainty(reader, cells)
    baseline = derived.baseline or a.manifest.baseline or a.manifest.matrix.resolved.get("baseline")
    # the advice is a disable-batch threshold, a concurrency: open-loop (rate) levels give none
    advice = advise(cells, derived, baseline) if baseline and all(c.rate is None for c in cells) else []
    arms = sorted({x.arm for x in advice})
    rated = {"axis": "rate"} if any(c.rate is not None for c in cells) else {}
    return SloAnalysis(objectives=objectives, baseline=baseline, cells=cells, capacity=capacities(cells), **rated,
                       advice=advice, recommended_disable_batch_threshold={arm: threshold(advice, arm) for arm in arms},
                       never_pays_off=[arm for arm in arms if never_pays_off(advice, arm)])


def launch_certainty(reader: CellReader, cells: list[CellSlo]) -> None:
    """Cells measured in two or more server launches: each percentile objective's and the attainment's 95% CI
    becomes the t-interval of the per-launch figures (toolkit/stats/: the cell's own launch
    variance, `cell_noise`), so `certain` (~ when not) says whether a relaunch could move the verdict. A
    single-launch cell keeps the request-level interval. The verdicts themselves stay on point estimates."""
    from toolkit.stats import cell_noise, interval

    groups = reader.groups()
    per: dict[tuple, dict[int, CellSlo]] = {}
    for c in cells:
        keys = groups.get((c.arm, c.domain, c.level, c.output_len), [])
        launches = reader.by_launch(keys)
        if len(launches) >= 2:
            per[(c.arm, c.domain, c.level, c.output_len)] = {la: reader.slo(ks) for la, ks in launches.items()}
    if not per:
        return
    names = [r.objective for c in cells for r in c.objectives]

    def figures(g: tuple, name: str) -> dict[int, float]:  # data-keyed: launch
        if name == "attainment":
            return {la: max(x.attainment, 0.5 / x.n) for la, x in per[g].items() if x.attainment is not None and x.n}
        return {la: r.value for la, x in per[g].items() for r in x.objectives if r.objective == name and r.value}

    for c in cells:
        g = (c.arm, c.domain, c.level, c.output_len)
        if g not in per:
            continue
        sure = True
        for r in c.objectives + [None]:
            name = r.objective if r is not None else "attainment"
            if r is not None and name not in names:
                continue
            noise = cell_noise(figures(g, name))
            iv = interval(figures(g, name), noise) if noise is not None else None
            if iv is None:
                sure = False
                continue
            _, lo, hi = iv
            if r is None:
                c.attainment_low, c.attainment_high = lo, min(hi, 1.0)
                target = reader.objectives.attainment
                sure &= lo >= target if (c.attainment or 0) >= target else hi < target
            else:
                r.ci_low, r.ci_high = lo, hi
                if r.holds is not None:
                    r.certain = hi <= r.limit if r.holds else lo > r.limit
                    sure &= r.certain
        c.certain = sure


def _levels(xs: list, rated: bool = False) -> str:
    return ", ".join(_lab(x, rated) for x in xs)


def _lab(level: float, rated: bool) -> str:
    """A level as notes write it: `c=16`, or `r=2/s` for an open-loop (rate) level."""
    return level_label(int(level), level if rated else None)


def _codes(c: CellSlo, field: str = "excluded") -> str:
    return "/".join(x.split(" (", 1)[0] for x in getattr(c, field))


def capacities(cells: list[CellSlo]) -> list[Capacity]:
    by: dict[tuple, list[CellSlo]] = defaultdict(list)
    for c in cells:
        by[(c.arm, c.domain, c.output_len)].append(c)
    out = []
    for (arm, domain, out_len), cs in sorted(by.items()):
        cs = sorted(cs, key=lambda c: c.level)
        levels = [c.level for c in cs]
        rated = cs[0].rate is not None
        what = "rate" if rated else "concurrency"

        def lab(x: float) -> str:
            return _lab(x, rated)

        cap = Capacity(arm=arm, domain=domain, output_len=out_len, levels=levels, **({"axis": "rate"} if rated else {}),
                       holding=[c.level for c in cs if c.holds and not c.excluded])
        unjudged = [c for c in cs if c.excluded]
        if unjudged:
            cap.not_judged = [c.level for c in unjudged]
        stop = next((c for c in cs if c.excluded or not c.holds), None)
        below = [c for c in cs if stop is None or c.level < stop.level]
        if below:
            cap.capacity, cap.goodput_tok_s = below[-1].level, below[-1].goodput_tok_s
            named = [c.level for c in below if c.qualified]
            if named:
                cap.qualified = named
        if stop is None:
            show = lab if rated else str  # closed loop: the words every older report has
            cap.note = (f"holds at every tested {what} ({show(levels[0])} to {show(levels[-1])}): the capacity is at "
                        f"least {show(levels[-1])}; test higher levels to find the limit")
        elif stop.excluded:
            why = f"{lab(stop.level)} is not judged ({'; '.join(stop.excluded)})"
            cap.note = (f"holds up to {lab(cap.capacity)}; {why}" if below else
                        f"no capacity: {why}" if len(unjudged) < len(cs) else
                        "no capacity: no tested level is one a verdict may use ("
                        + "; ".join(f"{lab(c.level)} {_codes(c)}" for c in unjudged) + ")")
        else:
            cap.first_failure, cap.first_failure_why = stop.level, stop.why
            cap.note = (f"holds up to {lab(cap.capacity)}; fails at {lab(stop.level)} ({stop.why})" if below else
                        f"fails already at the lowest tested {what} {lab(stop.level)} ({stop.why})")
        if stop is not None:
            cap.holds_again = [c.level for c in cs if c.level > stop.level and c.holds
                               and not c.excluded]
            if cap.holds_again:
                cap.note += (f"; holds again at {_levels(cap.holds_again, rated)} (not counted: "
                             + ("the level below fails)" if not stop.excluded else f"{lab(stop.level)} is not judged)"))
        later = [c for c in unjudged if stop is not None and c.level > stop.level
                 and len(unjudged) < len(cs)]  # all unjudged: the note above lists every level already
        if later:
            cap.note += "; not judged: " + ", ".join(f"{lab(c.level)} ({_codes(c)})" for c in later)
        if cap.qualified:
            cap.note += "; qualified: " + ", ".join(f"{lab(c.level)} ({_codes(c, 'qualified')})"
                                                    for c in below if c.qualified)
        out.append(cap)
    return out


def _choice(a: CellSlo, b: CellSlo, ratio: float | None, ci_high: float | None) -> str:
    if a.holds and b.holds:
        slower = ratio is not None and ratio < 1 and ci_high is not None and ci_high < 1
        return "baseline" if slower else "speculative"
    return "speculative" if a.holds else "baseline" if b.holds else "neither"


def advise(cells: list[CellSlo], derived: Derived, baseline: str) -> list[SloAdvice]:
    """Per (speculative arm, domain): the choice at each level within the objectives, and the crossover."""
    at = {(c.arm, c.domain, c.output_len, c.concurrency): c for c in cells}
    speed = {(s.arm, s.domain, s.concurrency): s for s in derived.speedups}
    raw = {(x.arm, x.domain): x for x in derived.crossovers}
    out = []
    for arm in sorted(set(derived.speculative_arms) - {baseline}):
        for domain, out_len in sorted({(c.domain, c.output_len) for c in cells if c.arm == arm}):
            levels = sorted(k[3] for k in at
                            if k[:3] == (arm, domain, out_len) and (baseline, domain, out_len, k[3]) in at)
            if not levels:
                continue
            adv, choices = SloAdvice(arm=arm, domain=domain, baseline=baseline), []
            for level in levels:
                a, b = at[(arm, domain, out_len, level)], at[(baseline, domain, out_len, level)]
                sp = speed.get((arm, domain, level))
                ratio, hi = (sp.throughput_ratio, sp.ci_high) if sp else (None, None)
                good = (a.goodput_tok_s / b.goodput_tok_s) if a.goodput_tok_s is not None and b.goodput_tok_s else None
                out_of_rule = a.excluded or b.excluded or (sp is not None and sp.excluded)
                choices.append(LevelChoice(concurrency=level, arm_holds=a.holds, baseline_holds=b.holds,
                                           throughput_ratio=ratio, ci_high=hi, goodput_ratio=good,
                                           choice="excluded" if out_of_rule else _choice(a, b, ratio, hi)))
            adv.levels = choices  # assigned: summary.json keeps the fields that were set
            if (arm, domain) in raw:
                adv.raw_crossover_concurrency = raw[(arm, domain)].crossover_concurrency
                adv.raw_note = raw[(arm, domain)].note
            _conclude(adv)
            out.append(adv)
    return out


def _conclude(adv: SloAdvice) -> None:
    levels = [x for x in adv.levels if x.choice != "excluded"]
    left_out = [x.concurrency for x in adv.levels if x.choice == "excluded"]
    if not levels:
        adv.no_advice = True
        adv.note = f"no advice within the objectives: no tested level is one a verdict may use ({_levels(left_out)})"
        return
    choices = [x.choice for x in levels]
    spec = [x.concurrency for x in levels if x.choice == "speculative"]
    base = [x.concurrency for x in levels if x.choice == "baseline"]
    after = [x.concurrency for x in levels if x.choice == "baseline" and (not spec or x.concurrency > spec[-1])]
    adv.crossover_concurrency = after[0] if after else None
    only_spec = [x.concurrency for x in levels if x.arm_holds and not x.baseline_holds]
    if "speculative" not in choices and base:
        adv.never_pays_off = True
        adv.note = (f"within the objectives the baseline is the choice wherever an arm meets them ({_levels(base)}): "
                    "this preset never pays off in the tested range; serve the baseline")
    elif adv.crossover_concurrency is not None:
        adv.note = (f"within the objectives speculation is the choice through c={spec[-1]}, the baseline from "
                    f"c={adv.crossover_concurrency}: set speculative-disable-batch-threshold: "
                    f"{adv.crossover_concurrency}")
    elif spec:
        neither = [x.concurrency for x in levels if x.concurrency > spec[-1]]
        above = [c for c in left_out if c > levels[-1].concurrency]
        adv.note = (f"within the objectives speculation is the choice through c={spec[-1]}: no threshold needed"
                    + (" up to the highest level a verdict may use" if above else "")
                    + (f" (neither arm meets them at {_levels(neither)})" if neither else ""))
    else:
        adv.note = "neither arm meets the objectives at any tested concurrency: no advice within them"
    if only_spec:
        adv.note += f"; only {adv.arm} meets them at {_levels(only_spec)}"
    if base and spec and base[0] < spec[-1]:
        adv.note += f" (the baseline is the choice at {_levels([c for c in base if c < spec[-1]])}, below a level " \
                    "where speculation is: a threshold cannot switch speculation back on)"
    if left_out:
        adv.note += f"; left out (no verdict may use them): {_levels(left_out)}"


def never_pays_off(advice: list[SloAdvice], arm: str) -> bool:
    rows = [x for x in advice if x.arm == arm and not x.no_advice]
    return bool(rows) and all(x.never_pays_off for x in rows)


def threshold(advice: list[SloAdvice], arm: str) -> int | None:
    """The lowest crossover within the objectives over the arm's domains (as verdicts.recommended_threshold)."""
    if never_pays_off(advice, arm):
        return None
    vals = [x.crossover_concurrency for x in advice if x.arm == arm and not x.never_pays_off and not x.no_advice
            and x.crossover_concurrency is not None]
    return min(vals) if vals else None


def threshold_text(an: SloAnalysis, arm: str) -> str:
    """Never `no threshold needed` beside a domain where the arm never pays off (as verdicts.advice_text)."""
    rows = [x for x in an.advice if x.arm == arm]
    advised = [x for x in rows if not x.no_advice]
    none = sorted(x.domain for x in rows if x.no_advice)
    tail = f"; no advice for {', '.join(none)} (no level a verdict may use)" if none and advised else ""
    if rows and not advised:
        return "no advice within the objectives: no tested level is one a verdict may use"
    if arm in an.never_pays_off:
        return "never pays off within the objectives in the tested range: serve the baseline" + tail
    t = an.recommended_disable_batch_threshold.get(arm)
    never = sorted(x.domain for x in advised if x.never_pays_off)
    if never:
        rest = sorted(x.domain for x in advised if not x.never_pays_off)
        return (f"never pays off within the objectives in {', '.join(never)}: serve the baseline there; in "
                f"{', '.join(rest)}: " + (f"set speculative-disable-batch-threshold: {t}" if t is not None
                                          else "speculation is the choice wherever an arm meets them") + tail)
    if t is None:
        top = [f"{x.domain} above c={max(y.concurrency for y in x.levels if y.choice != 'excluded')}"
               for x in advised if any(y.choice == "excluded" and y.concurrency > max(
                   z.concurrency for z in x.levels if z.choice != "excluded") for y in x.levels)]
        return ("no threshold needed within the objectives" + (f" through the levels a verdict may use (not judged: "
                                                                 f"{', '.join(top)})" if top else "") + tail)
    return f"set speculative-disable-batch-threshold: {t}" + tail


# -- `--slo METRIC.BOUND=MS`

SLO_FORMAT = "METRIC.BOUND=MS, e.g. tpot_ms.p90=30 or ttft_ms.per_request=200"


def parse_slo(specs: list[str], attainment: float | None = None, base: Objectives | None = None) -> Objectives:
    """`--slo` options (and `--attainment`) -> Objectives. With no --slo, the base objectives (the run's
    own) with the new attainment."""
    from pydantic import ValidationError

    from toolkit.specs.matrix import Slo

    if attainment is not None and not (math.isfinite(attainment) and 0 < attainment <= 1):
        raise ToolkitError(f"--attainment {attainment:g}: must be a share above 0 and at most 1",
                           hint="e.g. --attainment 0.9: 90 % of a cell's requests meet every per-request objective")
    if not specs:
        if base is None:
            raise ToolkitError("this run has no service-level objectives (its Matrix has no slo block)",
                               hint=f"give some: --slo {SLO_FORMAT.split(', e.g. ')[1]}")
        return base.model_copy(update={"attainment": attainment}) if attainment is not None else base
    block: dict = {}
    for s in specs:
        m = re.fullmatch(r"\s*([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)\s*=\s*([^\s=]+)\s*", s)
        if not m:
            raise ToolkitError(f"--slo {s!r}: expected {SLO_FORMAT}", hint="e.g. --slo tpot_ms.p90=30 --slo ttft_ms.p99=500")
        metric, bound, value = m.groups()
        if metric not in OBJECTIVE_SAMPLES:
            close = difflib.get_close_matches(metric.lower(), list(OBJECTIVE_SAMPLES), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(OBJECTIVE_SAMPLES)}"
            if metric == "itl_req_mean_ms":
                hint = "write itl_ms: ITL objectives are judged on each request's mean ITL (itl_req_mean_ms)"
            hint = Slo.KEY_HINTS.get(metric, hint)  # a name other tools use: spelling alone would mislead
            raise ToolkitError(f"--slo {s!r}: {metric!r} is not a metric objectives can bound", hint=hint)
        if bound not in BOUNDS:
            close = difflib.get_close_matches(bound.lower(), list(BOUNDS), n=1, cutoff=0.5)
            raise ToolkitError(f"--slo {s!r}: {bound!r} is not a bound",
                               hint=f"did you mean {close[0]!r}?" if close else f"one of {', '.join(BOUNDS)}")
        try:
            limit = float(value)
        except ValueError:
            raise ToolkitError(f"--slo {s!r}: {value!r} is not a number of milliseconds",
                               hint="limits are milliseconds > 0, e.g. tpot_ms.p90=30") from None
        if not math.isfinite(limit):
            raise ToolkitError(f"--slo {s!r}: {value!r} is not a finite number of milliseconds",
                               hint="limits are milliseconds > 0, e.g. tpot_ms.p90=30")
        if limit <= 0:
            raise ToolkitError(f"--slo {s!r}: {value} is out of range: a limit must be greater than 0 (milliseconds)",
                               hint="limits are milliseconds > 0, e.g. tpot_ms.p90=30")
        if bound in block.get(metric, {}):
            raise ToolkitError(f"--slo {s!r}: {metric}.{bound} is given twice",
                               hint=f"give --slo {metric}.{bound}=MS once")
        block.setdefault(metric, {})[bound] = limit
    if attainment is not None:
        block["attainment"] = attainment
    try:
        slo = Slo.model_validate(block)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"])
        raise ToolkitError(f"--slo: {where}: {e['msg'].removeprefix('Value error, ')}",
                           hint="limits are milliseconds > 0; --attainment is a share in (0, 1]") from None
    return slo.objectives()
