"""The plan of a matrix run: which cells each arm runs, which prompts each cell sends (the same for
every arm), and on which slot (local engine, host, URL) each arm runs."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from toolkit.bench.records import Prompt
from toolkit.spec import LoadedSpec, load_spec
from toolkit.spec.matrix import Matrix


@dataclass(frozen=True)
class Cell:
    arm: str
    domain: str
    concurrency: int
    repeat: int

    @property
    def key(self) -> str:
        from toolkit.results.archive import cell_key

        return cell_key(self.arm, self.domain, self.concurrency, self.repeat)


@dataclass
class Slot:
    """Where arms run: {'kind': 'local'} | {'kind': 'hosts', 'host': name, ...} | {'kind': 'external', 'url': u}."""

    name: str
    target: dict
    arms: list[str] = field(default_factory=list)


def cell_seed(seed: int, domain: str, concurrency: int, repeat: int) -> int:
    h = hashlib.sha256(f"{seed}/{domain}/{concurrency}/{repeat}".encode()).digest()
    return int.from_bytes(h[:8], "big")


def cell_prompts(prompts: list[Prompt], n: int, seed: int) -> list[Prompt]:
    """n prompts in a seeded order, identical for every arm (cycling when the workload is smaller)."""
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    return [prompts[order[i % len(order)]] for i in range(n)]


def plan_slots(spec: LoadedSpec) -> list[Slot]:
    m: Matrix = spec.model
    t = m.target
    if t.kind == "local":
        slots = [Slot(f"local-{i}", {"kind": "local"}) for i in range(min(t.parallel, len(m.arms)))]
    elif t.kind == "external":
        if t.urls:
            missing = [a for a in m.arms if a not in t.urls]
            if missing:
                raise spec.error(("target", "urls"), f"no URL for arm(s) {missing}", hint="give every arm a URL")
            return [Slot(f"external-{a}", {"kind": "external", "url": t.urls[a]}, [a]) for a in m.arms]
        slots = [Slot("external", {"kind": "external", "url": t.url})]
    else:
        hosts_spec = load_spec(spec.path_of(("target", "hosts"), t.hosts), expect="Hosts")
        group = hosts_spec.model.group(t.group)
        if not group:
            raise spec.error(("target", "group"), f"group {t.group!r} has no hosts in {t.hosts}",
                             hint=f"hosts there: {', '.join(hosts_spec.model.hosts)}")
        slots = [Slot(name, {"kind": "hosts", "host": name, "spec": h.model_dump(), "hosts_path": str(hosts_spec.path)})
                 for name, h in group.items()]
    for i, arm in enumerate(m.arms):
        slots[i % len(slots)].arms.append(arm)
    return [s for s in slots if s.arms]


def plan_cells(m: Matrix, domains: list[str], arm: str) -> list[Cell]:
    return [Cell(arm, d, c, r) for r in range(m.repeats) for d in domains for c in m.concurrency]
