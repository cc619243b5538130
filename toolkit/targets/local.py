"""Target kind `local`: this machine's engine, one slot per GPU set (`gpus:`) or `parallel` slots sharing it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from toolkit import engines
from toolkit.extras import require_module
from toolkit.schema.manifest import Hardware, TargetRecord
from toolkit.targets.base import LaunchArgs, Slot, Target, TargetSpec, deal, engine_kwargs, require_embedded


@dataclass(frozen=True)
class LocalTarget:
    """This machine's engine; `gpus`: the GPU set its arms see (CUDA_VISIBLE_DEVICES), None: all of them."""

    gpus: str | None = None
    kind: ClassVar[str] = "local"

    def record(self) -> TargetRecord:
        return TargetRecord(kind="local", **({"gpus": self.gpus} if self.gpus else {}))


class Local(Target):
    kind = "local"
    runs_here = True

    def slots(self, spec, engine: str | None, hosts_spec) -> list[Slot]:
        m = spec.model
        t = m.target
        if t.gpus:
            slots = [Slot(f"gpus-{g}", LocalTarget(g), hardware=Hardware(host="localhost", gpus=g)) for g in t.gpus]
            return deal(slots, m.arm_names)
        n = min(t.parallel, len(m.arm_names))
        if n > 1 and engine is not None and engines.get(engine).exclusive_gpus:
            raise spec.error(("target", "parallel"), "SGLang arms on the same GPUs would be measured while "
                             "they disturb each other", hint="give `gpus: ['0', '1']` to run arms side by side "
                             "on separate GPUs, or drop `parallel` to run them one after another")
        return deal([Slot(f"local-{i}", LocalTarget(), hardware=Hardware(host="localhost", gpus="all"))
                     for i in range(n)], m.arm_names)

    def preflight(self, plan) -> list:
        """The embedded engine's extra; for SGLang in containers the docker SDK and an engine that answers."""
        require_embedded(plan)
        docker = any(engines.get(e).supports_launcher("docker") for e in plan.arm_engines)  # any arm's engine
        if docker and plan.m.target.launcher != "process":
            require_module("docker", "docker", "SGLang in containers (talking to the Docker engine)")
            from toolkit.docker_api import client

            client(timeout=30)  # the local engine answers, or a one-line error now
        return []

    def from_option(self, text: str) -> TargetSpec | None:
        return TargetSpec(kind="local") if text == "local" else None

    def launcher_kwargs(self, plan, slot: Slot, arm: str, log_dir: Path) -> LaunchArgs:
        return engine_kwargs(plan, arm, Path(log_dir) / f"{arm}.log", gpus=slot.target.gpus)


TARGET = Local()
