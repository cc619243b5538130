"""The plan of a matrix run: which cells each arm runs, which prompts each cell sends (the same for
every arm), and on which slot (local engine, host, URL) each arm runs."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from toolkit.schema.keys import cell_key
from toolkit.schema.records import Prompt
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

        return cell_key(self.arm, self.domain, self.concurrency, self.repeat)


@dataclass
class Slot:
    """Where arms run one after another: {'kind': 'local', 'gpus'?: '0,1'} | {'kind': 'hosts', 'host': name, ...}
    | {'kind': 'external', 'urls': {arm: url}}. `hardware` names what the slot's arms load ({host, gpus}):
    slots whose hardware overlaps must not be measured at the same time."""

    name: str
    target: dict
    arms: list[str] = field(default_factory=list)
    hardware: dict = field(default_factory=dict)


def shares_hardware(a: dict, b: dict) -> bool:
    """Do two slots' hardware overlap? Same host, and the same GPUs (or all of them) on it."""
    if not a or not b or a.get("host") != b.get("host"):
        return False
    ga, gb = a.get("gpus", "all"), b.get("gpus", "all")
    return ga == "all" or gb == "all" or bool(set(str(ga).split(",")) & set(str(gb).split(",")))


def cell_seed(seed: int, domain: str, concurrency: int, repeat: int) -> int:
    h = hashlib.sha256(f"{seed}/{domain}/{concurrency}/{repeat}".encode()).digest()
    return int.from_bytes(h[:8], "big")


def cell_prompts(prompts: list[Prompt], n: int, seed: int) -> list[Prompt]:
    """n prompts in a seeded order, identical for every arm (cycling when the workload is smaller)."""
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    return [prompts[order[i % len(order)]] for i in range(n)]


def plan_slots(spec: LoadedSpec, engine: str | None = None) -> list[Slot]:
    """The slots of a run. Arms on one slot run one after another; slots run side by side, and only slots
    on separate hardware may (local GPU sets, separate hosts, external URLs declared `independent`)."""
    from urllib.parse import urlsplit

    m: Matrix = spec.model
    t = m.target
    if t.kind == "local":
        if t.gpus:
            slots = [Slot(f"gpus-{g}", {"kind": "local", "gpus": g}, hardware={"host": "localhost", "gpus": g})
                     for g in t.gpus]
        else:
            n = min(t.parallel, len(m.arms))
            if n > 1 and engine == "sglang":
                raise spec.error(("target", "parallel"), "SGLang arms on the same GPUs would be measured while "
                                 "they disturb each other", hint="give `gpus: ['0', '1']` to run arms side by side "
                                 "on separate GPUs, or drop `parallel` to run them one after another")
            slots = [Slot(f"local-{i}", {"kind": "local"}, hardware={"host": "localhost", "gpus": "all"})
                     for i in range(n)]
    elif t.kind == "external":
        if t.urls:
            missing = [a for a in m.arms if a not in t.urls]
            if missing:
                raise spec.error(("target", "urls"), f"no URL for arm(s) {missing}", hint="give every arm a URL")
            slots_by: dict[str, Slot] = {}
            for arm in m.arms:
                url = t.urls[arm]
                u = urlsplit(url)
                host = u.hostname or url
                # one host is one machine unless the spec says its URLs are separate hardware
                key = url if t.independent else host
                hw = {"host": url if t.independent else host, "gpus": "all"}
                slot = slots_by.setdefault(key, Slot(f"external-{arm}" if t.independent else f"external-{host}",
                                                     {"kind": "external", "urls": {}}, hardware=hw))
                slot.target["urls"][arm] = url
                slot.arms.append(arm)
            return list(slots_by.values())
        host = urlsplit(t.url).hostname or t.url
        slots = [Slot("external", {"kind": "external", "urls": {a: t.url for a in m.arms}},
                      hardware={"host": host, "gpus": "all"})]
    else:
        hosts_spec = load_spec(spec.path_of(("target", "hosts"), t.hosts), expect="Hosts")
        group = hosts_spec.model.group(t.group)
        if not group:
            raise spec.error(("target", "group"), f"group {t.group!r} has no hosts in {t.hosts}",
                             hint=f"hosts there: {', '.join(hosts_spec.model.hosts)}")
        slots = [Slot(name, {"kind": "hosts", "host": name, "spec": h.model_dump(), "hosts_path": str(hosts_spec.path)},
                      hardware={"host": h.address, "gpus": "all"})
                 for name, h in group.items()]
    for i, arm in enumerate(m.arms):
        slots[i % len(slots)].arms.append(arm)
    return [s for s in slots if s.arms]


def plan_cells(m: Matrix, domains: list[str], arm: str) -> list[Cell]:
    return [Cell(arm, d, c, r) for r in range(m.repeats) for d in domains for c in m.concurrency]
