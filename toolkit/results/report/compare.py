"""The report of run B against run A (`results diff`, `results report --against`): per metric of the
registry a table of the A and B figures with their 95% CIs, the change, and the test's p-value and
sample sizes (`~`: no significant change), then notes, unmatched cells and the environment diff."""

from __future__ import annotations

from toolkit.results.archive import Archive
from toolkit.results.facts import RunFacts
from toolkit.results.diff import CLAIM_DF, DEFAULT_FLOOR, TOO_FEW_LAUNCHES, DiffResult, MetricDiff, own_df
from toolkit.results.report.model import Facts, Heading, Image, Items, Para, Report, Table, fmt_centre, fmt_num, \
    fmt_pct, fmt_share, short
from toolkit.stats import ALPHA, MIN_SAMPLES
from toolkit.schema.metrics import METRICS

MARK = {"better": "better", "worse": "WORSE"}


def _n(m: MetricDiff) -> str:
    """Sample sizes: requests, or launches when launch noise made the verdict (with the change's 95% CI)."""
    if m.noise and m.noise != DEFAULT_FLOOR:
        return f"launches {m.launches_a}+{m.launches_b}, CI [{fmt_pct(m.low_pct)}, {fmt_pct(m.high_pct)}]"
    return f"n={m.a_n}+{m.b_n}"


def _adjusted(m: MetricDiff, r: DiffResult) -> str:
    """Why a change whose 95% CI excludes zero is `~`: its p was adjusted over the family."""
    if m.low_pct is None or m.high_pct is None or not (m.low_pct > 0 or m.high_pct < 0) or m.p is None:
        return ""
    return f"; unadjusted p={m.p:.3f}, Holm-adjusted over {r.family_size} tests"


def _delta(m: MetricDiff, r: DiffResult) -> tuple[str, str]:
    """(the delta column, the p/n column) of one metric of one cell."""
    p = m.p_adj if m.p_adj is not None else m.p
    if m.verdict in ("better", "worse"):
        return fmt_pct(m.delta_pct), f"(p={p:.3f} {_n(m)})  {MARK[m.verdict]}"
    if m.verdict == "~":
        return "~", f"(p={p:.3f} {_n(m)}{_adjusted(m, r)})"
    if m.verdict == "inconclusive" and m.se is not None:  # the cell's own variance of under 3 df
        return fmt_pct(m.delta_pct), f"(p={p:.3f} {_n(m)}; too few launches for a claim)  ?"
    if m.verdict == "inconclusive":
        where = "within the floor" if "within" in m.note else "beyond the floor in this cell only"
        return fmt_pct(m.delta_pct), f"(p={p:.3f} n={m.a_n}+{m.b_n}; one launch a side: {where})  ?"
    if m.verdict == "too-few":
        return fmt_pct(m.delta_pct), f"(n={m.a_n}+{m.b_n}: too few to test)"
    why = {"chunk": "pooled chunks", "cell": "one figure per cell"}.get(METRICS[m.metric].kind, "no per-request samples")
    return fmt_pct(m.delta_pct), f"(not tested: {why})"


def metric_table(r: DiffResult, metric: str) -> Table | None:
    rows = []
    centre = fmt_share if METRICS[metric].kind == "share" else fmt_centre
    for c in r.cells:
        m = c.metrics.get(metric) if c.comparable else None
        if m is not None:
            d, pn = _delta(m, r)
            if m.excluded:  # a flag leaves this metric of the cell out of verdicts (bundled: TTFT/ITL/TPOT)
                codes = sorted({x.split(": ", 1)[-1].split(" (", 1)[0] for x in m.excluded})
                pn += f"  left out: {', '.join(codes)}"
            rows.append([c.label, centre(m.a, m.a_low, m.a_high), centre(m.b, m.b_low, m.b_high), d, pn])
    if not rows:
        return None
    g = r.geomean.get(metric)
    if g:
        ci = f", launch-aware CI [{fmt_pct(g['low_pct'])}, {fmt_pct(g['high_pct'])}]" if "low_pct" in g else ""
        rows.append(["geomean", fmt_num(g["a"]), fmt_num(g["b"]), fmt_pct(g["delta_pct"]), f"({g['cells']} cells{ci})"])
    return Table(["cell", "A", "B", "delta", "p, n"], rows, align="lrrrl")


def _facts(fa: RunFacts, fb: RunFacts) -> Facts:
    rows = [["run", f"{fa.matrix}/{fa.run_id}", f"{fb.matrix}/{fb.run_id}"]]
    for label, key in (("status", "status"), ("started", "started_at"), ("environment hash", "env_hash"),
                       ("host", "host"), ("GPU", "gpu"), ("source", "source")):
        rows.append([label, str(getattr(fa, key) or "-"), str(getattr(fb, key) or "-")])
    return Facts(rows, columns=["", "A (reference)", "B"])


def build_diff_report(a: Archive, b: Archive, r: DiffResult, *, plots: bool = False, data: dict | None = None) -> Report:
    from toolkit.results.facts import run_facts

    title = f"{b.matrix_name}/{b.run_id} against {a.matrix_name}/{a.run_id}"
    rep = Report(title, data=data if data is not None else r.to_dict())
    rep.add(Heading(title, 1), _facts(run_facts(a), run_facts(b)))
    if r.slo is not None:
        from toolkit.schema.slo import Objectives

        rep.add(Para(f"Goodput and attainment under the service-level objectives {Objectives.from_block(r.slo).text()} "
                     f"({r.slo_note}; docs/slo.md)."))
    for metric in r.metrics:
        t = metric_table(r, metric)
        if t is not None:
            m = METRICS[metric]
            rep.add(Heading(f"{metric}: {m.label}, {m.unit}, {m.better} is better ({_centre_note(m.kind)})", 3), t)
    corr = (f"Holm-adjusted over {r.family_size} tests, one per independent metric and cell: a metric that tracks "
            "another adds none" if r.correction == "holm" else "not adjusted for multiple tests")
    rep.add(*_noise_blocks(r), *machine_blocks(r))
    rep.add(Para(_legend(r, corr)))
    notes = sorted({f"{c.label}: {n}" for c in r.cells if c.comparable for n in c.notes})
    if notes:
        rep.add(Heading("Notes", 3), Items(notes))
    bad = [f"{c.label}: {c.reason}" for c in r.cells if not c.comparable]
    if bad:
        rep.add(Heading("Not comparable", 3), Items(bad))
    if r.only_a or r.only_b:
        rep.add(Heading("Unmatched cells", 3),
                Items([f"only in A: {x}" for x in r.only_a] + [f"only in B: {x}" for x in r.only_b]))
    rep.add(Heading("Environment diff"))
    if r.env:
        rep.add(Para(f"{len(r.env)} difference{'s' if len(r.env) != 1 else ''}"),
                Table(["section", "field", "A", "B"],
                      [[e["section"], e["field"], "(absent)" if e["a"] is None else short(e["a"]),
                        "(absent)" if e["b"] is None else short(e["b"])] for e in r.env], align="llll"))
    else:
        rep.add(Para("no differences"))
    if plots:
        from toolkit.results.plots import all_plots

        rep.add(Heading("Plots"), *[Image(n, c, png) for n, c, png in all_plots([("A", a), ("B", b)])])
    return rep


def _legend(r: DiffResult, corr: str) -> str:
    """What `~`, `?` and the untested mean in this diff: per-request tests where launch noise is unknown, a
    t-test of the per-launch figures where it is known (docs/results.md#launch-noise)."""
    sources = {x.source for x in r.noise.values()}
    launch = any(s != DEFAULT_FLOOR for s in sources)
    floor = DEFAULT_FLOOR in sources or not sources
    out = [f"~ : no significant change (p >= {ALPHA}, {corr})."]
    if launch:
        out.append("Where the launch noise is known (launches n+m, CI: the change's 95% CI): a t-test of the "
                   "per-launch figures on the log scale, the cell's own launch variance (both runs pooled); every "
                   "metric is tested this way.")
    if floor:
        out.append(f"One launch a side (n=requests): Mann-Whitney U on the per-request samples, and `?` "
                   f"(inconclusive) for a change within the default floor ±{r.floor_pct:g}% or not arm-wide. Not "
                   f"tested: fewer than {MIN_SAMPLES} requests on a side; pooled chunk figures (the chunks of one "
                   "request are not independent samples: itl_req_mean_ms is the tested view of the same gaps); one "
                   "figure per cell (throughputs, accept_length); summary-only imports."
                   + (" Goodput is one figure per cell (not tested); slo_attainment, a share of the requests, is "
                      "tested with Fisher's exact test on the two counts (Wilson 95% intervals)."
                      if r.slo is not None else ""))
    return " ".join(out)


def _noise_blocks(r: DiffResult) -> list:
    """Which launch noise each arm's verdicts used (docs/results.md#launch-noise), arms with the same grouped."""
    if not r.noise:
        return []
    refused = [f"{why}: not used" for why in r.calibration_refused]
    groups: dict[tuple, list[str]] = {}
    for arm, x in r.noise.items():
        groups.setdefault((x.launches_a, x.launches_b, x.source), []).append(arm)
    items = []
    for (la, lb, src), arms in groups.items():
        if src == DEFAULT_FLOOR:
            usable = "usable " if r.calibration_refused else ""
            src = (f"unknown (one launch per side, no {usable}calibration): a change is called only beyond the "
                   f"default floor ±{r.floor_pct:g}% in the cell and arm-wide, with the per-request test agreeing; "
                   "anything less is inconclusive (`toolkit bench noise` calibrates this GPU and environment, "
                   "`launches: 3` measures it)")
        if src.startswith("measured") and own_df(la, lb) < CLAIM_DF:
            src += f" ({TOO_FEW_LAUNCHES})"
        items.append(f"{', '.join(arms)}: launches {la} (A) + {lb} (B); launch noise {src}")
    return [Heading("Launch noise", 3), Items(refused + items)]


def machine_blocks(r: DiffResult) -> list:
    """Which machines the runs ran on and, across machines, the between-machine variance the tests added
    (docs/results.md#the-machine-level)."""
    x = r.machines
    if x is None:
        return []
    items = [x.cross.text()]
    if r.cross_machine:
        items.append("the tests and intervals add the machine level (twice the between-machine variance: launches "
                     "on one machine do not average a machine's effect away): "
                     + "; ".join(f"{m} CV {v.cv:.0%}" for m, v in sorted(x.variance.items())))
        sources = sorted({v.source for v in x.variance.values()})
        items += [f"between-machine variance from: {src}" for src in sources]
    return [Heading("Machines", 3), Items(items)]


def _centre_note(kind: str) -> str:
    return {"request": "median [95% CI] of the requests", "chunk": "median of the pooled chunks",
            "cell": "one figure per cell", "share": "share of the measured requests [95% Wilson interval]"}[kind]
