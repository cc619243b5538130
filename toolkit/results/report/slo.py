"""The service-level objectives section of a run report (`results show`, report.md, the runner's
summary) and the report of `results slo`: per cell goodput, attainment and each objective with its
95% CI; capacity per arm and domain; the speculative advice by raw throughput and within the
objectives. toolkit/schema/slo.py and toolkit/results/slo.py define every figure."""

from __future__ import annotations

from toolkit.results.report.model import Block, Heading, Items, Para, Report, Table, fmt_centre, fmt_num, fmt_share
from toolkit.results.slo import threshold_text
from toolkit.schema.keys import level_label, rate_text
from toolkit.schema.slo import CellSlo, SloAnalysis

SLO_NOTE = ("met: successful requests that met every per-request objective; attainment: met / measured requests "
            "(failed ones included), 95% Wilson interval; goodput: the cell's req/s and tok/s counting only the "
            "requests that met them. Percentile objectives: the cell's percentile over its requests [95% CI] "
            "(itl_ms objectives read each request's mean ITL). holds: every percentile objective holds and attainment "
            "reaches its target; ~ marks a verdict whose 95% CI crosses a limit; `not judged`: a cell no verdict may use "
            "(capacity and advice leave it out). docs/slo.md defines each.")


def _holds(c: CellSlo) -> str:
    if c.status != "ok":
        return c.status.upper()
    mark = ", not judged: " + "/".join(x.split(" (", 1)[0] for x in c.excluded) if c.excluded else ""
    return ("yes" if c.holds else "no") + ("" if c.certain else " ~") + mark


def _lab(an: SloAnalysis, level: float) -> str:
    """`c=16`, or `r=2/s` when the run's levels are rates (open loop: the capacity is in req/s)."""
    return level_label(int(level), level if an.axis == "rate" else None)


def cells_table(an: SloAnalysis) -> Table:
    pct = [o.name for o in an.objectives.percentiles]
    cols = ["arm", "domain", "req/s" if an.axis == "rate" else "c", "n", "met", "attainment [95% CI]", "goodput req/s", "goodput tok/s", "tok/s"]
    cols += [f"{name} [95% CI]" for name in pct] + ["holds"]
    rows = []
    for c in sorted(an.cells, key=lambda c: (c.arm, c.domain, c.level, c.output_len)):
        by = {r.objective: r for r in c.objectives}
        row = [c.arm, c.domain, rate_text(c.rate) if c.rate is not None else str(c.concurrency), str(c.n), str(c.met),
               fmt_share(c.attainment, c.attainment_low, c.attainment_high), fmt_num(c.goodput_req_s),
               fmt_num(c.goodput_tok_s), fmt_num(c.output_tok_s)]
        row += [fmt_centre(by[n].value, by[n].ci_low, by[n].ci_high) if n in by else "-" for n in pct]
        rows.append(row + [_holds(c)])
    return Table(cols, rows, align="ll" + "r" * (len(cols) - 3) + "l")


def capacity_table(an: SloAnalysis) -> Table:
    rows = []
    for x in an.capacity:
        lab = lambda v: _lab(an, v)  # noqa: E731
        rows.append([x.arm, x.domain, "-" if x.capacity is None else lab(x.capacity),
                     fmt_num(x.goodput_tok_s) if x.capacity is not None else "-",
                     "-" if x.first_failure is None else lab(x.first_failure),
                     (x.first_failure_why or (f"{lab(x.not_judged[0])} not judged" if x.not_judged else
                                              f"none through {lab(x.levels[-1])}" if x.levels else "-"))
                     + (f"; holds again at {', '.join(map(lab, x.holds_again))}" if x.holds_again else ""),
                     ", ".join(map(lab, x.not_judged)) or "-"])
    return Table(["arm", "domain", "capacity", "goodput tok/s there", "first failure", "what failed", "not judged"],
                 rows, align="llrrrll")


def advice_blocks(an: SloAnalysis, raw: dict[str, str]) -> list[Block]:
    """raw: the raw-throughput advice line per speculative arm (report.run.threshold_advice)."""
    if not an.advice:
        return []
    rows = []
    for a in an.advice:
        for x in a.levels:
            rows.append([a.arm, a.domain, str(x.concurrency), "yes" if x.arm_holds else "no",
                         "yes" if x.baseline_holds else "no", fmt_num(x.throughput_ratio), fmt_num(x.goodput_ratio),
                         x.choice])
    items = []
    for a in an.advice:
        items.append(f"{a.arm} / {a.domain}: by raw throughput: {a.raw_note or 'no raw crossover recorded'}")
        items.append(f"{a.arm} / {a.domain}: {a.note}")
    for arm in an.recommended_disable_batch_threshold:
        items.append(f"{arm}: by raw throughput: {raw.get(arm, '-')}; within the objectives: {threshold_text(an, arm)}")
    return [Heading(f"Speculative advice within the objectives (against {an.baseline})"),
            Table(["arm", "domain", "c", "arm holds", "base holds", "throughput x", "goodput x", "choice"], rows,
                  align="llrllrrl"),
            Para("choice: the arm to serve at that level within the objectives. Both hold: the raw rule (the "
                 "baseline only where the arm is significantly slower: ratio < 1, paired 95% CI below 1); one "
                 "holds: that one; neither: no arm meets them there."),
            Items(items)]


def slo_blocks(an: SloAnalysis, raw: dict[str, str]) -> list[Block]:
    """The section a run report carries when the run has objectives."""
    return [Heading("Service-level objectives"), Para(f"Objectives: {an.objectives.text()}."),
            cells_table(an), Para(SLO_NOTE),
            Heading(f"Capacity per arm and domain (the highest {'rate, req/s,' if an.axis == 'rate' else an.axis} "
                    "at which the objectives hold, every lower "
                    "level holding and judged too)"), capacity_table(an),
            Items([f"{x.arm} / {x.domain}: {x.note}" for x in an.capacity]), *advice_blocks(an, raw)]


def build_slo_report(title: str, an: SloAnalysis, raw: dict[str, str], data: dict,
                     method: list[Block] | None = None) -> Report:
    """`toolkit results slo`: the run against other objectives, then the run's methodology (its checks and
    the cells no verdict uses), so that no capacity is read without them."""
    r = Report(title, data=data)
    r.add(Heading(title, 1), *slo_blocks(an, raw), *(method or []))
    return r
