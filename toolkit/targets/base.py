"""What a target kind is to the runner: one `Target` object per kind of place a matrix's arms run (this
machine, hosts of a Hosts spec, URLs someone else serves, Slurm jobs), asked by bench instead of comparing
`target.kind` with a name. Each kind (local.py, hosts.py, external.py, slurm.py) gives its adapter here; the
registry is toolkit/targets/__init__.py.

    t = targets.get(matrix.target.kind)
    t.slots(spec, engine, hosts_spec)    [Slot] with their arms: where arms run, side by side or in turn
    t.check(spec, env_spec)              what the plan refuses of the spec beyond its schema (Slurm: job folder)
    t.preflight(plan)                    what this machine needs before an archive exists (extras, clients)
    t.launcher_kwargs(plan, slot, arm, log_dir), t.launcher(plan, arm, kw)   one arm's launcher (LaunchArgs), not started
    t.resume(run_dir, manifest, log)     what a killed run left behind, cleaned before --resume goes on
    t.manifest_record(plan, manifest)    the manifest with fields of its own (unchanged for most kinds)
    t.serving(urls), t.for_arms(target, {new: old})   the `target:` of a generated matrix (bench tune's), a
                                         Matrix Target (toolkit.specs.matrix.Target)
    t.note_launch(manifest, launcher, launch)   a launch into the manifest as it happens (a batch job's id)

A plan is read by its attributes (spec, env_spec, m, engine, paths, build, preset_name, synthetic_env): the
targets sit below bench (tests/test_import_cycles.py) and never import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Protocol

from toolkit import engines
from toolkit.extras import require_extra
from toolkit.schema.manifest import Fingerprint, Hardware, Manifest, TargetRecord
from toolkit.specs.matrix import Target as TargetSpec


class SlotTarget(Protocol):
    """Where one slot's arms run, typed per kind (LocalTarget, HostTarget, ...): its kind and its manifest record."""

    kind: str

    def record(self) -> TargetRecord: ...


@dataclass
class Slot:
    """Where arms run one after another. `hardware` names what the slot's arms load (host, GPUs): slots
    whose hardware overlaps must not be measured at the same time."""

    name: str
    target: Any  # a SlotTarget
    arms: list[str] = field(default_factory=list)
    hardware: Hardware = field(default_factory=Hardware)


def shares_hardware(a: Hardware, b: Hardware) -> bool:
    """Do two slots' hardware overlap? Same host, and the same GPUs (or all of them) on it."""
    if a.host is None or a.host != b.host:
        return False
    ga, gb = a.gpus, b.gpus
    return ga == "all" or gb == "all" or bool(set(ga.split(",")) & set(gb.split(",")))


@dataclass(frozen=True)
class LaunchArgs:
    """How a slot's target makes one arm's launcher: the keywords toolkit.serve.launcher_for (or the kind's own
    factory, Target.launcher) takes, those left None not passed. `kind`: external | process | docker | slurm (None:
    the embedded engine); `env`: variables over the Environment's; `gpus`: the GPU indices a container sees;
    `address`, `docker_url`: a host's Docker engine, over ssh; `job`: a Slurm job's script (toolkit.slurm)."""

    log_path: Path
    kind: str | None = None
    url: str | None = None
    python: str | None = None
    env: dict[str, str] | None = None
    image: str | None = None
    gpus: list[str] | None = None
    address: str | None = None
    docker_url: str | None = None
    job: Any = None


def deal(slots: list[Slot], arms: list[str]) -> list[Slot]:
    """The arms dealt round-robin over the slots; the slots that got any."""
    for i, arm in enumerate(arms):
        slots[i % len(slots)].arms.append(arm)
    return [s for s in slots if s.arms]


class Target:
    """One kind of place arms run. Defaults: the toolkit starts the servers, through toolkit.serve."""

    kind: str = ""
    starts_servers: bool = True  # False: servers someone else started (the toolkit neither starts nor flushes them)
    reads_hosts_spec: bool = False  # `target.hosts` is a Hosts spec the plan loads
    runs_here: bool = False  # its servers run on this machine: one server started here can stand in for its arms'

    def slots(self, spec, engine: str | None, hosts_spec) -> list[Slot]:
        """The run's slots with their arms (`spec`: the Matrix as it runs; `hosts_spec`: its Hosts spec, or None)."""
        raise NotImplementedError

    def check(self, spec, env_spec) -> None:
        """What the plan refuses of the Matrix as written (`spec`) beyond its schema: by default, a launcher the
        engine does not run under (where this kind starts servers; the embedded engine ignores the launcher)."""
        eng = engines.get(env_spec.model.engine)
        launcher = spec.model.target.launcher
        if self.starts_servers and not eng.embedded and not eng.supports_launcher(launcher):
            where = ("target", "launcher") if "launcher" in spec.model.target.model_fields_set else ("target",)
            raise spec.error(where, f"engine {eng.name!r} does not run under launcher {launcher!r}"
                             + ("" if where[-1] == "launcher" else " (the target's default)"),
                             hint=f"set the target's `launcher:` to one of {', '.join(sorted(eng.launchers))}")

    def preflight(self, plan) -> list:
        """What this machine needs for the run, checked before the archive exists: the embedded engine's extra
        by default. Returns the endpoints it registered (toolkit.endpoints)."""
        require_embedded(plan)
        return []

    def from_option(self, text: str) -> TargetSpec | None:
        """The Matrix `target:` that `--target TEXT` (bench reproduce) means, where TEXT names one of this kind;
        else None."""
        return None

    def endpoints(self, plan, keys: bool = True) -> list:
        """The endpoints (toolkit.endpoints) of URLs this kind sends requests to that someone else serves, checked
        (a CA bundle loads; keys read from the environment unless `keys=False`), not registered; [] by default."""
        return []

    def serving(self, urls: dict[str, str]) -> TargetSpec | None:
        """The Matrix `target:` that sends each arm to a URL already served ({arm: URL}), where this kind is the
        one for servers someone else started; else None."""
        return None

    def for_arms(self, target: TargetSpec, arms: dict[str, str]) -> TargetSpec:
        """The `target:` (a Matrix's) of a generated matrix whose arms each stand for an arm of the original
        ({new arm: original arm}, e.g. a tune's trials): unchanged, unless the kind names arms."""
        return target

    def launcher_kwargs(self, plan, slot: Slot, arm: str, log_dir: Path) -> LaunchArgs:
        """How the slot's target becomes the arm's launcher (what `launcher` takes)."""
        raise NotImplementedError

    def launcher(self, plan, arm: str, kw: LaunchArgs):
        """The arm's launcher (toolkit.serve.Launcher), made but not started."""
        from toolkit.serve import launcher_for

        return launcher_for(*plan.served(arm), **{f.name: getattr(kw, f.name) for f in fields(kw)
                                                  if getattr(kw, f.name) is not None})

    def resume(self, run_dir: Path, manifest, log: Callable[[str], None]) -> None:
        """Clean what a killed run of this archive left behind, before the resumed run starts anything."""

    def manifest_record(self, plan, manifest: Manifest) -> Manifest:
        """The manifest with fields of this kind's own, written when the archive is made (most kinds: none)."""
        return manifest

    def note_launch(self, manifest, launcher, launch: int) -> tuple[str, Any] | None:
        """(manifest field, new value) that records a launch as it is now, or None: nothing to record."""
        return None

    def served_urls(self, slot: Slot) -> dict[str, str]:  # data-keyed: arm
        """{arm: URL} of servers someone else started ({}: the toolkit starts them)."""
        return {}

    def host_fingerprint(self, slot: Slot) -> tuple[str, Fingerprint] | None:
        """(name, provisioned fingerprint) of the host a slot's arms run on, where one is kept; else None."""
        return None

    def __repr__(self) -> str:
        return f"<Target {self.kind}>"


def require_embedded(plan) -> None:
    """The embedded engine (it runs in the toolkit's Python) needs a model and the `local` extra, in every
    Environment the arms come from that runs it."""
    embedded = [e for e in plan.env_specs() if engines.get(e.model.engine).embedded]
    for env_spec in embedded:
        if env_spec.model.model is None:
            raise env_spec.error(("engine",), "the embedded engine runs here (target local) and this environment "
                                 "names no model for it", hint="add `model: {dummy: {}}` (random weights) or "
                                 "`model: {path: DIR}`; a server of your own is a target of kind external")
    if embedded:
        require_extra("local", "the embedded CPU engine (engine: transformers)")


def engine_kwargs(plan, arm: str, log_path: Path, gpus: str | None = None, address: str | None = None,
                  docker_url: str | None = None) -> LaunchArgs:
    """The launch of a server the toolkit starts on a machine's engine: the embedded engine (toolkit.serve
    starts it from the Environment's model), a process (target.launcher: process) or a container; `gpus`: the
    GPU set it sees; `address`, `docker_url`: where its Docker engine is (a host's, over ssh)."""
    target = plan.m.target
    if engines.get(plan.engine_of(arm)).embedded:
        return LaunchArgs(log_path)
    if target.launcher == "process":
        engine = plan.engine_of(arm)  # each engine's own Python and environment (target.engines), over the target's
        env = {**target.env_of(engine), **plan.synthetic_env(arm)}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        return LaunchArgs(log_path, kind="process", python=target.python_of(engine), env=env)
    build = plan.build_of(arm)
    return LaunchArgs(log_path, kind="docker", image=build.image if build else None,
                      env=plan.synthetic_env(arm) or None,  # over the Environment's env: (toolkit.serve.launcher_for)
                      gpus=gpus.split(",") if gpus else None, address=address, docker_url=docker_url)
