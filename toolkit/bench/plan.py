"""The plan of a matrix run, decided before any server starts: which cells each arm runs, which prompts
each cell sends (the same for every arm), on which slot (local engine, host, URL) each arm runs, which
image, and how each arm's launcher is made. `plan_run` makes it; `run_manifest` writes it down.

    plan = plan_run(load_spec("envs/matrices/quickstart.yaml"))
    plan.todo["baseline"]      # [Cell(arm, domain, concurrency, repeat, launch), ...] in run order
    plan.rounds                # per launch round, the arms in the order they are launched
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.errors import SpecError, ToolkitError
from toolkit.schema.keys import cell_key
from toolkit.schema.manifest import BuildRecord, Manifest
from toolkit.schema.records import Prompt
from toolkit.spec import LoadedSpec, load_spec, spec_hash
from toolkit.spec.matrix import Matrix


SGLANG_DUMMY_SEED = 1234  # sglang's initialize_dummy_weights(seed=1234) in 0.5.x: the same random weights each launch


@dataclass(frozen=True)
class Cell:
    arm: str
    domain: str
    concurrency: int
    repeat: int
    launch: int = 0

    @property
    def key(self) -> str:
        return cell_key(self.arm, self.domain, self.concurrency, self.repeat, self.launch)


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
    """Every cell of an arm, launch by launch: each launch runs all of them (and their repeats)."""
    return [Cell(arm, d, c, r, launch) for launch in range(m.launches) for r in range(m.repeats)
            for d in domains for c in m.concurrency]


def plan_rounds(m: Matrix) -> list[list[str]]:
    """Per launch round, the order the arms are launched in. One launch: the spec's order. More: a seeded
    random order per round (randomized multiple interleaved trials, Abedi & Brecht 2017), so that a slow
    drift of the machine falls on every arm alike instead of on whichever arm runs last."""
    if m.launches == 1:
        return [list(m.arms)]
    out = []
    for r in range(m.launches):
        order = list(m.arms)
        random.Random(f"rounds:{m.seed}:{r}").shuffle(order)
        out.append(order)
    return out


@dataclass
class RunPlan:
    """Everything decided before a server starts. `todo` holds, per arm, the cells still to run, in order
    (all of them, or on resume the ones the archive lacks)."""

    spec: LoadedSpec  # the Matrix
    env_spec: LoadedSpec  # its Environment
    workloads: dict[str, Any]  # name -> toolkit.workloads.LoadedWorkload
    slots: list[Slot]
    todo: dict[str, list[Cell]]
    build: BuildRecord | None = None  # the image's build record (SGLang in containers)
    representativeness: list[dict] = field(default_factory=list)
    rounds: list[list[str]] = field(default_factory=list)  # per launch round, the arms in launch order

    @property
    def m(self) -> Matrix:
        return self.spec.model

    @property
    def engine(self) -> str:
        return self.env_spec.model.engine

    @property
    def cells_planned(self) -> int:
        m = self.m
        return len(m.arms) * len(m.workloads) * len(m.concurrency) * m.repeats * m.launches

    def launch_todo(self, arm: str, launch: int) -> list[Cell]:
        """The cells one launch of an arm still has to run (resume: only the missing ones)."""
        return [c for c in self.todo.get(arm, []) if c.launch == launch]

    def sampling(self) -> dict:
        m = self.m
        return {"api": m.api, "temperature": m.temperature, "output_len": m.output_len, "seed": m.seed,
                "warmup": m.warmup, "requests": m.requests, "duration_s": m.duration_s}

    def prompts(self, cell: Cell) -> list[Prompt]:
        """The prompts a cell sends, warmup first: the same for every arm."""
        m, w = self.m, self.workloads[cell.domain]
        n = m.warmup + (m.requests or max(len(w.prompts), 1))
        return cell_prompts(w.prompts, n, cell_seed(m.seed, cell.domain, cell.concurrency, cell.repeat))

    def request_params(self, arm: str) -> dict:
        return self.env_spec.model.request_params.get(arm, {})

    def is_dummy(self, arm: str, info: dict | None = None) -> bool:
        """Does this arm serve random weights? Of a server the toolkit did not start (an external target) only
        what the server says about itself counts (`info`: its arm facts, SGLang's load_format)."""
        env = self.env_spec.model
        if self.m.target.kind == "external":
            return (info or {}).get("load_format") == "dummy"
        if env.engine == "sglang":
            return env.servers.get(arm, {}).get("load-format") == "dummy"
        return env.model is not None and env.model.dummy is not None

    def launcher_kwargs(self, slot: Slot, arm: str, log_dir: Path) -> dict:
        """How the slot's target becomes a launcher (toolkit.serve.launcher_for): local engine, external URL,
        or a Docker engine (local or a host's, over ssh)."""
        t = slot.target
        kw: dict = {"log_path": Path(log_dir) / f"{arm}.log"}
        if t["kind"] == "external":
            return {**kw, "kind": "external", "url": t["urls"][arm]}
        target = self.m.target
        if self.engine == "sglang" and target.launcher == "process":
            env = dict(target.env)
            if t.get("gpus"):
                env["CUDA_VISIBLE_DEVICES"] = t["gpus"]
            return {**kw, "kind": "process", "python": target.python, "env": env}
        if self.engine == "sglang":
            kw.update(kind="docker", image=self.build.image if self.build else None)
            if t.get("gpus"):
                kw["gpus"] = t["gpus"].split(",")
            if t["kind"] == "hosts":
                h = t["spec"]
                user = f"{h['user']}@" if h.get("user") else ""
                kw.update(address=h["address"], docker_url=f"ssh://{user}{h['address']}:{h.get('port', 22)}")
        return kw


def _hash(spec: LoadedSpec) -> str:
    from toolkit.render import template_version

    return spec_hash(spec, template_version())


def find_build(env_spec: LoadedSpec) -> BuildRecord | None:
    """The build record of this environment's image (`toolkit build env`), if one was made here."""
    if env_spec.model.engine != "sglang":
        return None
    from toolkit.image.records import find_build_record

    rec = find_build_record(_hash(env_spec))
    return BuildRecord.model_validate(rec) if rec is not None else None


def load_workloads(spec: LoadedSpec) -> dict:
    from toolkit.workloads import load_workload

    m: Matrix = spec.model
    out = {}
    training = spec.path_of(("training_data",), m.training_data) if m.training_data else None
    for i, ref in enumerate(m.workloads):
        try:
            w = load_workload(ref, base_dir=spec.path.parent, seed=m.seed, training=training)
        except ToolkitError as exc:
            if exc.file is None:
                raise spec.error(("workloads", i), exc.message, exc.hint) from None
            raise
        out[w.name] = w
    return out


def _representativeness(spec: LoadedSpec, workloads: dict) -> list[dict]:
    m: Matrix = spec.model
    if not m.training_data:
        return []
    from toolkit.workloads.bundled import read_prompts
    from toolkit.workloads.represent import representativeness

    train = read_prompts(spec.path_of(("training_data",), m.training_data))
    out = []
    for w in workloads.values():
        rep = representativeness(train, w.prompts, train_name=m.training_data, workload_name=w.name,
                                 workload_hash=w.hash)
        out.append({"workload": w.name, "verdict": rep.verdict, "divergence": rep.score, "reason": rep.reason,
                    "report": rep.model_dump(mode="json")})
    return out


def load_environment(spec: LoadedSpec) -> LoadedSpec:
    """The matrix's Environment, with every arm one of its server presets."""
    if not isinstance(spec.model, Matrix):
        raise SpecError(f"{spec.path} is a {spec.kind} spec; bench matrix needs a Matrix", file=spec.path)
    m: Matrix = spec.model
    env_spec = load_spec(spec.path_of(("environment",), m.environment), expect="Environment")
    missing = [a for a in m.arms if a not in env_spec.model.servers]
    if missing:
        raise spec.error(("arms",), f"arm(s) {missing} are not server presets of {m.environment}",
                         hint=f"presets there: {', '.join(env_spec.model.servers)}")
    return env_spec


def plan_run(spec: LoadedSpec, *, resumed: Manifest | None = None, done: set[str] = frozenset()) -> RunPlan:
    """The plan of a new run, or of resuming one (`resumed`: its manifest; `done`: keys of its written cells).
    A resumed run keeps its image and must use the same matrix spec."""
    env_spec = load_environment(spec)
    m: Matrix = spec.model
    if resumed is not None and resumed.matrix.hash and resumed.matrix.hash != _hash(spec):
        raise ToolkitError(f"the matrix spec changed since run {resumed.run_id} started",
                           hint="resume with the same spec, or start a new run", file=spec.path)
    workloads = load_workloads(spec)
    slots = plan_slots(spec, env_spec.model.engine)
    todo = {arm: [c for c in plan_cells(m, list(workloads), arm) if c.key not in done] for arm in m.arms}
    build = resumed.build if resumed is not None else find_build(env_spec)
    return RunPlan(spec, env_spec, workloads, slots, todo, build, _representativeness(spec, workloads),
                   rounds=[list(r) for r in resumed.rounds] if resumed is not None and resumed.rounds
                   else plan_rounds(m))


def run_manifest(plan: RunPlan, commands: dict[str, Any]) -> Manifest:
    """The plan written down (manifest.json): specs with hashes, the image, every arm's preset and exact
    command, the slots, the workloads and the hosts. The archive adds schema version, run id, start time
    and toolkit version."""
    from toolkit.bench.hostinfo import host_fingerprint

    m, env = plan.m, plan.env_spec.model
    return Manifest.model_validate({
        "matrix": {"name": m.name, "path": str(plan.spec.path), "hash": _hash(plan.spec),
                   "resolved": m.model_dump(mode="json")},
        "environment": {"name": env.name, "path": str(plan.env_spec.path), "hash": _hash(plan.env_spec),
                        "resolved": env.model_dump(mode="json")},
        "build": plan.build,
        "arms": {a: {"preset": env.servers[a], "request_params": env.request_params.get(a, {}),
                     "command": commands.get(a)} for a in m.arms},
        "baseline": m.baseline_arm,
        "slots": [{"name": s.name, "arms": s.arms, "hardware": s.hardware,
                   "target": {k: v for k, v in s.target.items() if k != "spec"}} for s in plan.slots],
        "workloads": {n: {"hash": w.hash, "n_prompts": len(w.prompts), "source": str(w.source)}
                      for n, w in plan.workloads.items()},
        "host": host_fingerprint(plan.slots),
        "launches": m.launches,
        "rounds": plan.rounds,
        "determinism": determinism(plan),
    })


def _config_sha(preset: dict) -> str | None:
    """sha256 of the model's config.json where this machine has it (a dummy model is its config and a seed)."""
    from toolkit.spec import sha256_file

    path = preset.get("model-path") or preset.get("model")
    cfg = Path(str(path)) / "config.json" if path else None
    return sha256_file(cfg) if cfg is not None and cfg.is_file() else None


def determinism(plan: RunPlan) -> dict:
    """What makes the generated tokens repeat from one launch to the next (docs/results.md#launch-noise):
    greedy sampling with a fixed seed, the same weights (a dummy model's recipe hash; SGLang's dummy weights
    come from a fixed seed), and per arm whether deterministic inference is on."""
    m, env = plan.m, plan.env_spec.model
    out: dict = {"temperature": m.temperature, "seed": m.seed, "greedy": m.temperature == 0}
    if env.engine == "sglang":
        dummy = [a for a in m.arms if plan.is_dummy(a)]
        if dummy:
            out["sglang_dummy_weights"] = {"arms": dummy, "seed": SGLANG_DUMMY_SEED,
                                           "source": "sglang weight_utils.initialize_dummy_weights",
                                           "config_sha256": {a: _config_sha(env.servers[a]) for a in dummy}}
        out["deterministic_inference"] = {a: bool(env.servers.get(a, {}).get("enable-deterministic-inference"))
                                          for a in m.arms}
    elif env.model is not None and env.model.dummy is not None:
        from toolkit.bench.inputs import dummy_record

        out["dummy_model"] = (dummy_record(plan.env_spec) or {}).get("hash")
    return out
