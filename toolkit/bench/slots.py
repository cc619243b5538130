"""Where a run's arms run: slots, each with a typed target (this machine's engine, a host of a Hosts spec, URLs
someone else serves). Arms on one slot run one after another; slots run side by side, and only slots on
separate hardware may.

    slots = plan_slots(spec, engine="sglang", hosts_spec=hosts)   # toolkit.bench.plan.plan_run calls it
    slots[0].target                  # LocalTarget(gpus='0,1') | HostTarget(host, spec, hosts_path) | ExternalTarget(urls)
    slots[0].target.record()         # what the manifest's slots[].target says
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from toolkit import engines
from toolkit.specs import LoadedSpec, load_spec
from toolkit.specs.hosts import Host
from toolkit.specs.matrix import Matrix


@dataclass(frozen=True)
class LocalTarget:
    """This machine's engine; `gpus`: the GPU set its arms see (CUDA_VISIBLE_DEVICES), None: all of them."""

    gpus: str | None = None
    kind: ClassVar[str] = "local"

    def record(self) -> dict:
        return {"kind": "local", **({"gpus": self.gpus} if self.gpus else {})}


@dataclass(frozen=True)
class HostTarget:
    """A host of the matrix's Hosts spec (`host`: its name there), reached over ssh."""

    host: str
    spec: Host
    hosts_path: str
    kind: ClassVar[str] = "hosts"

    def record(self) -> dict:  # the manifest names the host; its address and user stay in the Hosts spec
        return {"kind": "hosts", "host": self.host, "hosts_path": self.hosts_path}

    @property
    def docker_url(self) -> str:
        user = f"{self.spec.user}@" if self.spec.user else ""
        return f"ssh://{user}{self.spec.address}:{self.spec.port}"


@dataclass(frozen=True)
class ExternalTarget:
    """Servers someone else started: one base URL per arm."""

    urls: dict[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "external"

    def record(self) -> dict:
        return {"kind": "external", "urls": dict(self.urls)}


@dataclass(frozen=True)
class SlurmTarget:
    """Slurm batch jobs, one per arm (toolkit.slurm): the scheduler places them; the node each server came up
    on is learnt when it starts (the launch record's `slurm`, the manifest's slurm.jobs). `loadgen`: where each
    cell's load generator runs, `job-step` (beside the server, in its job) or `submit-host` (this host)."""

    partition: str | None = None
    launcher: str = "process"
    loadgen: str = "job-step"
    kind: ClassVar[str] = "slurm"

    def record(self) -> dict:
        return {"kind": "slurm", "launcher": self.launcher, "loadgen": self.loadgen,
                **({"partition": self.partition} if self.partition else {})}


# Where a slot's arms run. A new kind is one more class with `kind` and `record()`, a branch in plan_slots and
# one in toolkit.bench.plan.RunPlan.launcher_kwargs.
SlotTarget = LocalTarget | HostTarget | ExternalTarget | SlurmTarget


@dataclass
class Slot:
    """Where arms run one after another. `hardware` names what the slot's arms load ({host, gpus}): slots
    whose hardware overlaps must not be measured at the same time."""

    name: str
    target: SlotTarget
    arms: list[str] = field(default_factory=list)
    hardware: dict = field(default_factory=dict)


def shares_hardware(a: dict, b: dict) -> bool:
    """Do two slots' hardware overlap? Same host, and the same GPUs (or all of them) on it."""
    if not a or not b or a.get("host") != b.get("host"):
        return False
    ga, gb = a.get("gpus", "all"), b.get("gpus", "all")
    return ga == "all" or gb == "all" or bool(set(str(ga).split(",")) & set(str(gb).split(",")))


def plan_slots(spec: LoadedSpec, engine: str | None = None, hosts_spec: LoadedSpec | None = None) -> list[Slot]:
    """The slots of a run. Arms on one slot run one after another; slots run side by side, and only slots
    on separate hardware may (local GPU sets, separate hosts, external URLs declared `independent`).
    `hosts_spec`: the target's Hosts spec, loaded by the caller (loaded here when not given)."""
    m: Matrix = spec.model
    t = m.target
    if t.kind == "local":
        if t.gpus:
            slots = [Slot(f"gpus-{g}", LocalTarget(g), hardware={"host": "localhost", "gpus": g}) for g in t.gpus]
        else:
            n = min(t.parallel, len(m.arms))
            if n > 1 and engine is not None and engines.get(engine).exclusive_gpus:
                raise spec.error(("target", "parallel"), "SGLang arms on the same GPUs would be measured while "
                                 "they disturb each other", hint="give `gpus: ['0', '1']` to run arms side by side "
                                 "on separate GPUs, or drop `parallel` to run them one after another")
            slots = [Slot(f"local-{i}", LocalTarget(), hardware={"host": "localhost", "gpus": "all"})
                     for i in range(n)]
    elif t.kind == "external":
        return _external_slots(spec)
    elif t.kind == "slurm":
        # each job has its own allocation: `hardware` names the job; the node and GPUs it got are the window's
        target = SlurmTarget(t.slurm.partition, t.launcher, t.slurm.loadgen)
        slots = [Slot(f"slurm-{i}", target, hardware={"host": f"slurm-job-{i}", "gpus": "all"})
                 for i in range(min(t.slurm.jobs or slurm_jobs_default(t.slurm, len(m.arms)), len(m.arms)))]
    else:
        if hosts_spec is None:
            hosts_spec = load_spec(spec.path_of(("target", "hosts"), t.hosts), expect="Hosts")
        group = hosts_spec.model.group(t.group)
        if not group:
            raise spec.error(("target", "group"), f"group {t.group!r} has no hosts in {t.hosts}",
                             hint=f"hosts there: {', '.join(hosts_spec.model.hosts)}")
        slots = [Slot(name, HostTarget(name, h, str(hosts_spec.path)), hardware={"host": h.address, "gpus": "all"})
                 for name, h in group.items()]
    for i, arm in enumerate(m.arms):
        slots[i % len(slots)].arms.append(arm)
    return [s for s in slots if s.arms]


def slurm_jobs_default(s, arms: int) -> int:
    """Jobs at once when the spec does not say: every arm where each job gets hardware of its own (GPUs, or
    whole nodes with --exclusive); else one at a time, since CPU jobs may share a node's cores."""
    own = bool(s.gpus_per_arm or s.gres or any(o.split("=")[0] == "--exclusive" for o in s.sbatch))
    return arms if own else 1


def _external_slots(spec: LoadedSpec) -> list[Slot]:
    """One slot per host of the URLs (one machine), or per URL when the spec says they are `independent`."""
    from urllib.parse import urlsplit

    m: Matrix = spec.model
    t = m.target
    if not t.urls:
        host = urlsplit(t.url).hostname or t.url
        return [Slot("external", ExternalTarget({a: t.url for a in m.arms}), list(m.arms),
                     hardware={"host": host, "gpus": "all"})]
    missing = [a for a in m.arms if a not in t.urls]
    if missing:
        raise spec.error(("target", "urls"), f"no URL for arm(s) {missing}", hint="give every arm a URL")
    slots_by: dict[str, Slot] = {}
    for arm in m.arms:
        url = t.urls[arm]
        host = urlsplit(url).hostname or url
        key = url if t.independent else host  # one host is one machine unless the spec says otherwise
        slot = slots_by.setdefault(key, Slot(f"external-{arm}" if t.independent else f"external-{host}",
                                             ExternalTarget(), hardware={"host": key, "gpus": "all"}))
        slot.target.urls[arm] = url
        slot.arms.append(arm)
    return list(slots_by.values())
