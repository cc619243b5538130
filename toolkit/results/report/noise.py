"""The launch noise a run can see (`results show`, report.md, `--json` under `noise`): per arm and metric the
launch-to-launch coefficient of variation (runs with two or more launches per arm), and per cell the
smallest change a comparison of this run with one like it could detect at the run's alpha and 80% power.
toolkit/stats/ defines every figure; docs/results.md#launch-noise explains them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from toolkit.results.archive import Archive
from toolkit.stats import ALPHA, DEFAULT, MAX_LAUNCHES, POWER, launches_needed, machine_prior, mde_pct
from toolkit.results.report.model import Heading, Items, Para, Table, fmt_num
from toolkit.schema.metrics import NAMES

NOTE = ("launch CV: the coefficient of variation of a cell's per-launch figure (the launch's median for request "
        "metrics, its figure for cell metrics) from one launch to the next, pooled over the arm's cells (df: its "
        "degrees of freedom, Satterthwaite, lower when launches move all cells together). MDE: the smallest change "
        f"a comparison with a run like this one (the same launches a side) detects with {POWER:.0%} power at "
        f"alpha {ALPHA}; per cell in `--json` (noise.cells). A change smaller than the MDE can be real, but this "
        "design cannot tell it from a relaunch.")


# a launch this far from every other launch of its cell (a factor, either way) is named beside the CV: a
# relaunch on one GPU moves a cell by 5-10 % (docs/results.md, the H200 reference run); 2x is a one-time
# cost (kernels compiled on a fresh machine, a stall) or a launch that did not serve like the others
OUTLIER_FACTOR = 2.0
OUTLIER_METRICS = ("output_tok_s", "tpot_ms", "ttft_ms")


@dataclass(frozen=True, slots=True)
class Outlier:
    """A launch OUTLIER_FACTOR or more from every other launch of its cell, in one metric."""

    arm: str
    cell: str
    metric: str
    launch: int
    value: float
    others: list[float]
    factor: float


@dataclass(frozen=True, slots=True)
class LaunchNoise:
    """One arm's launch noise in one metric: the CV with its df over its cells, the launches per arm, the MDE of a
    comparison with a run like it, and the launches that would find a CHANGE_PCT change ({"10": n})."""

    cv: float
    df: float
    cells: int
    launches: int
    mde_pct: float
    launches_for: dict[str, int | None]


@dataclass(frozen=True, slots=True)
class NoiseReport:
    """The launch noise a run with two or more launches of an arm can see (`--json`: `noise`, these fields in this
    order): per arm and metric, per cell label the MDE per metric, the outlying launches, alpha and power."""

    arms: dict[str, dict[str, LaunchNoise]]
    cells: dict[str, dict[str, float]]
    alpha: float
    power: float
    outliers: list[Outlier]


@dataclass(frozen=True, slots=True)
class LaunchPower:
    """One arm's minimum detectable effect in one metric, from the launch CV the verdicts would use."""

    cv: float
    launches: int
    mde_pct: float
    mde_across_machines_pct: float
    launches_for: dict[str, int | None]


@dataclass(frozen=True, slots=True)
class PowerReport:
    """A one-launch run's minimum detectable effects (`--json`: `power`): whence the CV, alpha, power, the change
    planned for, and per arm and metric a LaunchPower."""

    source: str
    alpha: float
    power: float
    change_pct: float
    arms: dict[str, dict[str, LaunchPower]]


def outlier_launches(view, arm: str) -> list[Outlier]:
    """Launches of the arm whose figure in a cell is OUTLIER_FACTOR or more from every other launch of that
    cell (cells with three or more launches: with two, neither is the odd one)."""
    out = []
    for g in view.arm_groups(arm):
        for metric in OUTLIER_METRICS:
            figs = view.figures(g, metric)
            if len(figs) < 3:
                continue
            for launch, v in figs.items():
                others = [x for k, x in figs.items() if k != launch]
                if v > 0 and all(x > 0 for x in others):
                    near = min(others, key=lambda x: abs(math.log(x / v)))
                    factor = max(v / near, near / v)
                    if factor >= OUTLIER_FACTOR:
                        out.append(Outlier(arm, f"{g[1]} c={g[2]}", metric, launch, v, sorted(others), factor))
    return out


def noise_data(a: Archive, objectives=None) -> NoiseReport | None:
    """The run's NoiseReport; None when no arm has two launches."""
    from toolkit.results.cells import CellReader
    from toolkit.results.noise import LaunchView

    view = LaunchView(CellReader(a, objectives))
    arms = sorted({g[0] for g in view.groups})
    if not any(view.arm_launches(arm) >= 2 for arm in arms):
        return None
    out = NoiseReport(arms={}, cells={}, alpha=ALPHA, power=POWER, outliers=[])
    for arm in arms:
        for metric in NAMES:
            n = view.noise(arm, metric)
            if n is None:
                continue
            k = view.arm_launches(arm)
            out.arms.setdefault(arm, {})[metric] = LaunchNoise(
                n.cv, n.df, n.cells, k, mde_pct(n, k), {f"{CHANGE_PCT:g}": launches_needed(n, CHANGE_PCT)})
            for g in view.arm_groups(arm):
                la = view.launches(g)
                if la >= 1:
                    label = f"{g[0]} {g[1]} c={g[2]} out={g[3]}"
                    out.cells.setdefault(label, {})[metric] = mde_pct(n, la)
        out.outliers.extend(outlier_launches(view, arm))
    return out


CHANGE_PCT = 10.0  # the change `bench matrix` plans for, and the report says how many launches would find
POWER_METRICS = ("output_tok_s", "ttft_ms", "tpot_ms", "e2e_ms")


def power_data(a: Archive, objectives=None, root=None) -> PowerReport | None:
    """For a run with one launch per arm (its own launch noise unseen): per arm and metric the minimum
    detectable effect of a comparison with a run like it (one launch a side), from the launch CV the verdicts
    would use, a calibration's (`toolkit bench noise`, found under the run's results root) or the default;
    the launches per arm that would find a CHANGE_PCT change at POWER; and the same across machines (the
    between-machine prior added). None when the run has two or more launches of some arm (noise_data covers it)
    or no cells."""
    from toolkit.results.cells import CellReader
    from toolkit.results.noise import LaunchView, calibration_view

    view = LaunchView(CellReader(a, objectives))
    arms = sorted({g[0] for g in view.groups})
    if not arms or any(view.arm_launches(arm) >= 2 for arm in arms):
        return None
    from pathlib import Path

    refused: list[str] = []  # a busy host's calibration is refused: the source says so
    cal = calibration_view(Path(root) if root else Path(a.path).resolve().parent.parent, a, objectives=objectives,
                           refused=refused)
    source = cal.source if cal is not None else DEFAULT.text()
    out = PowerReport(source="; ".join([source, *refused]), alpha=ALPHA, power=POWER, change_pct=CHANGE_PCT, arms={})
    for arm in arms:
        for metric in POWER_METRICS:
            if not any(view.figures(g, metric) for g in view.arm_groups(arm)):
                continue
            n = (cal.noise(arm, metric) if cal is not None else None) or DEFAULT
            mv = machine_prior(metric)
            out.arms.setdefault(arm, {})[metric] = LaunchPower(
                n.cv, view.arm_launches(arm), mde_pct(n, 1), mde_pct(n, 1, machine_var=mv.var),
                {f"{CHANGE_PCT:g}": launches_needed(n, CHANGE_PCT)})
    return out if out.arms else None


def power_blocks(data: PowerReport | None) -> list:
    """`results show` / report: the minimum detectable effect of a one-launch run, per arm and metric."""
    if not data:
        return []
    same: dict[tuple, list[str]] = {}  # arms whose row is the same (the default CV, or one calibration arm) share it
    for arm, by in data.arms.items():
        for metric, x in by.items():
            need = x.launches_for.get(f"{data.change_pct:g}")
            row = (metric, str(x.launches), f"{x.cv:.1%}", _pct(x.mde_pct), _pct(x.mde_across_machines_pct),
                   str(need) if need else f">{MAX_LAUNCHES}")
            same.setdefault(row, []).append(arm)
    n_arms = len(data.arms)
    rows = [["every arm" if len(arms) == n_arms and n_arms > 1 else ", ".join(arms), *row] for row, arms in same.items()]
    return [Heading("Minimum detectable effect"),
            Table(["arms", "metric", "launches", "launch CV", "MDE", "MDE across machines",
                   f"launches for {data.change_pct:g}%"], rows, align="ll"),
            Para(f"One launch per arm: the launch noise is not seen in this run, so these figures use {data.source}. "
                 f"MDE: the smallest change a comparison with a run like this one (one launch a side) detects with "
                 f"{data.power:.0%} power at alpha {data.alpha}, on the log-ratio scale of the tests; across "
                 "machines the between-machine prior is added (docs/results.md#the-machine-level). The last column: "
                 f"launches per arm that find a {data.change_pct:g}% change with that power "
                 "(docs/results.md#power-before-spending).")]


def _pct(v: float) -> str:
    return f"{v:.1f}%" if v < 1000 else ">1000%"  # beyond 10x: no comparison of this design detects anything


def noise_blocks(data: NoiseReport | None, metrics: tuple[str, ...] = ("output_tok_s", "ttft_ms", "tpot_ms", "e2e_ms",
                                                                 "req_output_tok_s", "accept_length")) -> list:
    if not data:
        return []
    rows = []
    for arm, by in data.arms.items():
        for metric in metrics:
            x = by.get(metric)
            if x is not None:
                rows.append([arm, metric, str(x.launches), f"{x.cv:.1%}", fmt_num(x.df), str(x.cells), _pct(x.mde_pct)])
    blocks = [Heading("Launch-to-launch noise"),
              Table(["arms", "metric", "launches", "launch CV", "df", "cells", "MDE per cell"], rows, align="ll"),
              Para(NOTE)]
    odd = data.outliers
    if odd:
        blocks.append(Para(f"Launches {OUTLIER_FACTOR:g}x or more away from every other launch of their cell (in the "
                           "CVs above; a one-time cost such as kernels compiled on a fresh machine, or a launch that "
                           "did not serve like the others: look at its log before trusting a comparison):"))
        blocks.append(Items([f"{o.arm} launch {o.launch}, {o.cell}: {o.metric} {fmt_num(o.value)} "
                             f"vs {', '.join(fmt_num(x) for x in o.others)} ({o.factor:.1f}x)" for o in odd]))
    return blocks
