"""The plan of a matrix run, decided before any server starts: which cells each arm runs, which prompts
each cell sends (the same for every arm), on which slot (local engine, host, URL) each arm runs, which
image, and how each arm's launcher is made. `plan_run` makes it; `run_manifest` writes it down.

    plan = plan_run(load_spec("envs/matrices/quickstart.yaml"))
    plan.todo["baseline"]      # [Cell(arm, domain, concurrency, repeat, launch), ...] in run order
    plan.rounds                # per launch round, the arms in the order they are launched
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit import engines, targets
from toolkit.engines import preset_meaning, sglang
from toolkit.errors import SpecError, ToolkitError, did_you_mean
from toolkit.loadgen.load import CellLoad
from toolkit.schema.keys import cell_key, level_label, rate_text, synthetic_arm
from toolkit.schema.manifest import (ArmEnvironmentRecord, ArmRecord, ArmState, BuildRecord, Determinism, Manifest,
                                     SyntheticAcceptance)
from toolkit.schema.records import Prompt, TraceArrival
from toolkit.schema.sweep import SweepRecord
from toolkit.specs import LoadedSpec, load_spec, spec_hash
from toolkit.bench.slots import Slot, plan_slots
from toolkit.bench.sources import ArmSource
from toolkit.targets import LaunchArgs
from toolkit.specs.environment import Environment
from toolkit.specs.matrix import SWEEP_PROBE_SLOTS, Matrix


@dataclass(frozen=True)
class Cell:
    arm: str
    domain: str
    concurrency: int  # open loop: the cap on requests in flight
    repeat: int
    launch: int = 0
    rate: float | None = None  # open loop (`rates:`): the target rate, req/s, which keys the cell

    @property
    def key(self) -> str:
        return cell_key(self.arm, self.domain, self.concurrency, self.repeat, self.launch, self.rate)

    @property
    def label(self) -> str:
        return level_label(self.concurrency, self.rate)

    @property
    def level(self) -> float:
        """Its load level: the rate when open loop, else the concurrency (CellSummary.level)."""
        return self.rate if self.rate is not None else self.concurrency


@dataclass(frozen=True)
class RunPaths:
    """Every file or folder a run reads, resolved once (each relative to the spec file that names it)."""

    matrix: Path
    environment: Path
    hosts: Path | None = None  # target.hosts
    ca_bundle: Path | None = None  # target.ca_bundle
    training_data: Path | None = None
    model: Path | None = None  # the environment's model.path


def resolve_paths(spec: LoadedSpec, env_spec: LoadedSpec) -> RunPaths:
    m: Matrix = spec.model
    env = env_spec.model
    t = m.target
    return RunPaths(
        matrix=spec.path, environment=env_spec.path,
        hosts=spec.path_of(("target", "hosts"), t.hosts, file=True) if t.hosts else None,
        ca_bundle=spec.path_of(("target", "ca_bundle"), t.ca_bundle, file=True) if t.ca_bundle else None,
        training_data=spec.path_of(("training_data",), m.training_data) if m.training_data else None,
        model=env_spec.path_of(("model", "path"), env.model.path)
        if getattr(env, "model", None) is not None and env.model.path else None)


def cell_seed(seed: int, domain: str, concurrency: int, repeat: int, rate: float | None = None) -> int:
    """The seed of a cell's prompt order (the same for every arm); an open-loop cell's by its rate."""
    level = f"q{rate_text(rate)}" if rate is not None else concurrency
    h = hashlib.sha256(f"{seed}/{domain}/{level}/{repeat}".encode()).digest()
    return int.from_bytes(h[:8], "big")


def cell_prompts(prompts: list[Prompt], n: int, seed: int) -> list[Prompt]:
    """n prompts in a seeded order, identical for every arm (cycling when the workload is smaller)."""
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    return [prompts[order[i % len(order)]] for i in range(n)]


def plan_cells(m: Matrix, domains: list[str], arm: str, traced: dict[str, list] | None = None,
               swept: list[float] | None = None) -> list[Cell]:
    """Every cell of an arm, launch by launch: each launch runs all of them (and their repeats). `traced`: the
    levels of `trace:` workloads by domain (trace_levels), in place of the Matrix's. A sweep's cells are at
    `swept` (the rates its probes chose; none before them)."""
    traced = traced or {}
    return [Cell(arm, d, c, r, launch, rate) for launch in range(m.planned_launches) for r in range(m.repeats)
            for d in domains for c, rate in (traced[d] if d in traced else m.levels(swept))]


def trace_levels(m: Matrix, workloads: dict) -> dict[str, list[tuple[int, float]]]:  # data-keyed: workload
    """(cap on requests in flight, rate) of each speed of each `trace:` workload: its cells are open loop,
    keyed by the trace's mean rate at that speed (toolkit.schema.trace.offered_rate)."""
    from toolkit.specs.matrix import OPEN_LOOP_SLOTS

    return {n: [(m.max_concurrency or OPEN_LOOP_SLOTS, r) for r in w.rates]
            for n, w in workloads.items() if w.arrivals is not None}


def plan_rounds(m: Matrix, round_seed: int | None = None) -> list[list[str]]:
    """Per launch round, the order the arms are launched in. One launch: the spec's order. More: a random order
    per round (randomized multiple interleaved trials, Abedi & Brecht 2017), so that a slow drift of the machine
    falls on every arm alike instead of on whichever arm runs last. The orders come from `round_seed`, drawn
    afresh per run (draw_round_seed) and recorded in the manifest, so the cold first launch does not land on
    the same arm in every run, and the run's orders can be replayed; without one (None: older callers), from
    the Matrix's `seed` (the same orders every run). The Matrix's `seed` stays the prompts'."""
    if m.planned_launches == 1:
        return [list(m.arm_names)]
    base = m.seed if round_seed is None else f"run:{round_seed}"
    out = []
    for r in range(m.planned_launches):
        order = list(m.arm_names)
        random.Random(f"rounds:{base}:{r}").shuffle(order)
        out.append(order)
    return out


def draw_round_seed() -> int:
    """A fresh seed for a run's round orders (from the OS's entropy; recorded as the manifest's `round_seed`)."""
    import secrets

    return secrets.randbelow(2 ** 31)


@dataclass(frozen=True)
class Synthetic:
    """One speculative arm at one synthetic acceptance length (the Matrix's `synthetic_acceptance:`): a run arm
    of its own (`<arm>-synacc<length>`), served by the arm's preset with SGLang's simulate knobs in the server's
    environment, so every one of its launches starts at that length."""

    arm: str  # the speculative arm (server preset) it runs
    accept_len: float

    @property
    def env(self) -> dict[str, str]:  # data-keyed: environment variable
        return sglang.simulate_env(self.accept_len)

    def record(self) -> SyntheticAcceptance:
        """The manifest's arms.<run arm>.synthetic_acceptance."""
        return SyntheticAcceptance(of=self.arm, accept_len=self.accept_len, env=self.env)


def check_synthetic(spec: LoadedSpec, env_spec: LoadedSpec, sources: dict[str, ArmSource] | None = None) -> None:
    """A Matrix's `synthetic_acceptance:` against its Environment(s) (toolkit validate and every run): only SGLang
    has the knob, only speculative arms of an engine that has it use it (an arm of another engine runs once, at
    its real acceptance), and no run arm name may collide with one of the matrix's."""
    m: Matrix = spec.model
    if m.synthetic_acceptance is None:
        return
    env = env_spec.model
    sources = sources or {}
    if not any(engines.get(e.engine).synthetic_acceptance for e in [env, *(s.env_spec.model for s in sources.values())]):
        raise spec.error(("synthetic_acceptance",), f"the {env.engine} engine of {m.environment} has no way to force "
                         "an acceptance length (SGLang's SGLANG_SIMULATE_ACC_LEN)",
                         hint="drop `synthetic_acceptance:`, or use an SGLang environment")
    spec_arms = speculative_arms(m, env, sources)
    if not spec_arms:
        raise spec.error(("synthetic_acceptance",), "no arm but the baseline is speculative: a synthetic acceptance "
                         "length applies to speculative arms only", hint="add a speculative arm, or drop it")
    forced = {k for k in (*m.target.env, *(k for e in m.target.engines.values() for k in e.env), *env.env,
                          *(k for s in sources.values() for k in s.env_spec.model.env))
              if k.startswith("SGLANG_SIMULATE_ACC")}
    if forced:
        raise spec.error(("synthetic_acceptance",), f"{', '.join(sorted(forced))} is also set in the servers' "
                         "environment (target.env or the Environment's env:)", hint="set acceptance in one place: "
                         "`synthetic_acceptance:`")
    for arm in spec_arms:
        for a in m.synthetic_acceptance:
            name = synthetic_arm(arm, a)
            if name in m.arm_names or name in _served(env_spec, sources, arm)[0].model.servers:
                raise spec.error(("synthetic_acceptance",), f"arm {arm} at acceptance {a:g} runs as {name}, "
                                 "already an arm or preset", hint="rename that preset")


def check_ignore_eos(plan: RunPlan, spec: LoadedSpec) -> None:
    """A Matrix's `ignore_eos: true` against its arms' engines (toolkit validate and every run, through
    plan_target): every arm's engine must honour a request's `ignore_eos` (Engine.ignore_eos), else its answers
    would still end at end of sequence, or its server refuse every request. `spec`: the Matrix as written."""
    m = plan.declared or plan.m
    if not m.ignore_eos:
        return
    for arm in m.arm_names:
        eng = engines.get(plan.engine_of(arm))
        if not eng.ignore_eos:
            src = m.arm_source(arm)
            raise spec.error(("ignore_eos",), f"`ignore_eos: true` sends every request `ignore_eos`, and arm {arm} "
                             f"runs on {eng.title} (engine {eng.name}, {src.environment if src else m.environment}), "
                             "whose server has no request `ignore_eos` (it cannot decode past end of sequence)",
                             hint="drop `ignore_eos:`, or serve every arm with SGLang or vLLM (both honour it)")


def request_param_notes(plan: RunPlan) -> list[str]:
    """Request parameters an arm declares that its requests will carry where the server ignores them: a preset's
    `sampling_params:` (the /generate API's envelope) under `api: chat` or `completions`, whose bodies hold
    sampling parameters at the top level (SGLang's and vLLM's OpenAI requests have no `sampling_params` field and
    drop it unread). Printed by `toolkit validate`, recorded by every run as a methodology check."""
    m = plan.m
    if m.api == "generate":
        return []
    out = []
    for arm in m.arm_names:
        inner = plan.request_params(arm).get("sampling_params")
        if isinstance(inner, dict) and inner:
            keys = ", ".join(f"{k}: {v!r}" for k, v in inner.items())
            out.append(f"arm {arm}: its preset's request_params.sampling_params ({keys}) is the /generate API's "
                       f"envelope; over api {m.api} the server reads sampling parameters at the top level of the body "
                       "and drops this key unread, so none of it reaches the sampler (use `api: generate`, put the "
                       "keys at the top level of the preset's request_params, or for ignore_eos the Matrix's "
                       "`ignore_eos: true`)")
    return out


def probe_concurrency(m: Matrix) -> int:
    """Requests in flight in a sweep's throughput probe (toolkit.bench.sweep): sweep.probe_concurrency, else
    max_concurrency, else every measured request at once, else SWEEP_PROBE_SLOTS (a duration-sized cell)."""
    assert m.sweep is not None
    return m.sweep.probe_concurrency or m.max_concurrency or m.requests or SWEEP_PROBE_SLOTS


def _served(env_spec: LoadedSpec, sources: dict[str, ArmSource], arm: str) -> tuple[LoadedSpec, str]:
    """(the Environment, the preset) that serve a declared arm: its own `{environment, preset}`, else the
    Matrix's Environment's preset of its name."""
    s = sources.get(arm)
    return (s.env_spec, s.preset) if s is not None else (env_spec, arm)


def speculative_arms(m: Matrix, env: Environment | LoadedSpec, sources: dict[str, ArmSource] | None = None) -> list[str]:
    """The arms other than the baseline whose preset speculates on an engine that can force its acceptance
    (SGLang), in the matrix's order. `env`: the Matrix's Environment; `sources`: the arms of others."""
    out = []
    for a in m.arm_names:
        if a == m.baseline_arm:
            continue
        s = (sources or {}).get(a)
        e, preset = (s.env_spec.model, s.preset) if s is not None else (env.model if isinstance(env, LoadedSpec) else env, a)
        if engines.get(e.engine).synthetic_acceptance and preset_meaning(e, preset).speculative:
            out.append(a)
    return out


def expand_synthetic(spec: LoadedSpec, env_spec: LoadedSpec, sources: dict[str, ArmSource] | None = None
                     ) -> tuple[LoadedSpec, dict[str, Synthetic]]:
    """The Matrix as it runs: each speculative arm replaced by one run arm per synthetic acceptance length (in
    the listed order), the baseline and plain arms once and unaffected. Returns (the spec with those arms, the
    run arms that are synthetic). A matrix without `synthetic_acceptance:` is returned as it is."""
    check_synthetic(spec, env_spec, sources)
    m: Matrix = spec.model
    if m.synthetic_acceptance is None:
        return spec, {}
    spec_arms = set(speculative_arms(m, env_spec.model, sources))
    arms, synthetic = [], {}
    for entry, arm in zip(m.arms, m.arm_names):
        if arm not in spec_arms:
            arms.append(entry)
            continue
        for a in m.synthetic_acceptance:
            name = synthetic_arm(arm, a)
            arms.append(name)
            synthetic[name] = Synthetic(arm, float(a))
    return dataclasses.replace(spec, model=m.model_copy(update={"arms": arms, "baseline": m.baseline_arm})), synthetic


@dataclass
class RunPlan:
    """Everything decided before a server starts, from the Matrix spec alone: plan_run reads the spec, loads
    its Environment (and Hosts spec) once, resolves every path, and the run below works from this object.
    `todo` holds, per arm, the cells still to run, in order (all of them, or on resume the ones the archive
    lacks)."""

    spec: LoadedSpec  # the Matrix (its files and marks: the archive's inputs/)
    env_spec: LoadedSpec  # its Environment, loaded once (the launchers take it)
    workloads: dict[str, Any]  # name -> toolkit.workloads.LoadedWorkload
    slots: list[Slot]
    todo: dict[str, list[Cell]]
    build: BuildRecord | None = None  # the image's build record (SGLang in containers)
    representativeness: list[dict] = field(default_factory=list)
    rounds: list[list[str]] = field(default_factory=list)  # per launch round, the arms in launch order
    round_seed: int | None = None  # the seed of the round orders (drawn per run; None: from the Matrix's seed)
    paths: RunPaths | None = None  # every path the run reads, resolved
    hosts_spec: LoadedSpec | None = None  # a hosts target's Hosts spec, loaded once
    hashes: dict[str, str] = field(default_factory=dict)  # matrix, environment: their spec hashes
    stopped_after: int | None = None  # launches_auto: the rounds run when its rule said the CIs were narrow
    sweep: SweepRecord | None = None  # a `sweep:` matrix: the rates chosen (set_sweep); None before its probes
    synthetic: dict[str, Synthetic] = field(default_factory=dict)  # run arms at a synthetic acceptance length
    declared: Matrix | None = None  # the Matrix as written (m: as it runs, synthetic arms expanded)
    sources: dict[str, ArmSource] = field(default_factory=dict)  # arms `{name, environment, preset}`: theirs
    builds: dict[str, BuildRecord | None] = field(default_factory=dict)  # another Environment's image, by its hash

    @property
    def m(self) -> Matrix:
        return self.spec.model

    @property
    def env(self) -> Environment:
        """The Matrix's own Environment (`environment:`); an arm's is env_of(arm)."""
        return self.env_spec.model

    @property
    def engine(self) -> str:
        """The engine of the Matrix's own Environment; an arm's is engine_of(arm)."""
        return self.env.engine

    def source(self, arm: str) -> ArmSource | None:
        """The `{name, environment, preset}` a run arm comes from (a synthetic arm: its arm's); None: a preset of
        the Matrix's own Environment."""
        return self.sources.get(self.preset_arm(arm))

    def env_spec_of(self, arm: str) -> LoadedSpec:
        """The Environment that serves a run arm (loaded once per file)."""
        s = self.source(arm)
        return s.env_spec if s is not None else self.env_spec

    def env_of(self, arm: str) -> Environment:
        return self.env_spec_of(arm).model

    def engine_of(self, arm: str) -> str:
        return self.env_of(arm).engine

    def served(self, arm: str) -> tuple[LoadedSpec, str]:
        """(the Environment, its server preset) that serve a run arm."""
        return self.env_spec_of(arm), self.preset_name(arm)

    def env_hash_of(self, arm: str) -> str | None:
        s = self.source(arm)
        return s.hash if s is not None else self.hashes.get("environment")

    def build_of(self, arm: str) -> BuildRecord | None:
        """The image a run arm's server runs (its Environment's build record; None: none, or no image)."""
        s = self.source(arm)
        if s is None or s.env_spec is self.env_spec:
            return self.build
        return self.builds.get(s.hash)

    def env_specs(self) -> list[LoadedSpec]:
        """Every Environment the arms come from, the Matrix's own first, each once."""
        out = [self.env_spec]
        for s in self.sources.values():
            if all(s.env_spec is not e for e in out):
                out.append(s.env_spec)
        return out

    @property
    def arm_engines(self) -> list[str]:
        """The engines of the arms, each once, the Matrix's own Environment's first."""
        return list(dict.fromkeys(e.model.engine for e in self.env_specs()))

    @property
    def target(self) -> targets.Target:
        """The target kind's adapter (toolkit.targets): slots, launchers, preflight, resume cleanup, manifest record."""
        return targets.get(self.m.target.kind)

    @property
    def cells_planned(self) -> int:
        """Cells the run is to measure: every launch round planned, or the rounds a `launches_auto` run
        stopped after (`stopped_after`)."""
        m = self.m
        rounds = self.stopped_after if self.stopped_after is not None else m.planned_launches
        traced, levels = trace_levels(m, self.workloads), m.levels(self.swept)
        per_arm = sum(len(traced[d]) if d in traced else len(levels) for d in self.workloads) \
            if self.workloads else len(m.workloads) * len(levels)
        return len(m.arm_names) * per_arm * m.repeats * rounds

    @property
    def swept(self) -> list[float] | None:
        """A sweep's rates, once chosen (toolkit.bench.sweep)."""
        return self.sweep.rates if self.sweep is not None else None

    def set_sweep(self, record: SweepRecord) -> None:
        """A sweep's rates are known (probed, or recorded by the run resumed or replayed): every arm's cells
        at them."""
        self.sweep = record
        traced = trace_levels(self.m, self.workloads)
        self.todo = {arm: plan_cells(self.m, list(self.workloads), arm, traced, record.rates) for arm in self.m.arm_names}

    def launch_todo(self, arm: str, launch: int) -> list[Cell]:
        """The cells one launch of an arm still has to run (resume: only the missing ones)."""
        return [c for c in self.todo.get(arm, []) if c.launch == launch]

    def sampling(self) -> dict[str, Any]:  # json-edge: the cell summary's sampling record (CellLoad's field names)
        """A cell summary's `sampling` record: what CellLoad records of the Matrix (CellLoad.recorded)."""
        return CellLoad.recorded(self.m)

    def load(self, cell: Cell) -> CellLoad:
        """What the cell sends: the Matrix's load at its concurrency, with its arm's request parameters; a
        trace's cell its send times at the cell's speed."""
        speed = self.trace_speed(cell)
        times = None if speed is None else tuple(t / speed for t in self.workloads[cell.domain].arrivals)
        return CellLoad.of(self.m, cell.concurrency, self.request_params(cell.arm), rate=cell.rate, arrivals=times)

    def trace_speed(self, cell: Cell) -> float | None:
        """The speed a trace's cell replays it at (None: not a trace's cell)."""
        w = self.workloads.get(cell.domain)
        if w is None or w.arrivals is None:
            return None
        return w.speeds[w.rates.index(cell.rate)]

    def trace_record(self, cell: Cell) -> TraceArrival | None:
        """A trace cell's `arrival` record in its summary: the trace, its speed and its requests."""
        speed = self.trace_speed(cell)
        if speed is None:
            return None
        return TraceArrival(speed=speed, requests=len(self.workloads[cell.domain].prompts))

    def prompts(self, cell: Cell) -> list[Prompt]:
        """The prompts a cell sends, warmup first: the same for every arm. A trace's cell: its requests in
        time order (request i is prompt i; warmup requests are resent from its end)."""
        m, w = self.m, self.workloads[cell.domain]
        if w.arrivals is not None:
            return list(w.prompts)
        n = m.warmup_at(cell.concurrency) + (m.requests or max(len(w.prompts), 1))
        return cell_prompts(w.prompts, n, cell_seed(m.seed, cell.domain, cell.concurrency, cell.repeat, cell.rate))

    def request_params(self, arm: str) -> dict:  # json-edge: the preset's request body fields
        return self.env_of(arm).request_params.get(self.preset_name(arm), {})

    def preset_arm(self, arm: str) -> str:
        """The Matrix's arm a run arm runs (a synthetic arm: its speculative arm; any other: itself)."""
        s = self.synthetic.get(arm)
        return s.arm if s is not None else arm

    def preset_name(self, arm: str) -> str:
        """The Environment preset a run arm serves (a synthetic arm: its speculative arm's; an arm of another
        Environment: its `preset:`)."""
        s = self.sources.get(self.preset_arm(arm))
        return s.preset if s is not None else self.preset_arm(arm)

    def synthetic_env(self, arm: str) -> dict[str, str]:  # data-keyed: environment variable
        """What a synthetic arm adds to its server's environment (SGLang's simulate knobs); {} for the others."""
        s = self.synthetic.get(arm)
        return s.env if s is not None else {}

    def synthetic_level(self, arm: str) -> float | None:
        """The acceptance length an arm's server is forced to: a synthetic arm's, or SGLANG_SIMULATE_ACC_LEN set
        by hand in target.env or the Environment's env: (a speculative SGLang arm the toolkit starts), so the
        archive says the acceptance was forced however it was. None: real acceptance."""
        s = self.synthetic.get(arm)
        if s is not None:
            return s.accept_len
        env = self.env_of(arm)
        if not engines.get(env.engine).synthetic_acceptance or not self.target.starts_servers:
            return None
        if not preset_meaning(env, self.preset_name(arm)).speculative:
            return None
        return sglang.simulated_length({**env.env, **self.m.target.env_of(env.engine)})

    def is_dummy(self, arm: str, info: ArmState | None = None) -> bool:
        """Does this arm serve random weights? Of a server the toolkit did not start (an external target) only
        what the server says about itself counts (`info`: its arm facts, SGLang's load_format)."""
        if not self.target.starts_servers:
            return sglang.server_says_dummy(info and info.model_extra)  # the facts' extras keep its load_format
        return preset_meaning(self.env_of(arm), self.preset_name(arm)).dummy_weights

    def launcher_kwargs(self, slot: Slot, arm: str, log_dir: Path) -> LaunchArgs:
        """How the slot's target becomes the arm's launcher: the target kind's keywords (toolkit.targets)."""
        return self.target.launcher_kwargs(self, slot, arm, log_dir)

    def resume(self, resumed: Manifest, done: set[str]) -> None:
        """Resuming a run: only the cells it lacks, its image and launch rounds; the same matrix spec."""
        if resumed.matrix.hash and resumed.matrix.hash != self.hashes["matrix"]:
            raise ToolkitError(f"the matrix spec changed since run {resumed.run_id} started",
                               hint="resume with the same spec, or start a new run", file=self.spec.path)
        if self.m.sweep is not None:  # the rates it recorded, never probed again
            if resumed.sweep is None:
                raise ToolkitError(f"run {resumed.run_id} is a sweep without recorded rates (manifest `sweep`)",
                                   hint="start a new run", file=self.spec.path)
            self.set_sweep(resumed.sweep)
        self.todo = {arm: [c for c in cells if c.key not in done] for arm, cells in self.todo.items()}
        self.build = resumed.build
        for arm, rec in resumed.arms.items():  # another Environment's image, as the arm's record names it
            if rec.environment is not None and rec.environment.hash and rec.environment.build is not None:
                self.builds[rec.environment.hash] = rec.environment.build
        if resumed.rounds:
            self.rounds = [list(r) for r in resumed.rounds]
            self.round_seed = resumed.round_seed


def _hash(spec: LoadedSpec) -> str:
    from toolkit.render import template_version

    return spec_hash(spec, template_version())


def find_build(env_spec: LoadedSpec, env_hash: str | None = None) -> BuildRecord | None:
    """The build record of this environment's image (`toolkit build env`), if one was made here."""
    if not engines.get(env_spec.model.engine).builds_image:
        return None
    from toolkit.image.records import find_build_record

    return find_build_record(env_hash or _hash(env_spec))


def load_workloads(spec: LoadedSpec, training: Path | None = None) -> dict:  # data-keyed: workload
    """The matrix's workloads by name (`training`: its training_data, resolved; resolved here when not given)."""
    from toolkit.workloads import load_workload

    m: Matrix = spec.model
    if training is None and m.training_data:
        training = spec.path_of(("training_data",), m.training_data)
    out = {}
    for i, ref in enumerate(m.workloads):
        if getattr(ref, "trace", None):  # a missing trace: an error at its line in the spec
            spec.path_of(("workloads", i, "trace"), ref.trace, file=True)
        try:
            w = load_workload(ref, base_dir=spec.path.parent, seed=m.seed, training=training, output_len=m.output_len)
        except ToolkitError as exc:
            if exc.file is None:
                raise spec.error(("workloads", i), exc.message, exc.hint) from None
            raise
        out[w.name] = w
    return out


def _representativeness(m: Matrix, training: Path | None, workloads: dict) -> list[dict]:
    if training is None:
        return []
    from toolkit.workloads.bundled import read_prompts
    from toolkit.workloads.represent import representativeness

    train = read_prompts(training)
    out = []
    for w in workloads.values():
        rep = representativeness(train, w.prompts, train_name=m.training_data, workload_name=w.name,
                                 workload_hash=w.hash)
        out.append({"workload": w.name, "verdict": rep.verdict, "divergence": rep.score, "reason": rep.reason,
                    "report": rep.model_dump(mode="json")})
    return out


def check_matrix(spec: LoadedSpec) -> LoadedSpec:
    """What a run refuses of a Matrix before it starts, without starting anything, through the functions the
    runs call themselves: the target as plan_target plans it (arms, synthetic acceptance, paths, hosts, slots,
    a Slurm target's job folder) and every workload read (load_workloads: a trace file's every line, a prompt
    file, a bundled name). Returns the matrix's Environment. `toolkit validate` calls it, then the tuner's
    check of the `tune:` block (the tuner sits above bench, so bench does not call it), so validate refuses
    what a run would. (The Environment is validated as a spec of its own: `toolkit validate env.yaml`.)"""
    plan = plan_target(spec)
    load_workloads(spec, plan.paths.training_data)
    return plan.env_spec


def load_env_spec(spec: LoadedSpec, keypath: tuple, rel: str) -> LoadedSpec:
    """The Environment a Matrix names at `keypath` (`environment:`, or an arm's `environment:`): a missing file,
    a folder or another kind of spec is an error at that key's line."""
    env_path = spec.path_of(keypath, rel, file=True)
    try:
        return load_spec(env_path, expect="Environment")
    except SpecError as exc:
        if exc.message.startswith("expected an Environment spec") and Path(exc.file) == env_path:
            raise spec.error(keypath, f"{rel} is not an Environment spec: {exc.message.split(', ', 1)[-1]}",
                             hint=exc.hint) from None
        raise


def check_presets(spec: LoadedSpec, env_spec: LoadedSpec, arms: list[tuple[int, str, tuple]], rel: str) -> None:
    """Every (index, preset, keypath) a server preset of env_spec; else an error at the first one's line."""
    presets = list(env_spec.model.servers)
    missing = [(i, p, key) for i, p, key in arms if p not in presets]
    if missing:
        _, preset, key = missing[0]
        names = [p for _, p, _ in missing]
        raise spec.error(key, f"arm(s) {names} are not server presets of {rel}", hint=did_you_mean(preset, presets) or f"presets there: {', '.join(presets)}")


def load_arm_sources(spec: LoadedSpec, primary: LoadedSpec) -> dict[str, ArmSource]:  # data-keyed: arm
    """The arms listed as `{name, environment, preset}`, each with its Environment (a file loaded once, the
    primary's own object where it is the same file) and preset, checked: the file is an Environment, the
    preset one of its servers."""
    from toolkit.render import template_version

    loaded: dict[Path, LoadedSpec] = {primary.path.resolve(): primary}
    hashes: dict[Path, str] = {}
    out: dict[str, ArmSource] = {}
    for i, a in enumerate(spec.model.arms):
        if isinstance(a, str):
            continue
        path = spec.path_of(("arms", i, "environment"), a.environment, file=True).resolve()
        if path not in loaded:
            loaded[path] = load_env_spec(spec, ("arms", i, "environment"), a.environment)
        key = ("arms", i, "preset") if spec.mark(("arms", i, "preset")) else ("arms", i)
        check_presets(spec, loaded[path], [(i, a.preset, key)], a.environment)
        if path not in hashes:
            hashes[path] = spec_hash(loaded[path], template_version())
        out[a.name] = ArmSource(loaded[path], a.preset, i, hashes[path])
    return out


def load_environment(spec: LoadedSpec) -> LoadedSpec:
    """The matrix's Environment, with every arm named by a string one of its server presets (the arms of other
    Environments: toolkit.bench.sources.load_arm_sources)."""
    if not isinstance(spec.model, Matrix):
        raise SpecError(f"{spec.path} is a {spec.kind} spec; bench matrix needs a Matrix", file=spec.path)
    m: Matrix = spec.model
    env_spec = load_env_spec(spec, ("environment",), m.environment)
    check_presets(spec, env_spec, [(i, a, ("arms", i)) for i, a in enumerate(m.arms) if isinstance(a, str)],
                  m.environment)
    return env_spec


def plan_target(spec: LoadedSpec) -> RunPlan:
    """The part of the plan that says where the arms run: the Environment and Hosts spec loaded, every path
    resolved, the slots. Every spec mistake of the target is found here, before anything about this machine."""
    env_spec = load_environment(spec)
    sources = load_arm_sources(spec, env_spec)
    declared, declared_spec = spec.model, spec
    spec, synthetic = expand_synthetic(spec, env_spec, sources)  # the arms as they run
    paths = resolve_paths(spec, env_spec)
    target = targets.get(spec.model.target.kind)
    hosts_spec = load_spec(paths.hosts, expect="Hosts" if target.reads_hosts_spec else None) if paths.hosts else None
    plan = RunPlan(spec, env_spec, {}, [], {}, paths=paths, hosts_spec=hosts_spec, synthetic=synthetic,
                   declared=declared, sources=sources)
    # the engine whose rules the slots follow: one that needs GPUs of its own, where any arm's does
    exclusive = [e for e in plan.arm_engines if engines.get(e).exclusive_gpus]
    plan.slots = plan_slots(spec, (exclusive or plan.arm_engines)[0], hosts_spec)
    for e in plan.env_specs():  # every arm's engine runs under the target's launcher
        target.check(declared_spec, e)
    check_ignore_eos(plan, declared_spec)
    declared_spec.warnings.extend(n for n in request_param_notes(plan) if n not in declared_spec.warnings)
    stray = [e for e in spec.model.target.engines if e not in plan.arm_engines]
    if stray:  # a misspelt engine would leave its arms on the target's own Python and environment
        raise declared_spec.error(("target", "engines", stray[0]), f"engine {stray[0]!r} serves none of the arms "
                                  f"(their engines: {', '.join(plan.arm_engines)})",
                                  hint=did_you_mean(stray[0], plan.arm_engines) or "remove it")
    return plan


def plan_run(spec: LoadedSpec, *, resumed: Manifest | None = None, done: set[str] = frozenset(),
             round_seed: int | None = None) -> RunPlan:
    """The plan of a new run, or of resuming one (`resumed`: its manifest; `done`: keys of its written cells).
    `round_seed`: the seed of the launch rounds' arm orders (default: drawn afresh; a run's recorded one replays
    its orders).
    A resumed run keeps its image and must use the same matrix spec. The one reader of the Matrix spec in a
    run: everything below works from the plan."""
    plan = plan_target(spec)
    m = plan.m
    plan.hashes = {"matrix": _hash(spec), "environment": _hash(plan.env_spec)}  # the spec as written
    plan.workloads = load_workloads(spec, plan.paths.training_data)
    traced = trace_levels(m, plan.workloads)
    plan.todo = {arm: plan_cells(m, list(plan.workloads), arm, traced) for arm in m.arm_names}
    plan.build = find_build(plan.env_spec, plan.hashes["environment"])
    for s in plan.sources.values():  # the image of each other Environment, by its own hash
        if s.env_spec is not plan.env_spec and s.hash not in plan.builds:
            plan.builds[s.hash] = find_build(s.env_spec, s.hash)
    plan.representativeness = _representativeness(m, plan.paths.training_data, plan.workloads)
    plan.round_seed = draw_round_seed() if round_seed is None else round_seed
    plan.rounds = plan_rounds(m, plan.round_seed)
    if resumed is not None:
        plan.resume(resumed, done)
    elif done:
        plan.todo = {arm: [c for c in cells if c.key not in done] for arm, cells in plan.todo.items()}
    return plan


def run_manifest(plan: RunPlan, commands: dict[str, Any]) -> Manifest:
    """The plan written down (manifest.json): specs with hashes, the image, every arm's preset and exact
    command, the slots, the workloads and the hosts. The archive adds schema version, run id, start time
    and toolkit version."""
    from toolkit.bench.hostinfo import host_fingerprint

    m, env = plan.m, plan.env_spec.model
    return Manifest.model_validate({
        "matrix": {"name": m.name, "path": str(plan.spec.path), "hash": plan.hashes["matrix"],
                   "resolved": (plan.declared or m).model_dump(mode="json")},
        "environment": {"name": env.name, "path": str(plan.env_spec.path), "hash": plan.hashes["environment"],
                        "resolved": env.model_dump(mode="json")},
        "build": plan.build,
        "arms": {a: arm_record(plan, a, commands.get(a)) for a in m.arm_names},
        "baseline": m.baseline_arm,
        "slots": [{"name": s.name, "arms": s.arms, "hardware": s.hardware,
                   "target": s.target.record()} for s in plan.slots],
        "workloads": {n: {"hash": w.hash, "n_prompts": len(w.prompts), "source": str(w.source)}
                      for n, w in plan.workloads.items()},
        "host": host_fingerprint(plan.slots),
        "launches": m.launches,
        "rounds": plan.rounds,
        "round_seed": plan.round_seed,
        "determinism": determinism(plan),
        **({"sweep": plan.sweep.written()} if plan.sweep is not None else {}),
    })


def synthetic_record(plan: RunPlan, arm: str) -> SyntheticAcceptance | None:
    """The manifest's word on an arm whose acceptance is forced (None: real acceptance): {of, accept_len, env} (a
    synthetic arm), or {of, accept_len, source, env} where SGLANG_SIMULATE_ACC_LEN was set by hand."""
    s = plan.synthetic.get(arm)
    if s is not None:
        return s.record()
    level = plan.synthetic_level(arm)
    if level is None:
        return None
    env = {**plan.env_of(arm).env, **plan.m.target.env_of(plan.engine_of(arm))}
    return SyntheticAcceptance(of=arm, accept_len=level, source="set by hand in the servers' environment",
                               env={k: v for k, v in env.items() if k.startswith("SGLANG_SIMULATE_ACC")})


def arm_record(plan: RunPlan, arm: str, command: Any) -> ArmRecord:
    """One arm as the manifest lists it: its preset, request parameters and command, how its acceptance was
    forced where it was, and the Environment it comes from where the Matrix lists it as `{name, environment,
    preset}` (each set only then: an older manifest's arms read the same)."""
    forced = synthetic_record(plan, arm)
    s = plan.source(arm)
    where = ArmEnvironmentRecord(name=s.env_spec.model.name, path=str(s.env_spec.path), hash=s.hash,
                                 engine=s.env_spec.model.engine, preset=s.preset,
                                 resolved=s.env_spec.model.model_dump(mode="json"),
                                 **({"build": plan.build_of(arm)} if plan.build_of(arm) is not None else {})) \
        if s is not None else None
    return ArmRecord(preset=plan.env_of(arm).servers[plan.preset_name(arm)], request_params=plan.request_params(arm),
                     command=command, **({"synthetic_acceptance": forced} if forced is not None else {}),
                     **({"environment": where} if where is not None else {}))


def _config_sha(preset: dict) -> str | None:
    """sha256 of the model's config.json where this machine has it (a dummy model is its config and a seed)."""
    from toolkit.specs import sha256_file

    path = sglang.model_path(preset)
    cfg = Path(str(path)) / "config.json" if path else None
    return sha256_file(cfg) if cfg is not None and cfg.is_file() else None


def determinism(plan: RunPlan) -> Determinism:
    """What makes the generated tokens repeat from one launch to the next (docs/results.md#launch-noise):
    greedy sampling with a fixed seed, the same weights (a dummy model's recipe hash; SGLang's dummy weights
    come from a fixed seed), and per arm whether deterministic inference is on."""
    m = plan.m
    out = Determinism(temperature=m.temperature, seed=m.seed, greedy=m.temperature == 0)
    # arms whose engine fills dummy weights from a seed (SGLang)
    seeded = [a for a in m.arm_names if engines.get(plan.engine_of(a)).dummy_weight_seed is not None]
    if seeded:
        dummy = [a for a in seeded if plan.is_dummy(a)]
        if dummy:
            out.sglang_dummy_weights = {"arms": dummy, "seed": sglang.DUMMY_WEIGHT_SEED,
                                        "source": sglang.DUMMY_WEIGHT_SOURCE,
                                        "config_sha256": {a: _config_sha(plan.env_of(a).servers[plan.preset_name(a)])
                                                          for a in dummy}}
        out.deterministic_inference = {a: bool(plan.env_of(a).servers.get(plan.preset_name(a), {})
                                               .get(sglang.DETERMINISTIC)) for a in seeded}
    if len(seeded) < len(m.arm_names):  # the embedded engine's dummy model, made from the first such spec
        made = next((e for e in plan.env_specs() if e.model.model is not None and e.model.model.dummy is not None
                     and not engines.get(e.model.engine).dummy_weight_seed), None)
        if made is not None:
            from toolkit.bench.inputs import dummy_record

            rec = dummy_record(made)
            out.dummy_model = rec.hash if rec is not None else None
    return out
