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
So is a calibration older than the environment hash: one of the same Environment (manifest `environment.name`)
made for another hash than the runs judged (`stale`): the spec changed since, and its noise is the old one's.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from toolkit.results.archive import Archive, open_archive
from toolkit.results.compact import read_text
from toolkit.results.cells import CellReader, Group
from toolkit.schema.manifest import NOISE_CALIBRATION
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

    def figures(self, group: Group, metric: str) -> dict[int, float]:  # data-keyed: launch
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

    def arm_figures(self, arm: str, metric: str, groups: list[Group]) -> dict[int, float]:  # data-keyed: launch
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


def _manifest(run: Path) -> dict | None:  # json-edge: manifest.json as read
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


def stale(cal: Archive, hashes: Collection[str | None]) -> str | None:
    """Why a calibration is older than the environment it would judge (None: it is not): it was made for
    another hash than every judged run's. A calibration measures one Environment as it was hashed; once the
    spec changed (a flag, a version, a preset), its launch noise is the old environment's."""
    had = cal.manifest.environment.hash
    judged = sorted({h for h in hashes if h})
    if not judged or had in judged:
        return None
    name = cal.manifest.environment.name or "?"
    runs = " or ".join(h[:12] for h in judged)
    return (f"calibration {cal.run_id} refused: it was made for environment {name} hash {(had or 'none')[:12]}, "
            f"the runs judged are hash {runs} (the Environment changed since it was calibrated); re-run "
            "`toolkit bench noise MATRIX` for this environment, or give the verdict a margin of its own "
            "(`bench reproduce --tolerance PCT`) or runs that measure their own noise (`launches: 3`)")


def refusal(cal: Archive, *judged: Archive) -> str | None:
    """Why a noise calibration may not be used by a verdict on `judged` (None: it may): made on a busy host,
    or made for another environment hash than every judged run's (`stale`)."""
    why = busy_host(cal)
    if why:
        return f"calibration {cal.run_id} refused: {why}"
    return stale(cal, [a.manifest.environment.hash for a in judged]) if judged else None


def newest_calibration(root: Path, env_hash: str | None, env_name: str | None = None, gpu: str | None = None,
                       *, exclude: Path | None = None, refused: list[str] | None = None,
                       judged: Collection[str | None] = ()) -> Archive | None:
    """The newest complete noise-calibration run under root made with env_hash (on the GPU model `gpu`, as
    `results list` names it; None: any), other than `exclude`. Skipped with the reason appended to `refused`:
    one made on a busy host, and one of the same Environment (`env_name`) made for another hash than
    env_hash and `judged` (the other hashes a comparison judges: those are found for their own runs)."""
    from toolkit.results.facts import gpu_model

    if not env_hash or not Path(root).is_dir():
        return None
    ok = {env_hash, *(h for h in judged if h)}
    for manifest in sorted(Path(root).glob("*/*/manifest.json"), key=lambda p: p.parent.name, reverse=True):
        run = manifest.parent
        raw = _manifest(run)
        if not raw or raw.get("purpose") != NOISE_CALIBRATION or _status(run) != "complete" \
                or (exclude is not None and run.resolve() == Path(exclude).resolve()):
            continue
        env = raw.get("environment") or {}
        mine = env.get("hash") == env_hash
        if not mine and (env.get("hash") in ok or not env_name or env.get("name") != env_name):
            continue  # another run's hash, or another Environment: not this one's calibration
        try:
            cal = open_archive(run)
        except Exception:  # noqa: BLE001 - a corrupt run is no calibration; `results verify` names it
            continue
        if gpu is not None and gpu_model(cal.manifest.host.primary) != gpu:
            continue
        why = refusal(cal) or (None if mine else stale(cal, ok))
        if why is None:
            return cal
        if refused is not None:
            refused.append(why)
    return None


def find_calibration(root: Path, archive: Archive, refused: list[str] | None = None,
                     judged: Collection[str | None] = ()) -> Archive | None:
    """The newest usable noise calibration of the archive's environment (hash) and GPU model under root
    (newest_calibration); refused ones (busy host, an older hash of the same Environment) go to `refused`."""
    from toolkit.results.facts import gpu_model

    env = archive.manifest.environment
    return newest_calibration(root, env.hash, env.name, gpu_model(archive.manifest.host.primary),
                              exclude=Path(archive.path), refused=refused, judged=judged)


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
    comparison has a single launch); `refused`: why one was not used (a busy host, an older hash: refusal)."""
    if root is None:
        return None
    hashes = [a.manifest.environment.hash for a in archives]
    for arch in archives:
        cal = find_calibration(root, arch, refused, judged=hashes)
        if cal is not None:
            return LaunchView(CellReader(cal, objectives), source=f"calibration {cal.run_id}")
    return None


__all__ = ["LaunchView", "NoiseModel", "busy_host", "calibration_view", "find_calibration", "newest_calibration",
           "refusal", "stale"]
