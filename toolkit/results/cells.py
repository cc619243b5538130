"""A cell's metrics read back from an archive, through the metric registry (toolkit/schema/metrics.py).
`results show`, `results diff`, the report and its plots all read them here, so one cell reads the
same in every command.

- request metrics: recomputed with `describe` from the per-request columns (.npz), so every archive,
  whatever CI method or column names its writer used, reads with the registry's conventions. A cell
  without per-request samples (a summary-only import) falls back to its stored Stat.
- chunk and cell metrics: the cell summary's stored Stat (computed from the records when the cell was
  written), normalised to its kind (a chunk metric has no CI; a cell metric is one figure).
- a group of repeats (one arm, domain, concurrency, output length): request metrics pool the requests;
  stored figures are averaged over the repeats. A group spans every server launch of the arm: `by_launch`
  splits it, and `launch_figures` gives one figure per launch (what toolkit/results/noise.py compares).
- under service-level objectives (toolkit/schema/slo.py) also goodput_req_s, goodput_tok_s and
  slo_attainment, computed from the per-request columns as the run is read (never stored).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from toolkit.results.archive import Archive
from toolkit.schema.metrics import METRICS, NAMES, REQUEST_METRICS, describe, figure, figure_of, share
from toolkit.schema.records import CellSummary, Stat
from toolkit.schema.slo import CellSlo, Objectives, evaluate

Group = tuple[str, str, float, int]  # arm, domain, level (concurrency, or rate when open loop), output_len


def normalised(name: str, s: Stat) -> Stat:
    """A stored Stat as the registry defines its metric (old archives kept a bootstrap CI beside pooled
    figures, and the per-request median beside the cell's acceptance length)."""
    kind = METRICS[name].kind
    if kind == "cell":
        return figure(figure_of(s), s.n)
    if kind == "chunk":
        return s.model_copy(update={"ci_low": None, "ci_high": None})
    return s


def stored_stats(c: CellSummary) -> dict[str, Stat]:  # data-keyed: metric
    """The registry metrics a cell summary stores, normalised (no archive needed: the runner's view)."""
    return {m: normalised(m, c.metrics[m]) for m in NAMES if m in c.metrics and c.status == "ok"}


def _mean_of(stats: list[Stat], name: str) -> Stat:
    if len(stats) == 1:
        return normalised(name, stats[0])
    n = sum(s.n for s in stats)
    if METRICS[name].kind == "cell":
        vals = [v for v in (figure_of(s) for s in stats) if v is not None]
        return figure(float(np.mean(vals)) if vals else None, n)

    def avg(field: str) -> float | None:
        vals = [getattr(s, field) for s in stats if getattr(s, field) is not None]
        return float(np.mean(vals)) if vals else None

    return Stat(mean=avg("mean"), p50=avg("p50"), p90=avg("p90"), p99=avg("p99"), n=n,
                unreliable=sorted({u for s in stats for u in s.unreliable}))


def slo_stats(c: CellSlo) -> dict[str, Stat]:  # data-keyed: metric
    """A cell's goodput and attainment as registry metrics (what show and diff print and compare)."""
    if c.status != "ok":
        return {}
    out = {"goodput_req_s": figure(c.goodput_req_s, c.met), "goodput_tok_s": figure(c.goodput_tok_s, c.met),
           "slo_attainment": share(c.met, c.n)}
    return {m: s for m, s in out.items() if s.p50 is not None}


class CellReader:
    """Reads the cells of one archive; each cell's columns are loaded once. With objectives, every
    cell's metrics include goodput and attainment under them."""

    def __init__(self, archive: Archive, objectives: Objectives | None = None):
        self.archive = archive
        self.objectives = objectives
        self._cols: dict[str, dict[str, np.ndarray]] = {}
        self._launch_stats: dict[tuple, dict[str, Stat]] = {}

    def groups(self) -> dict[Group, list[str]]:  # data-keyed: group
        by: dict[Group, list[str]] = defaultdict(list)
        for key, c in self.archive.cell_map.items():
            by[(c.arm, c.domain, c.level, c.output_len)].append(key)
        return dict(by)

    def _ok(self, keys: list[str]) -> list[str]:
        return [k for k in keys if self.archive.cell_map[k].status == "ok"]

    def _columns(self, key: str) -> dict[str, np.ndarray]:  # data-keyed: column name
        if key not in self._cols:
            self._cols[key] = self.archive.columns(key)
        return self._cols[key]

    def samples(self, keys: list[str]) -> dict[str, np.ndarray]:  # data-keyed: metric
        """Per request metric, the finite per-request values of the ok cells among keys, pooled (float64).
        Empty when none of them has per-request samples."""
        ok = self._ok(keys)
        cols = [self._columns(k) for k in ok]
        if not any(len(c.get("e2e_ms", ())) for c in cols):
            return {}
        out = {}
        for m in REQUEST_METRICS:
            parts = [c[m] for c in cols if m in c]
            x = np.concatenate(parts).astype(np.float64) if parts else np.empty(0)
            out[m] = x[np.isfinite(x)]
        return out

    # data-keyed: metric
    def stats(self, keys: list[str], samples: dict[str, np.ndarray] | None = None) -> dict[str, Stat]:
        """Every registry metric of the ok cells among keys (one cell, or the repeats of a group)."""
        ok = self._ok(keys)
        if not ok:
            return {}
        samples = self.samples(keys) if samples is None else samples
        out: dict[str, Stat] = {}
        for m in NAMES:
            if samples and m in REQUEST_METRICS:
                s = describe(samples[m])
            else:
                stored = [self.archive.cell_map[k].metrics[m] for k in ok if m in self.archive.cell_map[k].metrics]
                s = _mean_of(stored, m) if stored else Stat(n=0)
            if s.p50 is not None:
                out[m] = s
        if self.objectives is not None:
            out.update(slo_stats(self.slo(keys)))
        return out

    def slo(self, keys: list[str]) -> CellSlo:
        """One cell (or the repeats of a group) against the reader's objectives."""
        assert self.objectives is not None
        return evaluate([self.archive.cell_map[k] for k in keys], [self._columns(k) for k in keys], self.objectives)

    def by_launch(self, keys: list[str]) -> dict[int, list[str]]:  # data-keyed: launch
        """The ok cells among keys, per server launch (launch -> its repeats' keys)."""
        out: dict[int, list[str]] = defaultdict(list)
        for k in self._ok(keys):
            out[self.archive.cell_map[k].launch].append(k)
        return dict(sorted(out.items()))

    def launch_figures(self, keys: list[str], metric: str) -> dict[int, float]:  # data-keyed: launch
        """One figure of `metric` per launch of the group: the launch's median for request metrics (its repeats'
        requests pooled), its figure (averaged over repeats) for cell and chunk metrics, its share for shares."""
        out = {}
        for launch, ks in self.by_launch(keys).items():
            k = tuple(ks)
            if k not in self._launch_stats:
                self._launch_stats[k] = self.stats(ks)
            s = self._launch_stats[k].get(metric)
            v = s.p50 if s is not None else None
            if v is not None and METRICS[metric].kind == "share" and s.n:
                v = max(v, 0.5 / s.n)  # a share of 0 has no log: half a request, the usual continuity correction
            if v is not None:
                out[launch] = v
        return out

    def cell(self, key: str) -> dict[str, Stat]:  # data-keyed: metric
        return self.stats([key])

    def group_stats(self) -> dict[Group, dict[str, Stat]]:  # data-keyed: group
        return {g: self.stats(keys) for g, keys in sorted(self.groups().items())}
