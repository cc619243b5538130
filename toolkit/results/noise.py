"""Launch noise read from archives (the statistics are toolkit/stats/launches.py).

    view = LaunchView(CellReader(archive))
    view.figures(group, "tpot_ms")        # {launch: the launch's median TPOT}
    view.noise("baseline", "tpot_ms")     # Noise pooled over the arm's cells, None with one launch
    cal = find_calibration(root, archive) # the newest `toolkit bench noise` run of this GPU and environment
    NoiseModel(view_a, view_b, cal_view).sides("baseline", "tpot_ms")   # (noise of A, noise of B) or None

Where a comparison's launch noise comes from, in order: measured in the runs (a side with two or more
launches; a side with one borrows the other's), a calibration run (`toolkit bench noise`: an A/A run of
the same environment on the same GPU model, found under the same results root), else none (the caller
falls back to the default floor, toolkit.stats.DEFAULT_FLOOR_PCT).

A calibration made on a busy host (a cell of it with a `busy-host` check: toolkit/bench/hostload.py's record
of other load, steal or another toolkit run while it ran) is refused: its launch noise is the other work's, and
a verdict that used it would be as lenient as that load was large (issue 42: one was ±2504 %). find_calibration
skips it for an older clean one and says why in `refused`; the verdicts print that reason beside the fallback.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.results.archive import Archive, open_archive
from toolkit.results.compact import read_text
from toolkit.results.cells import CellReader, Group
from toolkit.stats import MachineVar, Noise, geomean_of_logs, launch_noise, logs

Key = tuple[str, str]  # arm, metric


class LaunchView:
    """One archive seen launch by launch (figures cached)."""

    def __init__(self, reader: CellReader, source: str = "runs"):
        self.reader = reader
        self.source = source
        self.groups: dict[Group, list[str]] = reader.groups()
        self._fig: dict[tuple[Group, str], dict[int, float]] = {}
        self._noise: dict[Key, Noise | None] = {}
        self._arm_n: dict[str, int] = {}

    @property
    def run_id(self) -> str:
        return self.reader.archive.run_id

    def launches(self, group: Group) -> int:
        return len(self.reader.by_launch(self.groups.get(group, [])))

    def arm_launches(self, arm: str) -> int:
        """The most launches any cell of the arm has (1 for every archive older than `launches:`)."""
        if arm not in self._arm_n:
            self._arm_n[arm] = max((self.launches(g) for g in self.groups if g[0] == arm), default=0)
        return self._arm_n[arm]

    def figures(self, group: Group, metric: str) -> dict[int, float]:
        k = (group, metric)
        if k not in self._fig:
            self._fig[k] = self.reader.launch_figures(self.groups.get(group, []), metric)
        return self._fig[k]

    def arm_groups(self, arm: str) -> list[Group]:
        return sorted(g for g in self.groups if g[0] == arm)

    def noise(self, arm: str, metric: str) -> Noise | None:
        """The arm's launch noise of a metric, pooled over its cells; None when no cell has two launches."""
        k = (arm, metric)
        if k not in self._noise:  # one launch everywhere: nothing to measure (and no figures to compute)
            self._noise[k] = None if self.arm_launches(arm) < 2 else \
                launch_noise({g: self.figures(g, metric) for g in self.arm_groups(arm)}, self.source)
        return self._noise[k]

    def arm_figures(self, arm: str, metric: str, groups: list[Group]) -> dict[int, float]:
        """Per launch, the geometric mean of the figures of `groups` (launches that have all of them)."""
        figs = [logs(self.figures(g, metric)) for g in groups]
        if not figs:
            return {}
        common = set.intersection(*(set(f) for f in figs))
        return {la: geomean_of_logs([f[la] for f in figs]) for la in sorted(common)}

    def arm_noise(self, arm: str, metric: str) -> Noise | None:
        """The noise of a launch's geometric mean over the arm's cells (what a geomean comparison varies by)."""
        n = self.noise(arm, metric)
        if n is None or n.arm_var is None:
            return None
        return Noise(var=n.arm_var, df=n.arm_df or 1.0, source=n.source, cells=n.cells, launches=n.launches)


def _manifest(run: Path) -> dict | None:
    try:
        return json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _status(run: Path) -> str | None:
    try:
        return json.loads(read_text(run / "summary.json")).get("status")
    except (OSError, ValueError):
        return None


def busy_host(archive: Archive) -> str | None:
    """Why the run's host was busy (its cells' `busy-host` checks: the host-load record), or None: a quiet
    host, or an archive from before the host was watched."""
    busy = [c for c in archive.cells if any(k.check == "busy-host" for k in c.checks)]
    if not busy:
        return None
    first = next(k for k in busy[0].checks if k.check == "busy-host")
    return (f"its host was busy in {len(busy)} of {len(archive.cells)} cells (e.g. {busy[0].arm} {busy[0].domain}: "
            f"{first.message})")


def refusal(cal: Archive) -> str | None:
    """Why a noise calibration may not be used by a verdict (None: it may)."""
    why = busy_host(cal)
    return f"calibration {cal.run_id} refused: {why}" if why else None


def find_calibration(root: Path, archive: Archive, refused: list[str] | None = None) -> Archive | None:
    """The newest complete noise-calibration run under root made with the archive's environment (hash) on its
    GPU model (as `results list` names it), other than the archive itself. One made on a busy host is skipped
    (`refusal`), its reason appended to `refused`."""
    from toolkit.results.facts import host_view

    env = archive.manifest.environment.hash
    gpu = host_view(archive.manifest.host.primary).get("gpus")
    if not env:
        return None
    for manifest in sorted(Path(root).glob("*/*/manifest.json"), key=lambda p: p.parent.name, reverse=True):
        run = manifest.parent
        raw = _manifest(run)
        if (not raw or raw.get("purpose") != "noise-calibration" or (raw.get("environment") or {}).get("hash") != env
                or run.resolve() == Path(archive.path).resolve() or _status(run) != "complete"):
            continue
        try:
            cal = open_archive(run)
        except Exception:  # noqa: BLE001 - a corrupt run is no calibration; `results verify` names it
            continue
        if host_view(cal.manifest.host.primary).get("gpus") == gpu:
            why = refusal(cal)
            if why is None:
                return cal
            if refused is not None:
                refused.append(why)
    return None


class NoiseModel:
    """The launch noise of each side of a comparison of run A with run B, per (arm, metric)."""

    def __init__(self, a: LaunchView, b: LaunchView, calibration: LaunchView | None = None,
                 machine: dict[str, MachineVar] | None = None):
        self.a, self.b, self.calibration = a, b, calibration
        self.machine = machine  # the runs ran on different machines: per metric, the between-machine variance

    def machine_var(self, metric: str) -> MachineVar | None:
        """The between-machine variance a comparison of this metric adds (None: one machine, or unknown)."""
        return (self.machine or {}).get(metric)

    def calibrated(self, arm: str, metric: str) -> Noise | None:
        """The calibration's noise of this arm (or, for an arm it lacks, its noisiest arm's)."""
        cal = self.calibration
        if cal is None:
            return None
        n = cal.noise(arm, metric)
        if n is None:
            arms = sorted({g[0] for g in cal.groups})
            found = [x for x in (cal.noise(a, metric) for a in arms) if x is not None]
            n = max(found, key=lambda x: x.var, default=None)
            if n is not None:
                n = Noise(var=n.var, df=n.df, source=f"{n.source} (noisiest arm: {arm} not in it)", cells=n.cells,
                          launches=n.launches, arm_var=n.arm_var, arm_df=n.arm_df)
        return n

    def sides(self, arm: str, metric: str, level: str = "cell") -> tuple[Noise, Noise] | None:
        """(noise of A, noise of B) for a cell comparison (level "cell") or an arm's geometric mean over its
        cells (level "arm"); None when neither run nor a calibration shows it (the default floor applies)."""
        get = (lambda v: v.noise(arm, metric)) if level == "cell" else (lambda v: v.arm_noise(arm, metric))
        na, nb = get(self.a), get(self.b)
        if na is not None and nb is not None:
            return na, nb
        if na is not None or nb is not None:
            x = na or nb
            return x, x
        if self.calibration is not None:
            c = self.calibrated(arm, metric) if level == "cell" else self.calibration.arm_noise(arm, metric)
            if c is not None:
                return c, c
        return None

    def arm_unknown(self, arm: str, metric: str) -> str:
        """Why an arm's geometric mean has no launch noise (sides(arm, metric, level="arm") is None)."""
        cal = self.calibration
        if cal is not None and arm not in {g[0] for g in cal.groups}:
            return (f"{cal.source} has no arm {arm} (its cells borrowed the noisiest arm's launch noise; the noise "
                    "of the arm's geometric mean over its cells cannot be borrowed)")
        if cal is not None or max(self.a.arm_launches(arm), self.b.arm_launches(arm)) >= 2:
            return f"no launch noise of the arm's geometric mean of {metric} (no cells share a set of launches)"
        return "one launch a side and no calibration"


def calibration_view(root: Path | None, *archives: Archive, objectives=None,
                     refused: list[str] | None = None) -> LaunchView | None:
    """The calibration for the first archive that has one under root (only looked for when a side of the
    comparison has a single launch); `refused`: why a busy-host one was not used (find_calibration)."""
    if root is None:
        return None
    for arch in archives:
        cal = find_calibration(root, arch, refused)
        if cal is not None:
            return LaunchView(CellReader(cal, objectives), source=f"calibration {cal.run_id}")
    return None


__all__ = ["LaunchView", "NoiseModel", "busy_host", "calibration_view", "find_calibration", "refusal"]
