"""Target kind `hosts`: the hosts of a Hosts spec's group, one slot each, their Docker engines reached over ssh."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from toolkit import engines
from toolkit.extras import require_module
from toolkit.specs import load_spec
from toolkit.specs.hosts import Host
from toolkit.schema.manifest import Fingerprint, Hardware, TargetRecord
from toolkit.targets.base import LaunchArgs, Slot, Target, TargetSpec, deal, engine_kwargs, require_embedded


@dataclass(frozen=True)
class HostTarget:
    """A host of the matrix's Hosts spec (`host`: its name there), reached over ssh."""

    host: str
    spec: Host
    hosts_path: str
    kind: ClassVar[str] = "hosts"

    def record(self) -> TargetRecord:  # the manifest names the host; its address and user stay in the Hosts spec
        return TargetRecord(kind="hosts", host=self.host, hosts_path=self.hosts_path)

    @property
    def docker_url(self) -> str:
        user = f"{self.spec.user}@" if self.spec.user else ""
        return f"ssh://{user}{self.spec.address}:{self.spec.port}"


class Hosts(Target):
    kind = "hosts"
    reads_hosts_spec = True

    def slots(self, spec, engine: str | None, hosts_spec) -> list[Slot]:
        t = spec.model.target
        if hosts_spec is None:
            hosts_spec = load_spec(spec.path_of(("target", "hosts"), t.hosts), expect="Hosts")
        group = hosts_spec.model.group(t.group)
        if not group:
            raise spec.error(("target", "group"), f"group {t.group!r} has no hosts in {t.hosts}",
                             hint=f"hosts there: {', '.join(hosts_spec.model.hosts)}")
        slots = [Slot(name, HostTarget(name, h, str(hosts_spec.path)), hardware=Hardware(host=h.address, gpus="all"))
                 for name, h in group.items()]
        return deal(slots, spec.model.arm_names)

    def preflight(self, plan) -> list:
        """The embedded engine's extra; for SGLang in containers the docker SDK (the hosts' engines answer later)."""
        require_embedded(plan)
        if any(engines.get(e).supports_launcher("docker") for e in plan.arm_engines):  # any arm's engine
            require_module("docker", "docker", "SGLang in containers (talking to the Docker engine)")
        return []

    def from_option(self, text: str) -> TargetSpec | None:
        """A Hosts spec, PATH[:GROUP] (anything not a URL: a URL of another scheme was refused before)."""
        if text == "local" or "://" in text:
            return None
        path, _, group = text.partition(":")
        hosts = load_spec(path, expect="Hosts")
        return TargetSpec(kind="hosts", hosts=str(hosts.path.resolve()), group=group or "all")

    def launcher_kwargs(self, plan, slot: Slot, arm: str, log_dir: Path) -> LaunchArgs:
        t = slot.target
        return engine_kwargs(plan, arm, Path(log_dir) / f"{arm}.log", address=t.spec.address, docker_url=t.docker_url)

    def host_fingerprint(self, slot: Slot) -> tuple[str, Fingerprint] | None:
        """The host's fingerprint as `toolkit provision host` kept it, or a note that there is none."""
        fp = None
        try:
            from toolkit.provision.fingerprint import load_fingerprint

            fp = load_fingerprint(slot.target.host)
        except ImportError:
            pass
        return slot.target.host, fp or Fingerprint(missing="no fingerprint: run `toolkit provision host` first")


TARGET = Hosts()
