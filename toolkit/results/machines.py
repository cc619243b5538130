"""The machine as a level above the launch: which machine each launch of a run ran on, whether a run's launches
span machines, whether the two sides of a comparison ran on different machines, and the between-machine
variance such a comparison adds (the statistics are toolkit/stats/: MachineVar, compare(machine=)).

    run_machines(archive)              # RunMachines: the machines of its launches, per arm, and where that came from
    cross_machines(a, b)               # CrossMachines: same | different | unknown, in words
    machine_variance(root, metrics)    # {metric: MachineVar}: from committed cross-machine A/A pairs, else the prior

A machine is its host name and the GPUs the launch used, by UUID (the serial where the UUID is missing). Every
launch records it (LaunchRecord.machine, toolkit.bench.hostinfo.launch_machine); an archive older than that
field falls back to the manifest's host fingerprint (one machine for the whole run, said so), and one without
GPU identities or a host name is an unknown machine, stated as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from toolkit.results.archive import Archive
from toolkit.stats import MachineVar, logs, machine_prior, machine_var_from_pairs
from toolkit.schema.manifest import Fingerprint, MachineRecord

UNKNOWN = "unknown machine"


@dataclass(frozen=True)
class Machine:
    host: str | None
    gpus: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.gpus) or bool(self.host and self.host not in ("localhost", ""))

    def text(self) -> str:
        if not self.known:
            return UNKNOWN
        gpus = ", ".join(g[-12:] for g in self.gpus)
        return f"{self.host or '?'}" + (f" [GPU {gpus}]" if gpus else "")


def machine_of(record: MachineRecord | None) -> Machine | None:
    """A launch record's `machine` ({host, gpus: [uuid]}) as a Machine; None when absent."""
    if record is None:
        return None
    gpus = record.gpus
    return Machine(host=record.host, gpus=tuple(sorted(str(g) for g in gpus)) if isinstance(gpus, list) else ())


def fingerprint_machine(fp: Fingerprint) -> Machine:
    """The machine a host fingerprint describes: its host name and every GPU it lists (UUID, else serial)."""
    ids = [g.identity for g in fp.devices if g.identity]
    return Machine(host=fp.hostname, gpus=tuple(sorted(ids)))


@dataclass
class RunMachines:
    """The machines a run's measured launches ran on. per_arm: arm -> the distinct machines of its launches;
    source: `launches` (each launch recorded its machine), `manifest` (an older archive: the host fingerprint,
    one machine for the run) or `unknown`."""

    per_arm: dict[str, list[Machine]] = field(default_factory=dict)
    source: str = "unknown"

    @property
    def machines(self) -> list[Machine]:
        return sorted({m for ms in self.per_arm.values() for m in ms}, key=lambda m: (m.host or "", m.gpus))

    @property
    def known(self) -> bool:
        return self.source != "unknown" and bool(self.machines) and all(m.known for m in self.machines)

    @property
    def spans(self) -> bool:
        """The run's launches ran on more than one machine (its launch variance then includes the machine level,
        and arms on different machines differ by their machines too)."""
        return self.known and len(self.machines) > 1

    def text(self) -> str:
        if not self.known:
            return f"{UNKNOWN} (the archive records no host name or GPU identity)"
        ms = self.machines
        how = "" if self.source == "launches" else " (from the manifest's host fingerprint: the archive predates " \
                                                    "per-launch machines)"
        if len(ms) == 1:
            return ms[0].text() + how
        arms = "; ".join(f"{arm}: {', '.join(m.text() for m in v)}" for arm, v in sorted(self.per_arm.items()))
        return f"{len(ms)} machines ({arms})" + how


def run_machines(archive: Archive) -> RunMachines:
    """The machines of a run's measured launches (warm-ups aside), per arm."""
    launches = archive.derived.launches
    per_arm: dict[str, list[Machine]] = {}
    for arm, recs in launches.items():
        ms = [machine_of(getattr(r, "machine", None)) for r in recs if r.ok]
        if ms and all(m is not None for m in ms):
            per_arm[arm] = sorted(set(ms), key=lambda m: (m.host or "", m.gpus))
    if per_arm and len(per_arm) == len(launches):
        return RunMachines(per_arm, "launches")
    m = fingerprint_machine(archive.manifest.host.primary)
    if not m.known:
        return RunMachines({}, "unknown")
    arms = sorted(set(archive.manifest.arms) | {c.arm for c in archive.cells}) or ["*"]
    return RunMachines({a: [m] for a in arms}, "manifest")


@dataclass(frozen=True)
class CrossMachines:
    """Whether two runs ran on the same machine: `same` (each on one machine, the same), `different` (any other
    known case: the machine level enters their comparison), `unknown` (a side's machine is not recorded)."""

    status: str
    a: str
    b: str

    @property
    def different(self) -> bool:
        return self.status == "different"

    def text(self) -> str:
        if self.status == "same":
            return f"both runs on one machine: {self.a}"
        if self.status == "different":
            return f"the runs ran on different machines: A {self.a}; B {self.b}"
        return f"machines unknown (A {self.a}; B {self.b}): no machine level added"

    def to_dict(self) -> dict:  # json-edge: diff --json
        return {"status": self.status, "a": self.a, "b": self.b}


def cross_machines(a: Archive, b: Archive) -> CrossMachines:
    ma, mb = run_machines(a), run_machines(b)
    if not (ma.known and mb.known):
        status = "unknown"
    elif len(ma.machines) == 1 and ma.machines == mb.machines:
        status = "same"
    else:
        status = "different"
    return CrossMachines(status, ma.text(), mb.text())


def _pairs(root: Path, busy: list[str] | None = None) -> list[tuple[Archive, Archive]]:
    """Committed A/A pairs across machines under root: complete runs of one matrix and environment (hashes) on
    different single machines (a replay of a run is an A/A pair of its arms). A run made on a busy host (a cell
    with a `busy-host` check: noise.busy_host) is screened out, its id appended to `busy`: the other load's
    slowdown would pass for the machines' difference."""
    from toolkit.results.archive import open_archive
    from toolkit.results.noise import busy_host

    runs: dict[tuple[str, str], list[tuple[Archive, Machine]]] = {}
    for manifest in sorted(Path(root).glob("*/*/manifest.json")):
        try:
            arch = open_archive(manifest.parent)
        except Exception:  # noqa: BLE001 - a corrupt run is no pair; `results verify` names it
            continue
        m = arch.manifest
        rm = run_machines(arch)
        if arch.status != "complete" or not (m.matrix.hash and m.environment.hash) or not rm.known \
                or len(rm.machines) != 1:
            continue
        if busy_host(arch) is not None:
            if busy is not None:
                busy.append(arch.run_id)
            continue
        runs.setdefault((m.matrix.hash, m.environment.hash), []).append((arch, rm.machines[0]))
    out = []
    for group in runs.values():
        for i, (x, mx) in enumerate(group):
            out += [(x, y) for y, my in group[i + 1:] if my != mx]
    return out


def _views(a: Archive, b: Archive):
    from toolkit.results.cells import CellReader
    from toolkit.results.noise import LaunchView

    return LaunchView(CellReader(a)), LaunchView(CellReader(b))


def pair_figure(a: Archive, b: Archive, metric: str, views=None) -> tuple[float, float] | None:
    """One cross-machine pair's (d, se2) for a metric: d the mean over the shared cells of the log ratio of the
    launch means (the machines' difference, which moves every cell alike), se2 what the launch noise alone
    gives it: each side's arm-level launch variance (launch_noise's arm_var) over its launches where the runs
    measure it, else 0 (all of the difference charged to the machines: conservative). views: the pair's
    LaunchViews, reused across metrics."""
    va, vb = views or _views(a, b)
    ds = []
    for g in sorted(set(va.groups) & set(vb.groups)):
        fa, fb = list(logs(va.figures(g, metric)).values()), list(logs(vb.figures(g, metric)).values())
        if fa and fb:
            ds.append(sum(fb) / len(fb) - sum(fa) / len(fa))
    if not ds:
        return None
    parts = []
    for arm in sorted({g[0] for g in va.groups} & {g[0] for g in vb.groups}):
        na, nb = va.arm_noise(arm, metric), vb.arm_noise(arm, metric)
        if na is None or nb is None:
            parts = []
            break
        parts.append(na.var / max(1, na.launches) + nb.var / max(1, nb.launches))
    return sum(ds) / len(ds), (sum(parts) / len(parts) if parts else 0.0)


# data-keyed: metric
def machine_variance(root: Path | None, metrics: list[str], judged: tuple[str, ...] = ()) -> dict[str, MachineVar]:
    """Per metric, the between-machine variance: estimated from the committed cross-machine A/A pairs under root
    (machine_var_from_pairs, one df per pair of machines: runs of the same two machines averaged first), else the
    default prior (toolkit.stats.machine_prior). A pair holding one of the `judged` runs (their ids) is left out:
    a comparison's margin never comes from its own data. The source says which, and which runs were screened out
    for a busy host or for being judged."""
    busy: list[str] = []
    pairs = _pairs(root, busy) if root is not None and Path(root).is_dir() else []
    own = [(a, b) for a, b in pairs if a.run_id in judged or b.run_id in judged]
    pairs = [p for p in pairs if p not in own]
    screened = (f"; {len(busy)} run(s) made on a busy host left out ({', '.join(busy[:3])}"
                + (" ..." if len(busy) > 3 else "") + ")") if busy else ""
    if own:
        screened += f"; {len(own)} pair(s) holding a judged run left out (a margin never comes from its own data)"
    views = [_views(a, b) for a, b in pairs]
    ids = ", ".join(f"{a.run_id}/{b.run_id}" for a, b in pairs[:3]) + (" ..." if len(pairs) > 3 else "")
    out = {}
    keys = [frozenset((run_machines(a).machines[0], run_machines(b).machines[0])) for a, b in pairs]
    for metric in metrics:
        # pairs of the same two machines share those machines' effects: averaged into one figure, one df
        by: dict[frozenset, list[tuple[float, float]]] = {}
        for k, (a, b), v in zip(keys, pairs, views):
            f = pair_figure(a, b, metric, v)
            if f is not None:
                by.setdefault(k, []).append(f)
        figs = [(sum(d for d, _ in fs) / len(fs), sum(x for _, x in fs) / len(fs)) for fs in by.values()]
        est = machine_var_from_pairs(figs)
        if est is not None:
            out[metric] = MachineVar(var=est.var, df=est.df, source=f"{est.source} under {root}: {ids}{screened}")
        else:
            prior = machine_prior(metric)
            out[metric] = MachineVar(var=prior.var, df=prior.df, source=prior.source + screened) if screened else prior
    return out


def cv_text(v: MachineVar) -> str:
    return f"{v.cv:.0%}"


__all__ = ["CrossMachines", "Machine", "RunMachines", "cross_machines", "fingerprint_machine", "machine_of",
           "machine_variance", "pair_figure", "run_machines"]
