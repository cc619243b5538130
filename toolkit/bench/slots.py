"""Where a run's arms run: slots, each with a typed target (this machine's engine, a host of a Hosts spec, URLs
someone else serves, Slurm jobs). Arms on one slot run one after another; slots run side by side, and only slots
on separate hardware may. The target kind's adapter (toolkit.targets) makes them.

    slots = plan_slots(spec, engine="sglang", hosts_spec=hosts)   # toolkit.bench.plan.plan_run calls it
    slots[0].target                  # the kind's own: LocalTarget(gpus='0,1'), HostTarget(host, ...), ExternalTarget(urls)
    slots[0].target.record()         # what the manifest's slots[].target says
"""

from __future__ import annotations

from toolkit import targets
from toolkit.specs import LoadedSpec
from toolkit.targets import Slot, SlotTarget, shares_hardware

__all__ = ["Slot", "SlotTarget", "plan_slots", "shares_hardware"]


def plan_slots(spec: LoadedSpec, engine: str | None = None, hosts_spec: LoadedSpec | None = None) -> list[Slot]:
    """The slots of a run, with their arms. Arms on one slot run one after another; slots run side by side, and
    only slots on separate hardware may (local GPU sets, separate hosts, external URLs declared `independent`).
    `hosts_spec`: the target's Hosts spec, loaded by the caller (loaded here when not given)."""
    return targets.get(spec.model.target.kind).slots(spec, engine, hosts_spec)
