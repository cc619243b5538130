"""The server launch as the unit of replication: the statistics every verdict calls (`results diff`,
`results reproduce`, the paired speed-ups and the advice made from them, SLO certainty, tune's
confirmation). Numbers only: toolkit/results/noise.py reads them from archives.

Why: every request of an arm comes from one server launch, and what changes between launches (CUDA
graphs, memory layout, clocks, batch composition, the tokens themselves) moves all of them together.
Requests are not independent samples of "the arm", launches are. So:

- per (cell, metric) one figure per launch (the launch's median for request metrics, the cell figure for
  cell metrics), on the log scale, so a change is a ratio and a spread a coefficient of variation;
- the launch-to-launch variance per (arm, metric), pooled over the arm's cells (`launch_noise`): each
  cell's launches give (n - 1) degrees of freedom, and the pooled estimate assumes the arm's cells share
  one launch CV. Its degrees of freedom come from a two-way (cell x launch) decomposition
  (Satterthwaite): when launches move all cells of the arm together, the cells' deviations are not
  independent and the df shrink towards (launches - 1), as they must;
- the variance a cell's test or interval uses is the cell's own (`cell_noise`): its launches' variance, the
  sides of a comparison pooled, with their (n - 1) df summed. Why not the arm's pool, or the pool shrunk
  towards the cell (a scaled inverse-chi-square prior) or replaced only in an odd cell (an F test): one pool
  is calibrated only on average over the cells. Cells differ (launch noise rises with concurrency; a cell can
  be bimodal), and with 3 launches a side the data cannot tell a noisy cell from bad luck well enough for
  either fix: in benchmarks/cellvar_sim.py (6 cells, 3 launches a side) the pool calls a bimodal cell changed
  in ~20 % of A/A pairs and its quiet siblings in ~1 %, shrinkage (prior df estimated from the cells' spread,
  limma style) still ~15 %, an F test at 5 % ~17 %; the cell's own variance is exact under normal launch
  effects whatever the other cells do (4-7 % in every cell, bimodal and heavy-tailed included). The price is
  df: (n_a - 1) + (n_b - 1), 4 at 3 launches a side, so wider intervals than the pool claimed;
  the pool (`launch_noise`) stays for what has no launches of its own (a side of one launch borrowing a
  calibration's) and for the arm's geometric mean (its launch-to-launch variance, arm_var);
- the machine as a level above the launch (`MachineVar`): two runs on different machines differ by their
  machines' effects as well, which launches on one machine never average away; `compare(..., machine=)`
  (toolkit/stats/comparisons.py) adds twice the between-machine variance (a prior per metric, `machine_prior`, or
  one estimated from committed cross-machine A/A pairs, `machine_var_from_pairs`).

What is done with the noise is toolkit/stats/comparisons.py (tests and intervals on the log ratio) and
toolkit/stats/planning.py (power, launches needed, minimum detectable effect).

With one launch on a side its launch variance cannot be seen from the run: the caller uses the other
side's, a calibration run's (`toolkit bench noise`), or, where there is none, the default launch CV
(DEFAULT_LAUNCH_CV) and the floor it implies (DEFAULT_FLOOR_PCT). docs/results.md#launch-noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from toolkit.stats.scale import cv_of_var, floor_pct, logs, satterthwaite

# The launch CV assumed when no run shows it: the committed H200 A/A pair (docs/results.md#launch-noise)
# moved stable arms' cells by 5-13 % (RMS, one launch a side) and every arm's geomean by at most 19 %.
DEFAULT_LAUNCH_CV = 0.10
DEFAULT_FLOOR_PCT = round(floor_pct(DEFAULT_LAUNCH_CV))  # 32 %


@dataclass(frozen=True)
class Noise:
    """The launch-to-launch spread of one per-launch figure, on the log scale.

    var: the variance of one launch's log figure (between launches, plus the sampling noise of the
    figure within a launch); df its degrees of freedom (inf: taken as known); arm_var / arm_df the same
    for a launch's mean over the arm's cells (what a geometric mean over cells varies by)."""

    var: float
    df: float
    source: str = "runs"  # runs | calibration <run id> | default
    cells: int = 0
    launches: int = 0
    arm_var: float | None = None
    arm_df: float | None = None

    @property
    def cv(self) -> float:
        """The coefficient of variation of one launch's figure (sd of its log; exact: sqrt(e^var - 1))."""
        return cv_of_var(self.var)

    def text(self) -> str:
        if self.source == "default":
            return f"default launch CV {self.cv:.0%} (no launch noise measured)"
        df = "" if math.isinf(self.df) else f", df {self.df:.1f}"
        return f"{self.source}: launch CV {self.cv:.1%}{df}"


DEFAULT = Noise(var=math.log1p(DEFAULT_LAUNCH_CV ** 2), df=math.inf, source="default")
SHARED = Noise(var=0.0, df=math.inf, source="shared")  # arms served by one server: one launch, nothing to add


def _two_way(rows: list[list[float]]) -> tuple[float, float, float, float] | None:
    """Cells x launches (balanced), log figures: (MS launches, df, MS residual, df); None when G < 2."""
    g, n = len(rows), len(rows[0])
    if g < 2 or n < 2:
        return None
    grand = sum(map(sum, rows)) / (g * n)
    cm = [sum(r) / n for r in rows]
    lm = [sum(r[j] for r in rows) / g for j in range(n)]
    ss_l = g * sum((x - grand) ** 2 for x in lm)
    ss_e = sum((rows[i][j] - cm[i] - lm[j] + grand) ** 2 for i in range(g) for j in range(n))
    return ss_l / (n - 1), n - 1, ss_e / ((g - 1) * (n - 1)), (g - 1) * (n - 1)


def _balanced(cells: dict[Any, dict[Any, float]]) -> list[list[float]]:
    """The largest cells x launches block every cell of which has every launch (launches present in most
    cells first)."""
    count: dict[Any, int] = {}
    for v in cells.values():
        for launch in v:
            count[launch] = count.get(launch, 0) + 1
    best: list[list[float]] = []
    for k in sorted(set(count.values()), reverse=True):
        keep = sorted(launch for launch, c in count.items() if c >= k)
        rows = [[v[launch] for launch in keep] for v in cells.values() if all(launch in v for launch in keep)]
        if len(keep) >= 2 and len(rows) * len(keep) > sum(map(len, best)):
            best = rows
    return best


def launch_noise(by_cell: Mapping[Any, Mapping[Any, float] | Iterable[float]], source: str = "runs") -> Noise | None:
    """The launch noise of one (arm, metric) from its cells' per-launch figures (cell -> {launch: figure},
    or cell -> [figure per launch]). None when no cell has two launches.

    var: the pooled within-cell variance of the log figures, sum over cells of sum (y - cell mean)^2 over
    sum (n_cell - 1): unbiased for one launch's variance whether or not launches move cells together.
    df: Satterthwaite's, from the two-way decomposition of the largest balanced block (cells x launches):
    var = (MS_launch + (G - 1) MS_resid) / G, so df runs from G (n - 1) (launch effects independent
    across cells) down to n - 1 (one shared launch effect); never more than sum (n_cell - 1)."""
    cells = {k: logs(v) for k, v in by_cell.items()}
    cells = {k: v for k, v in cells.items() if len(v) >= 2}
    if not cells:
        return None
    ss = sum(sum((x - sum(v.values()) / len(v)) ** 2 for x in v.values()) for v in cells.values())
    dof = sum(len(v) - 1 for v in cells.values())
    var = ss / dof
    n = max(len(v) for v in cells.values())
    rows = _balanced(cells)
    tw = _two_way(rows) if rows else None
    if tw is None:
        df = float(n - 1) if len(cells) > 1 else float(dof)  # no block to tell: as if launches were shared
        arm_var, arm_df = (var if len(cells) == 1 else None), (float(dof) if len(cells) == 1 else None)
    else:
        ms_l, df_l, ms_e, df_e = tw
        g = len(rows)
        a, b = ms_l / g, (g - 1) * ms_e / g
        den = a * a / df_l + b * b / df_e
        df = min(float(dof), (a + b) ** 2 / den) if den > 0 else float(dof)
        arm_var, arm_df = ms_l / g, float(df_l)
    return Noise(var=var, df=max(df, 1.0), source=source, cells=len(cells), launches=n, arm_var=arm_var,
                 arm_df=arm_df)


def cell_noise(*figures: Mapping[Any, float] | Iterable[float], source: str = "runs") -> Noise | None:
    """One cell's own launch noise from its per-launch figures on each side (a comparison's two runs, or one
    series): the variance of the log figures about each side's mean, pooled over the sides with two or more
    launches (sum of squares over sum of (n - 1)), with those df. None when no side has two launches (the
    caller falls back to a pool: a calibration's, `launch_noise`). The module docstring says why not the pool."""
    sides = [list(logs(f).values()) for f in figures]
    sides = [x for x in sides if len(x) >= 2]
    if not sides:
        return None
    ss = sum(sum((v - sum(x) / len(x)) ** 2 for v in x) for x in sides)
    dof = sum(len(x) - 1 for x in sides)
    return Noise(var=ss / dof, df=float(dof), source=source, cells=1, launches=max(map(len, sides)))


@dataclass(frozen=True)
class MachineVar:
    """The between-machine variance of one metric on the log scale (a machine's effect, shared by every launch
    on it), with its df (inf for a prior taken as known) and where it came from (the committed cross-machine
    A/A pairs, or the default prior MACHINE_PRIOR_CV)."""

    var: float
    df: float = math.inf
    source: str = "default"

    @property
    def cv(self) -> float:
        return cv_of_var(self.var)

    def text(self) -> str:
        return f"machine level CV {self.cv:.0%} ({self.source})"


# The between-machine CV assumed per metric family when no committed cross-machine A/A pairs show it
# (conservative: the replay on another machine in issue 42 moved every cell alike, TTFT -21 % [-34, -5] and
# TPOT -13 %; the H200 tune's confirmation saw 15-24 % between machines). A difference between two machines
# varies by sqrt(2) times this CV.
MACHINE_PRIOR_CV = {"ttft": 0.15, "tpot": 0.10, "itl": 0.10, "e2e": 0.10, "throughput": 0.10}
MACHINE_PRIOR_SOURCE = ("default prior (issue 42: a replay on another machine moved TTFT -21 %, TPOT -13 %; "
                        "no committed cross-machine A/A pairs)")


def machine_prior(metric: str) -> MachineVar:
    """The default between-machine variance of a metric (MACHINE_PRIOR_CV by the metric's family: TTFT for
    names starting with ttft, else 10 %)."""
    cv = MACHINE_PRIOR_CV["ttft"] if metric.startswith("ttft") else MACHINE_PRIOR_CV["tpot"]
    return MachineVar(var=math.log1p(cv * cv), df=math.inf, source=MACHINE_PRIOR_SOURCE)


def machine_var_from_pairs(pairs: list[tuple[float, float]]) -> MachineVar | None:
    """The between-machine variance from A/A pairs across machines. Each pair is (d, se2): d the log ratio of
    the two machines' means of one arm and metric, se2 = var_a / n_a + var_b / n_b what launch noise alone
    gives it. E[d^2] = 2 machine_var + se2, so the moment estimate is max(0, mean(d^2 - se2) / 2), with one df
    per pair. None without pairs."""
    if not pairs:
        return None
    v = sum(d * d - se2 for d, se2 in pairs) / len(pairs) / 2
    return MachineVar(var=max(0.0, v), df=float(len(pairs)), source=f"{len(pairs)} cross-machine A/A pair(s)")


def with_machine(noise: Noise, machine_var: float, machine_df: float = math.inf, source: str = "") -> Noise:
    """The noise of a launch from a machine drawn at random: launch variance plus the between-machine variance
    (a random machine effect shared by every launch on it). What a comparison of runs on two machines uses
    through `compare(..., machine_var=...)`; this is for single figures and their text."""
    var = noise.var + machine_var
    df = satterthwaite([noise.var, machine_var], [noise.df, machine_df]) if machine_var > 0 else noise.df
    return Noise(var=var, df=df, source=f"{noise.source} + {source or 'machine level'}", cells=noise.cells,
                 launches=noise.launches, arm_var=noise.arm_var, arm_df=noise.arm_df)
