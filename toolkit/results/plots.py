"""Report plots (matplotlib, Agg backend), returned as PNG bytes. Every plot takes one or two runs:
with two, run A is drawn solid and run B dashed in the same colours (overlay)."""

from __future__ import annotations

import io
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from toolkit.results import compact  # noqa: E402
from toolkit.results.archive import Archive  # noqa: E402
from toolkit.results.cells import CellReader  # noqa: E402
from toolkit.schema.keys import spec_arm_names  # noqa: E402

STYLES = ("-", "--")
MARKERS = ("o", "s")
DPI = 90


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def baseline_arm(a: Archive) -> str | None:
    spec = a.manifest.matrix.resolved
    if spec.get("baseline"):
        return spec["baseline"]
    for row in a.derived.speedups:
        if row.baseline:
            return row.baseline
    arms = spec_arm_names(spec.get("arms")) or sorted({c.arm for c in a.cells})
    if "baseline" in arms:
        return "baseline"
    return arms[0] if arms else None


_GROUPS: dict[int, tuple[Archive, dict]] = {}


def _group_stats(a: Archive) -> dict:  # data-keyed: group
    """Each (arm, domain, concurrency, output_len) group's metrics, read once per archive."""
    hit = _GROUPS.get(id(a))
    if hit is None or hit[0] is not a:
        if len(_GROUPS) > 8:
            _GROUPS.clear()
        hit = _GROUPS[id(a)] = (a, CellReader(a).group_stats())
    return hit[1]


def cell_stat(a: Archive, metric: str, field: str = "p50") -> dict[tuple[str, str, int], float]:  # data-keyed: cell
    """(arm, domain, concurrency) -> one field of a metric, as `results show` and `results diff` read it
    (toolkit/results/cells.py: the repeats' requests pooled)."""
    out = {}
    for (arm, domain, conc, _), stats in _group_stats(a).items():
        v = getattr(stats.get(metric), field, None)
        if v is not None and np.isfinite(v):
            out[(arm, domain, conc)] = float(v)
    return out


def _colors(arms: list[str]) -> dict[str, str]:  # data-keyed: arm
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {arm: cycle[i % len(cycle)] for i, arm in enumerate(arms)}


def _domains_arms(runs: list[tuple[str, Archive]]) -> tuple[list[str], list[str]]:
    cells = [c for _, a in runs for c in a.cells]
    return sorted({c.domain for c in cells}), sorted({c.arm for c in cells})


def _axis_name(cells) -> str:
    """The x axis of cells keyed by level: request rate where they are open-loop (`rates:`), else concurrency."""
    return "request rate (req/s)" if any(c.rate is not None for c in cells) else "concurrency"


def _ticks(levels) -> list[str]:
    return [f"{x:g}" for x in levels]


def _xaxis(ax, runs) -> None:
    cells = [c for _, a in runs for c in a.cells]
    concs = sorted({c.level for c in cells})
    if concs and concs[0] > 0:  # imports without a concurrency limit have 0: linear axis then
        ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set_xticks(concs, _ticks(concs))
    ax.set_xlabel(_axis_name(cells))


def _grid(n: int, height: float = 3.4):
    fig, axes = plt.subplots(1, max(n, 1), figsize=(4.6 * max(n, 1), height), squeeze=False)
    return fig, axes[0]


def throughput(runs: list[tuple[str, Archive]]) -> bytes:
    domains, arms = _domains_arms(runs)
    colors = _colors(arms)
    fig, axes = _grid(len(domains))
    for ax, d in zip(axes, domains):
        for i, (label, a) in enumerate(runs):
            st = cell_stat(a, "output_tok_s")
            for arm in arms:
                pts = sorted((c, v) for (ar, dom, c), v in st.items() if ar == arm and dom == d)
                if pts:
                    ax.plot(*zip(*pts), STYLES[i % 2], marker=MARKERS[i % 2], color=colors[arm],
                            label=f"{arm} ({label})" if len(runs) > 1 else arm)
        _xaxis(ax, runs)
        ax.set_title(f"{d}: output throughput")
        ax.set_ylabel("output tok/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _png(fig)


def percentiles(runs: list[tuple[str, Archive]], metric: str, title: str) -> bytes:
    """p50 (thick) and p99 (thin) of a latency per arm and domain against concurrency."""
    domains, arms = _domains_arms(runs)
    colors = _colors(arms)
    fig, axes = _grid(len(domains))
    for ax, d in zip(axes, domains):
        for i, (label, a) in enumerate(runs):
            for field, lw in (("p50", 2.2), ("p99", 1.0)):
                st = cell_stat(a, metric, field)
                for arm in arms:
                    pts = sorted((c, v) for (ar, dom, c), v in st.items() if ar == arm and dom == d)
                    if pts:
                        tag = f"{arm} {field}" + (f" ({label})" if len(runs) > 1 else "")
                        ax.plot(*zip(*pts), STYLES[i % 2], marker=MARKERS[i % 2], lw=lw, ms=4,
                                color=colors[arm], label=tag, alpha=1.0 if field == "p50" else 0.7)
        _xaxis(ax, runs)
        ax.set_title(f"{d}: {title}")
        ax.set_ylabel("ms")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


def speedup_table(a: Archive) -> dict[str, dict[tuple[str, int], float]]:  # data-keyed: arm, cell
    """arm -> (domain, concurrency) -> throughput ratio over the baseline: the runner's derived speed-ups, else
    (an imported run has none) the same ratio from the archive's cells (toolkit.schema.metrics)."""
    from toolkit.schema.metrics import throughput_ratios

    out: dict[str, dict] = defaultdict(dict)
    for r in a.derived.speedups:
        if r.throughput_ratio is not None:
            out[r.arm][(r.domain, r.rate if r.rate is not None else int(r.concurrency))] = float(r.throughput_ratio)
    if out:
        return dict(out)
    for (arm, d, c), ratio in throughput_ratios(a.cells, baseline_arm(a)).items():
        out[arm][(d, c)] = ratio
    return dict(out)


def crossover_boxes(a: Archive) -> dict[str, dict[str, int]]:  # data-keyed: arm, domain
    """arm -> domain -> the concurrency the heatmap outlines: the run's crossovers (derived.crossovers, made
    under the rule of what a verdict may use: toolkit/results/verdicts.py), nothing else."""
    from toolkit.results.verdicts import current

    out: dict[str, dict[str, int]] = defaultdict(dict)
    for c in current(a).crossovers:
        if c.crossover_concurrency is not None:
            out[c.arm][c.domain] = int(c.crossover_concurrency)
        elif c.crossover_rate is not None:
            out[c.arm][c.domain] = c.crossover_rate
    return dict(out)


def _left_out(a: Archive) -> set[tuple[str, str, int]]:
    from toolkit.results.verdicts import current

    return {(r.arm, r.domain, r.rate if r.rate is not None else int(r.concurrency))
            for r in current(a).speedups if r.excluded}


def heatmap_figure(runs: list[tuple[str, Archive]]):
    """The heatmap as a matplotlib figure (None without speed-ups): each spec arm's speedup over the
    baseline, domain x concurrency; the crossover outlined in black and marked with an x; levels no verdict
    may use hatched."""
    panels = [(label, a, arm, table) for label, a in runs for arm, table in sorted(speedup_table(a).items())]
    if not panels:
        return None
    fig, axes = _grid(len(panels), height=0.9 + 0.5 * max(len({d for *_, t in panels for d, _ in t}), 2))
    for ax, (label, a, arm, table) in zip(axes, panels):
        domains = sorted({d for d, _ in table})
        concs = sorted({c for _, c in table})
        grid = np.full((len(domains), len(concs)), np.nan)
        for (d, c), v in table.items():
            grid[domains.index(d), concs.index(c)] = v
        lo, hi = np.nanmin(grid), np.nanmax(grid)
        norm = TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.99), vmax=max(hi, 1.01))
        im = ax.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto")
        boxes, left_out = crossover_boxes(a).get(arm, {}), _left_out(a)
        for y, d in enumerate(domains):
            for x, c in enumerate(concs):
                if np.isfinite(grid[y, x]):
                    dark = abs(float(norm(grid[y, x])) - 0.5) > 0.35
                    ax.text(x, y, f"{grid[y, x]:.2f}", ha="center", va="center", fontsize=9,
                            color="white" if dark else "black")
                if (arm, d, c) in left_out:
                    ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=0, hatch="//", ec="grey",
                                           gid="left-out"))
            if boxes.get(d) in concs:
                x = concs.index(boxes[d])
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=3, ec="black", gid="crossover"))
                ax.text(x + 0.32, y - 0.22, "x", ha="center", va="center", fontsize=10, fontweight="bold",
                        color="white" if float(norm(grid[y, x])) < 0.15 else "black")
        ax.set_xticks(range(len(concs)), _ticks(concs))
        ax.set_yticks(range(len(domains)), domains)
        ax.set_xlabel(f"{_axis_name(a.cells)} (box: crossover; hatched: left out)")
        ax.set_title(f"throughput ratio {arm}/baseline" + (f" ({label})" if len(runs) > 1 else ""))
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()  # a panel's domain names clear the colour bar of the panel before it
    return fig


def heatmap(runs: list[tuple[str, Archive]]) -> bytes | None:
    fig = heatmap_figure(runs)
    return _png(fig) if fig is not None else None


def acceptance(runs: list[tuple[str, Archive]]) -> bytes | None:
    """Acceptance length (the cell figure, accept_length) per domain and speculative arm, averaged over
    concurrency weighted by the requests behind each figure."""
    rows = []
    for label, a in runs:
        acc: dict[tuple, list] = defaultdict(list)
        for (arm, domain, _, _), stats in _group_stats(a).items():
            s = stats.get("accept_length")
            if s is not None and s.p50 is not None and np.isfinite(s.p50):
                acc[(arm, domain)].append((s.p50, max(s.n, 1)))
        for (arm, d), vals in acc.items():
            w = sum(n for _, n in vals)
            rows.append((label, arm, d, sum(v * n for v, n in vals) / w))
    if not rows:
        return None
    domains = sorted({r[2] for r in rows})
    series = sorted({(r[0], r[1]) for r in rows}, key=lambda s: (s[1], [lab for lab, _ in runs].index(s[0])))
    colors = _colors(sorted({r[1] for r in rows}))
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(domains) * max(len(series), 1) ** 0.5, 3.4))
    width = 0.8 / len(series)
    for i, (label, arm) in enumerate(series):
        vals = [next((r[3] for r in rows if r[0] == label and r[1] == arm and r[2] == d), np.nan) for d in domains]
        hatch = "//" if len(runs) > 1 and label == runs[1][0] else None
        ax.bar(np.arange(len(domains)) + i * width - 0.4 + width / 2, vals, width, color=colors[arm], hatch=hatch,
               label=f"{arm} ({label})" if len(runs) > 1 else arm, edgecolor="black", lw=0.5)
    ax.set_xticks(range(len(domains)), domains)
    ax.set_ylabel("tokens per verification step")
    ax.set_title("acceptance length per domain")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def slo_plot(an) -> bytes:
    """Service-level objectives (a toolkit.schema.slo.SloAnalysis), one column per domain: goodput tok/s vs
    concurrency per arm (filled markers where the objectives hold, hollow where not; the raw throughput
    faint), then each percentile objective's value with its 95% CI against the objective line, then the
    attainment against its target."""
    domains = sorted({c.domain for c in an.cells})
    arms = sorted({c.arm for c in an.cells})
    colors = _colors(arms)
    rows = [("goodput", None)] + [("objective", o) for o in an.objectives.percentiles] + [("attainment", None)]
    fig, axes = plt.subplots(len(rows), max(len(domains), 1), figsize=(4.6 * max(len(domains), 1), 2.9 * len(rows)),
                             squeeze=False)
    concs = sorted({c.level for c in an.cells})
    xname = "request rate (req/s)" if an.axis == "rate" else "concurrency"
    for col, d in enumerate(domains):
        for row, (what, o) in enumerate(rows):
            ax = axes[row][col]
            for arm in arms:
                cs = sorted((c for c in an.cells if c.arm == arm and c.domain == d and c.status == "ok"),
                            key=lambda c: c.level)
                if not cs:
                    continue
                x = [c.level for c in cs]
                if what == "goodput":
                    ax.plot(x, [c.output_tok_s for c in cs], ":", color=colors[arm], alpha=0.5, lw=1)
                    y, lo, hi = [c.goodput_tok_s for c in cs], None, None
                elif what == "objective":
                    res = [next((r for r in c.objectives if r.objective == o.name), None) for c in cs]
                    y = [r.value if r else None for r in res]
                    lo = [r.ci_low if r else None for r in res]
                    hi = [r.ci_high if r else None for r in res]
                else:
                    y = [c.attainment for c in cs]
                    lo, hi = [c.attainment_low for c in cs], [c.attainment_high for c in cs]
                y = [np.nan if v is None else v for v in y]
                ax.plot(x, y, "-", color=colors[arm], lw=1.5, label=arm)
                for xi, yi, c in zip(x, y, cs):
                    ax.plot([xi], [yi], "o", ms=6, color=colors[arm], mfc=colors[arm] if c.holds else "white")
                if lo is not None:
                    err = [[max(yi - (l if l is not None else yi), 0) for yi, l in zip(y, lo)],
                           [max((h if h is not None else yi) - yi, 0) for yi, h in zip(y, hi)]]
                    ax.errorbar(x, y, yerr=err, fmt="none", ecolor=colors[arm], alpha=0.6, capsize=2)
            if what == "goodput":
                ax.set_title(f"{d}: goodput (filled: objectives hold; dotted: raw tok/s)", fontsize=10)
                ax.set_ylabel("goodput tok/s")
            elif what == "objective":
                ax.axhline(o.limit, ls="--", color="black", lw=1.2, label=f"objective {o.limit:g} ms")
                ax.set_title(f"{d}: {o.metric} {o.bound} [95% CI]")
                ax.set_ylabel("ms")
            else:
                ax.axhline(an.objectives.attainment, ls="--", color="black", lw=1.2,
                           label=f"target {an.objectives.attainment:.0%}")
                ax.set_title(f"{d}: attainment [95% CI]")
                ax.set_ylabel("share of requests")
                ax.set_ylim(-0.02, 1.02)
            if concs and concs[0] > 0:
                ax.set_xscale("log", base=2)
            ax.minorticks_off()
            ax.set_xticks(concs, _ticks(concs))
            ax.set_xlabel(xname)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


TELEMETRY = (("util_gpu_pct", "GPU utilisation %"), ("power_w", "power W"), ("mem_used_mib", "memory used MiB"),
             ("sm_clock_mhz", "SM clock MHz"))


def telemetry(a: Archive) -> bytes | None:
    """GPU telemetry sampled during each cell (telemetry/<cell>.json), on one time axis, coloured by arm."""
    import json

    files = compact.glob(a.path / "telemetry", "*.json")
    series = []
    for f in files:
        try:
            samples = json.loads(compact.read_text(f))
        except (OSError, ValueError):
            continue
        if samples:
            series.append((f.stem, samples))
    if not series:
        return None
    t0 = min(s["t"] for _, samples in series for s in samples)
    arms = sorted({key.split("__")[0] for key, _ in series})
    colors = _colors(arms)
    fig, axes = plt.subplots(len(TELEMETRY), 1, figsize=(9, 1.7 * len(TELEMETRY)), sharex=True)
    seen: set[str] = set()
    for key, samples in sorted(series, key=lambda kv: kv[1][0]["t"]):
        arm = key.split("__")[0]
        t = [(s["t"] - t0) for s in samples]
        for ax, (field, _) in zip(axes, TELEMETRY):
            ax.plot(t, [s.get(field, np.nan) for s in samples], color=colors[arm], lw=1,
                    label=arm if (arm not in seen and ax is axes[0]) else None)
        seen.add(arm)
    for ax, (_, label) in zip(axes, TELEMETRY):
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, ncol=len(arms))
    axes[0].set_title("GPU telemetry during the cells (gaps: between cells and server starts)")
    axes[-1].set_xlabel("seconds since the first sample")
    return _png(fig)


def all_plots(runs: list[tuple[str, Archive]]) -> list[tuple[str, str, bytes]]:
    """(file name, caption, png) for every plot that has data."""
    if not any(c.status == "ok" for _, a in runs for c in a.cells):
        return []
    out = [("throughput.png", "Output throughput vs concurrency, per arm and domain", throughput(runs)),
           ("ttft.png", "Time to first token: p50 (thick) and p99 (thin)", percentiles(runs, "ttft_ms", "TTFT")),
           ("itl.png", "Inter-token latency: p50 (thick) and p99 (thin)", percentiles(runs, "itl_ms", "ITL"))]
    hm = heatmap(runs)
    if hm:
        out.append(("speedup.png", "Throughput ratio over the baseline arm, output tok/s (domain x level; the "
                                   "paired speed-ups with their intervals are in the table); black box: crossover "
                                   "(derived.crossovers); hatched: a level no verdict may use", hm))
    ac = acceptance(runs)
    if ac:
        out.append(("acceptance.png", "Acceptance length per domain", ac))
    tm = telemetry(runs[0][1])
    if tm:
        out.append(("telemetry.png", "GPU telemetry per cell" + (f" ({runs[0][0]})" if runs[0][0] else ""), tm))
    return out


def surface_plot(surface: dict) -> bytes:
    """The speed-up surface (toolkit/results/surface.py), one panel per (arm, domain), the pooled one last:
    speed-up over the baseline against the forced (SYNTHETIC) acceptance length, one line per load level with
    its 95% CI bars, the line y=1, and each real acceptance measured for that arm and domain as a dotted line.
    A point no prediction uses (left out: `unequal-work`, a cell no verdict may use) is hollow, and a panel all of
    whose points are left out says so in its title."""
    rows = surface["rows"]
    panels = sorted({(r["arm"], r["domain"]) for r in rows}, key=lambda p: (p[0], p[1] == "pooled", p[1]))
    levels = sorted({r["level"] for r in rows})
    colors = _colors([f"{x:g}" for x in levels])
    real = {(a["arm"], a["domain"]): a["accept_len"] for a in surface.get("acceptance") or []}
    fig, axes = _grid(len(panels))
    for ax, (arm, domain) in zip(axes, panels):
        for lvl in levels:
            pts = sorted((r["accept_len"], r["ratio"], r["ci_low"], r["ci_high"], bool(r.get("excluded"))) for r in rows
                         if r["arm"] == arm and r["domain"] == domain and r["level"] == lvl and r["ratio"] is not None)
            if not pts:
                continue
            ref = next(r for r in rows if r["level"] == lvl)
            x, y = [p[0] for p in pts], [p[1] for p in pts]
            err = [[max(p[1] - (p[2] if p[2] is not None else p[1]), 0) for p in pts],
                   [max((p[3] if p[3] is not None else p[1]) - p[1], 0) for p in pts]]
            label = f"r={lvl:g}/s" if ref["axis"] == "rate" else f"c={int(lvl)}"
            ax.errorbar(x, y, yerr=err, fmt="-", color=colors[f"{lvl:g}"], capsize=3, label=label)
            for hollow in (False, True):
                xs = [p[0] for p in pts if p[4] == hollow]
                ax.plot(xs, [p[1] for p in pts if p[4] == hollow], "o", ms=4, color=colors[f"{lvl:g}"],
                        **({"markerfacecolor": "white"} if hollow else {}))
        ax.axhline(1.0, ls="--", color="black", lw=1)
        if (arm, domain) in real:
            ax.axvline(real[(arm, domain)], ls=":", color="grey", lw=1.2, label=f"real acc {real[(arm, domain)]:.2f}")
        ax.set_xlabel("acceptance length, SYNTHETIC (forced)")
        ax.set_ylabel("speed-up over the baseline")
        mine = [r for r in rows if r["arm"] == arm and r["domain"] == domain]
        out = " - LEFT OUT, no prediction uses it" if mine and all(r.get("excluded") for r in mine) else ""
        ax.set_title(f"{arm} / {domain}: speed-up surface (synthetic){out}", fontsize=10 if not out else 8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)
