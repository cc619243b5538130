"""What a run archive says about itself: manifest.json (written when the run starts) and summary.json
(written at finalize), with the derived block (speedups, crossovers, methodology checks, server facts,
timing) inside it. Typed, so every reader uses the same names and none needs fallbacks.

    Manifest  manifest.json     specs (resolved), image build record, arms (preset, command), slots,
                                workloads, host fingerprints, inputs (the files the run read, archived
                                under inputs/); for imports: source, engine_versions; for a replay:
                                reproduces (the original's run id) and drift; for a Slurm target:
                                slurm (where the load generator ran, the rendered job scripts, and
                                the jobs: ids, nodes, states, amended while the run is open)
    Summary   summary.json      status, finish time, the cells, and `derived`
    Derived   summary.derived   what the runner worked out from the cells

The archive's `schema_version` (toolkit.schema.keys.SCHEMA_VERSION) versions all three. The loaders
(`load_manifest`, `load_summary`) accept every shape an archive of a version this toolkit reads may
carry, and map it to the model once; an archive on disk is never rewritten:

    version 1, older writers     matrix/environment `spec`  -> `resolved`
                                 `image` (build record)     -> `build`
                                 arms.<arm>.`server_args`   -> `preset`
                                 `toolkit_version`, `git_revision` -> toolkit.version, toolkit.git_sha
                                 `host: <fingerprint>`, `hosts: {..}` -> host.controller, host.hosts
                                 workloads.<name>: "<hash>" -> {hash}
                                 derived `checks` / `warnings` / `methodology_checks` -> methodology
                                 (a plain string check -> {message})
                                 summary without `interrupted`: `partial` -> interrupted; `complete` ->
                                 the status its cells give (failed cells made a run complete then)

Fields that readers use are typed; anything else an archive carries is kept as an extra field, so a
newer writer's additions (or an old writer's leftovers) survive reading. Bump SCHEMA_VERSION only when
a reader of the current version would misread the written shape, and keep reading the old one here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_serializer, model_validator

from toolkit.engines.facts import ServerState
from toolkit.errors import ToolkitError
from toolkit.schema.keys import FORMAT, SCHEMA_VERSION, run_status
from toolkit.schema.records import CellSummary
from toolkit.schema.slo import SloAnalysis
from toolkit.schema.sweep import SweepRecord

MIN_SCHEMA_VERSION = 1
NOISE_CALIBRATION = "noise-calibration"


class _Open(BaseModel):
    """Typed where readers look; any other field the archive holds is kept (extra='allow')."""

    model_config = ConfigDict(extra="allow")


class _AsGiven(_Open):
    """A record the archive kept as a plain mapping before it was typed (a slot's hardware, a GPU, a command's
    error): it dumps the keys it was given, in the order given (read from a file, or made), then any field set
    since, so manifest.json, summary.json and every --json print it as they did."""

    _given: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _note_keys(cls, data: Any, handler: Any) -> Any:
        record = handler(data)
        if isinstance(data, dict):
            record._given = tuple(data)
        return record

    @model_serializer(mode="wrap")
    def _as_given(self, handler: Any) -> Any:  # json-edge: the mapping as the archive's files hold it
        dumped = handler(self)
        order = [*self._given, *(k for k in dumped if k not in self._given and k in self.model_fields_set)]
        return {k: dumped[k] for k in order if k in dumped}


# -- manifest.json

class SpecRecord(_Open):
    """The Matrix or Environment spec a run used: where it was, its hash, and the resolved model."""

    name: str | None = None
    path: str | None = None
    hash: str | None = None
    resolved: dict[str, Any] = Field(default_factory=dict, description="the spec after extends, as a dict")


class SyntheticAcceptance(_Open):
    """An arm whose acceptance length was forced (toolkit.bench.plan): a synthetic arm of the Matrix's
    `synthetic_acceptance:` ({of, accept_len, env}), or SGLANG_SIMULATE_ACC_LEN set by hand in the servers'
    environment ({of, accept_len, source, env})."""

    of: str | None = Field(None, description="the speculative arm (server preset) it runs")
    accept_len: float | None = None
    source: str | None = Field(None, description="set by hand: where the length came from")
    env: dict[str, str] = Field(default_factory=dict, description="the simulate variables its servers got")


class CommandError(_AsGiven):
    """An arm whose launcher could not be made: why (its manifest `command`, written as {error})."""

    error: str


class ArmRecord(_Open):
    """One arm as planned: the server preset (flags without dashes), per-request parameters, and the
    exact command its launcher runs (a string; a list from older writers; a CommandError when none could be
    made)."""

    preset: dict[str, Any] = Field(default_factory=dict)
    request_params: dict[str, Any] = Field(default_factory=dict)
    command: str | list[str] | CommandError | None = None
    synthetic_acceptance: SyntheticAcceptance | None = None
    environment: "ArmEnvironmentRecord | None" = Field(
        None, description="an arm the Matrix lists as {name, environment, preset}: the Environment it comes from "
                          "(absent: the run's `environment`)")


class TargetRecord(_Open):
    """A slot's target as the manifest names it (each kind's SlotTarget.record(), toolkit/targets/): its kind and
    the fields of that kind that were set."""

    kind: str | None = None
    gpus: str | None = Field(None, description="local: the GPU set its arms see (absent: all)")
    urls: dict[str, str] | None = Field(None, description="external: arm -> base URL")
    host: str | None = Field(None, description="hosts: the host's name in its Hosts spec")
    hosts_path: str | None = Field(None, description="hosts: the Hosts spec (the address and user stay there)")
    launcher: str | None = Field(None, description="slurm: process or container")
    loadgen: str | None = Field(None, description="slurm: where each cell's load generator ran")
    partition: str | None = Field(None, description="slurm: the partition, where the spec names one")


class Hardware(_AsGiven):
    """What a slot's arms load, or where a launch's server came up (a Slurm job's node): a host and its GPUs.
    Slots whose hardware overlaps are never measured at the same time (toolkit.targets.shares_hardware)."""

    host: str | None = Field(None, description='"localhost", a provisioned host\'s address, a URL\'s host, a node')
    gpus: str = Field("all", description='the GPU indices ("0,1"), or "all"')


class SlotRecord(_Open):
    name: str
    arms: list[str] = Field(default_factory=list)
    hardware: Hardware = Field(default_factory=Hardware, description="what 'shared' means")
    target: TargetRecord = Field(default_factory=TargetRecord, description="kind (local|hosts|external|slurm) "
                                                                           "and details")


class WorkloadRecord(_Open):
    hash: str | None = None
    n_prompts: int | None = None
    source: str | None = None


class GpuTopology(_Open):
    """`nvidia-smi topo -m` (toolkit.gpu.smi.parse_topo_matrix): the GPUs, each pair's link as printed (NV#, PIX,
    SYS, ...), each GPU's CPU/NUMA affinity; with the text it was read from, or the error that stopped it."""

    gpus: list[str] = Field(default_factory=list)
    links: dict[str, str] = Field(default_factory=dict, description='"GPU0-GPU1" -> the link')
    affinity: dict[str, dict[str, str]] = Field(default_factory=dict)
    text: str | None = None
    error: str | None = None


class GpuDevice(_AsGiven):
    """One GPU as `nvidia-smi -q -x` describes it (toolkit.gpu.smi): what identifies it, its memory, power,
    clocks, ECC and modes, each number in nvidia-smi's unit (named in the field); None where it reports N/A or
    nothing."""

    index: int | None = Field(None, description="nvidia-smi's index (its order in the log)")
    minor_number: int | None = None
    name: str | None = None
    brand: str | None = None
    architecture: str | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    vbios: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    memory_reserved_mib: int | None = None
    power_limit_w: float | None = None
    power_limit_default_w: float | None = None
    power_limit_max_w: float | None = None
    power_draw_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    sm_clock_app_mhz: int | None = None
    ecc_mode: str | None = None
    ecc_errors_uncorrected_volatile: int | None = None
    ecc_errors_corrected_volatile: int | None = None
    persistence_mode: str | None = None
    mig_mode: str | None = None
    compute_mode: str | None = None
    performance_state: str | None = None
    temperature_c: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_max: str | None = None

    @property
    def identity(self) -> str | None:
        """What tells this GPU from any other: its UUID, else its serial (None: neither recorded)."""
        return self.uuid or self.serial


class GpuFingerprint(_Open):
    """The GPU stage's fingerprint (toolkit.gpu.smi.gpu_fingerprint): `nvidia-smi -q -x` read into the driver and
    CUDA versions and one GpuDevice per GPU (index, name, uuid, serial, memory, clocks, power, ECC, ...), the
    topology, and the source; a failing nvidia-smi is recorded as `error` (a fingerprint records what the machine
    said)."""

    timestamp: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    count: int | None = None
    gpus: list[GpuDevice] = Field(default_factory=list, description="one per GPU, in nvidia-smi's order")
    topology: GpuTopology | None = None
    source: str | None = None
    error: str | None = None


class Fingerprint(_Open):
    """A host fingerprint (toolkit.bench.hostinfo, toolkit.provision.fingerprint). `gpu` is the GPU
    stage's fingerprint (driver_version, cuda_version, gpus[], topology); older ones put `gpus`,
    `driver`, `cuda` at top level."""

    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None
    memory_bytes: int | None = None
    python: str | None = None
    engines: dict[str, str | None] = Field(default_factory=dict)
    gpu: GpuFingerprint | None = None
    gpus: list[Any] | None = Field(None, description="an older writer's GPUs (Fingerprint.devices reads them)")
    env: dict[str, str] = Field(default_factory=dict)  # the controller's engine variables (hostinfo.ENGINE_ENV_PREFIXES)
    driver: str | None = None
    cuda: str | None = None

    @property
    def devices(self) -> list[GpuDevice]:
        """Its GPUs: the GPU stage's (`gpu.gpus`), else an older writer's top-level `gpus` (a mapping read as a
        GpuDevice, its `product_name` as the name where it has none; anything else as a name)."""
        if self.gpus is None:
            return list(self.gpu.gpus) if self.gpu else []
        return [GpuDevice.model_validate({"name": g.get("product_name"), **g}) if isinstance(g, dict)
                else GpuDevice(name=str(g)) for g in self.gpus]


class HostRecord(_Open):
    """The controller (the machine that ran the toolkit) and every provisioned host an arm ran on."""

    controller: Fingerprint | None = None
    hosts: dict[str, Fingerprint] = Field(default_factory=dict)

    @property
    def primary(self) -> Fingerprint:
        """The host the arms ran on: the first provisioned host, else the controller."""
        return next(iter(self.hosts.values()), None) or self.controller or Fingerprint()


class BuildRecord(_Open):
    """The image's build record (toolkit.image.records), or an import's image facts."""

    image_id: str | None = None
    id: str | None = None
    tags: list[str] | None = None
    labels: dict[str, str] | None = None
    spec_hash: str | None = None
    sglang_version: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    patches: list[Any] | dict[str, Any] | None = None
    revision: str | None = None

    @property
    def served_version(self) -> str | None:
        """The engine version the image serves: `engine_version` (every engine's build record since vLLM
        images), else `sglang_version` (SGLang records before it)."""
        return self.engine_version or self.sglang_version

    @property
    def image(self) -> str | None:
        """What names the image for `docker run`: its first tag, else its id."""
        return (self.tags or [None])[0] or self.image_id or self.id


class ArmEnvironmentRecord(_Open):
    """The Environment an arm's server comes from, where it is not the run's own (engines as arms)."""

    name: str | None = None
    path: str | None = None
    hash: str | None = None
    engine: str | None = None
    preset: str | None = Field(None, description="its server preset there")
    build: BuildRecord | None = Field(None, description="the image its servers ran (an engine whose image the "
                                                        "toolkit builds)")
    resolved: dict[str, Any] | None = Field(None, description="the Environment as the run read it (as the "
                                            "manifest's `environment.resolved`): what `results show` compares with "
                                            "the run's own, field by field")


ArmRecord.model_rebuild()


class ToolkitRecord(_Open):
    version: str | None = None
    git_sha: str | None = None


class SourceRecord(_Open):
    """Where an imported run came from (`toolkit results import`)."""

    format: str = "toolkit"
    tool: str | None = None
    file: str | None = None
    sha256: str | None = None
    runs: int | None = None
    arms: dict[str, dict[str, Any]] = Field(default_factory=dict, description="several files imported as arms "
                                            "of one run: per arm, its file's record (file, sha256, runs, ...)")
    baseline: str | None = Field(None, description="several files: the arm the others are compared with")
    pairing: str | None = Field(None, description="several files: prompt-hashes | asserted (--same-prompts) | "
                                "unpaired (toolkit/results/importarms.py)")


class InputFile(_Open):
    """One file (or directory) the run read. `path` is its place in the replay tree: the files keep their
    layout relative to their common folder, so relative paths in the specs still resolve. Archived files
    lie at inputs/files/<path> (or <store>/<sha256>: a tune session's runs share one copy); references
    (CA bundles, a model directory) are checked at `source`."""

    ref: str = Field(description="what needed it: matrix, environment, <spec>:<field> (e.g. matrix:workloads[0].path)")
    role: str = Field(description="spec | patch | workload | holdout | training_data | ca_bundle | model | model_file")
    path: str = Field(description="place in the replay tree, relative POSIX")
    source: str | None = Field(None, description="where the run read it (absolute)")
    sha256: str | None = Field(None, description="of the bytes the run read (a directory: none, see files)")
    size: int | None = None
    archived: bool = Field(True, description="bytes under inputs/files/<path>; false: a reference only")
    scrubbed: bool = Field(False, description="secret-looking text was masked when archived: not the original bytes")
    store: str | None = Field(None, description="archived in a shared store instead of inputs/files/<path>: the "
                              "folder (relative to the run, e.g. ../../inputs/sha256 in a tune session) holding "
                              "the bytes as <store>/<sha256>, once for every run of the session")
    files: dict[str, str] = Field(default_factory=dict, description="a referenced directory: sha256 of its small files")


class DummyModelRecord(_Open):
    """The dummy model an Environment's `model: {dummy: ...}` makes (toolkit.serve.dummy): its hash and recipe."""

    hash: str | None = None
    recipe: str | None = None


class InputsRecord(_Open):
    """What `toolkit results reproduce` replays from: the archived files and the references."""

    layout: int = 1
    matrix: str = Field(description="tree path of the Matrix spec the run loaded")
    files: list[InputFile] = Field(default_factory=list)
    dummy_model: DummyModelRecord | None = Field(None, description="{hash, recipe}: the dummy model made from the spec")


class DriftRecord(_Open):
    """Something a reproduction ran with that differs from the original (GPU model, engine version,
    target, how the spec resolves), accepted with --allow-drift or asked for (--target, --image)."""

    what: str
    original: Any = None
    current: Any = None


class SlurmJobRecord(_Open):
    """One job a run on a Slurm target submitted: one launch of one arm's server."""

    job_id: str
    arm: str
    launch: int = 0
    job_name: str | None = None
    node: str | None = Field(None, description="where its server came up (None: it never ran)")
    gpus: str | None = Field(None, description="the GPUs Slurm gave it (SLURM_JOB_GPUS), `all` when it got none "
                                               "of its own")
    state: str | None = Field(None, description="its state when last seen; after the stop, how it ended")
    steps: dict[str, str] = Field(default_factory=dict, description="cell key -> the job step (JOBID.STEPID) the "
                                  "cell's load generator ran as (loadgen job-step)")


class SlurmRecord(_Open):
    """A run on a Slurm target: where its load generator ran, the job scripts it rendered, the jobs it submitted."""

    loadgen: str = Field("submit-host", description="`job-step`: each cell's load generator ran as a step of its "
                         "arm's job, on the server's node; `submit-host`: on the host that submitted the jobs (so in "
                         "archives written before the field)")
    scripts: dict[str, str] = Field(default_factory=dict, description="arm -> its sbatch script as rendered "
                                    "and submitted (also archived as slurm/<arm>.sbatch)")
    jobs: list[SlurmJobRecord] = Field(default_factory=list, description="in submission order, a resumed run's "
                                       "added; each written when submitted and again when it ended")


class Determinism(_Open):
    """What makes the generated tokens repeat across launches (toolkit.bench.plan.determinism,
    docs/results.md#launch-noise)."""

    temperature: float | None = None
    seed: int | None = None
    greedy: bool | None = None
    sglang_dummy_weights: dict[str, Any] | None = Field(None, description="arms serving SGLang's dummy weights: "
                                                        "{arms, seed, source, config_sha256}")
    deterministic_inference: dict[str, bool] | None = Field(None, description="per arm (SGLang)")
    dummy_model: str | None = Field(None, description="the embedded engine's dummy model: its recipe hash")


class Manifest(_Open):
    """manifest.json. The runner (and the importer) fill the body; the archive writer adds format,
    schema_version, run_id, matrix_name, started_at and toolkit."""

    format: str = FORMAT
    schema_version: int = SCHEMA_VERSION
    run_id: str | None = None
    matrix_name: str | None = None
    started_at: str | None = None
    toolkit: ToolkitRecord = Field(default_factory=ToolkitRecord)
    matrix: SpecRecord = Field(default_factory=SpecRecord)
    environment: SpecRecord = Field(default_factory=SpecRecord)
    build: BuildRecord | None = None
    arms: dict[str, ArmRecord] = Field(default_factory=dict)
    baseline: str | None = None
    slots: list[SlotRecord] = Field(default_factory=list)
    workloads: dict[str, WorkloadRecord] = Field(default_factory=dict)
    host: HostRecord = Field(default_factory=HostRecord)
    engine_versions: dict[str, str] = Field(default_factory=dict, description="imports: what the tool reported")
    source: SourceRecord | None = None
    inputs: InputsRecord | None = Field(None, description="absent in archives written before inputs/ existed")
    reproduces: str | None = Field(None, description="run id of the run this one replays")
    drift: list[DriftRecord] = Field(default_factory=list)
    purpose: str | None = Field(None, description="`noise-calibration`: an A/A run made by `toolkit bench noise`, "
                                                  "found again by GPU model + environment hash")
    launches: int = Field(1, description="server launches per arm (the Matrix's `launches:`)")
    rounds: list[list[str]] = Field(default_factory=list, description="per launch round, the order the arms were "
                                    "launched in (seeded, random per round when launches > 1)")
    round_seed: int | None = Field(None, description="the seed the rounds' arm orders were drawn from, drawn "
                                   "afresh per run (absent in older archives: their orders came from the Matrix's "
                                   "`seed`, the same every run)")
    slurm: SlurmRecord | None = Field(None, description="a Slurm target: load generator placement, job scripts, "
                                      "jobs (absent in other runs and in Slurm runs before the field)")
    sweep: SweepRecord | None = Field(None, description="a Matrix `sweep:`: the rates every arm ran and how the "
                                      "baseline's probes set them (absent in other runs)")
    determinism: Determinism | None = Field(None, description="what makes the generated tokens repeat across "
                                            "launches: temperature, seed, dummy-model recipe hash, SGLang's "
                                            "dummy-weight seed, deterministic inference per arm (absent in older "
                                            "archives)")

    @property
    def is_noise_calibration(self) -> bool:
        return self.purpose == NOISE_CALIBRATION

    def written(self) -> dict:  # json-edge: manifest.json as written
        """The JSON the writer stores: only the fields that were set (no defaults invented)."""
        return self.model_dump(mode="json", exclude_unset=True)


# -- summary.json: derived

class Speedup(_Open):
    """A speculative (or any non-baseline) arm against the baseline at one (domain, concurrency)."""

    arm: str
    baseline: str | None = None
    domain: str
    concurrency: int
    rate: float | None = Field(None, description="open loop (`rates:`): the level is this rate, req/s; the "
                                                 "concurrency is then the cap on requests in flight")
    arm_tok_s: float | None = None
    baseline_tok_s: float | None = None
    throughput_ratio: float | None = None
    paired_ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_pairs: int = 0
    excluded: list[str] = Field(default_factory=list, description="why no verdict uses this level "
                                "(toolkit/schema/eligibility.py), per arm")
    qualified: list[str] = Field(default_factory=list, description="what a verdict using it must name")
    rounds: int = Field(1, description="launch rounds both arms ran (the paired ratio is per round, then combined)")
    synthetic_acceptance: float | None = Field(None, description="the arm's forced acceptance length "
                                               "(CellSummary.synthetic_acceptance): a synthetic speed-up; None: real")
    ci_method: str = Field("paired bootstrap over the requests", description="how the CI was made: a t-interval "
                           "over rounds, or the request bootstrap widened by a launch noise (named)")


class Crossover(_Open):
    arm: str
    domain: str
    crossover_concurrency: int | None = None
    crossover_rate: float | None = Field(None, description="open loop: the crossover as a rate, req/s")
    never_pays_off: bool = False
    recommended_disable_batch_threshold: int | None = None
    no_advice: bool = Field(False, description="no tested level is one a verdict may use: no advice at all")
    levels: list[int | float] = Field(default_factory=list, description="levels the verdict used (rates: req/s)")
    excluded: list[int | float] = Field(default_factory=list, description="levels left out of the verdict")
    qualified: list[int | float] = Field(default_factory=list, description="levels the verdict used and names")
    note: str = ""


class Check(_Open):
    """One methodology check that fired. --strict fails on any error."""

    check: str = "unnamed"
    severity: str = "warning"
    message: str = ""


class Representativeness(_Open):
    workload: str
    verdict: str | None = None
    divergence: float | None = None
    reason: str = ""
    report: dict[str, Any] = Field(default_factory=dict)


class JitCacheRecord(_Open):
    """The kept compile/JIT cache folder of a launch (toolkit.serve.jitcache.JitCache): where, for which GPU
    model and environment, and whether it was warm at the start."""

    folder: str | None = None
    gpu: str | None = None
    env_hash: str | None = Field(None, description="the environment hash's first 16 characters")
    warm: bool | None = None
    compiled: int | None = Field(None, description="kernel files the start added (absent: not counted yet)")
    mounted_at: str | None = Field(None, description="the folder as a container sees it")
    bytecode: str | None = Field(None, description="the server's PYTHONPYCACHEPREFIX, where the toolkit set one")


class SlurmLaunch(_Open):
    """A launch of an arm as a Slurm batch job (toolkit.slurm.launcher): the job, where it ran, how it ended."""

    job_id: str | None = None
    job_name: str | None = None
    node: str | None = None
    gpus: str | None = None
    state: str | None = None
    script: str | None = None
    log: str | None = None
    loadgen: str | None = None
    steps: dict[str, str] | None = Field(None, description="cell key -> the job step its load generator ran as")


class ArmState(_Open):
    """What the runner learnt about one arm's server while it ran (launcher facts, /server_info). Made by the
    arm's launcher (Launcher.info()) and completed by the runner; each field assigned is validated and counts as
    set (summary.json keeps what was set)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    launcher: str | None = None
    base_url: str | None = None
    model: str | None = None
    command: list[str] | str | None = None
    engine: str | None = None
    engine_version: str | None = None
    external: bool = False
    server_info_read: bool = False
    server_info_file: str | None = None
    speculative: dict[str, Any] = Field(default_factory=dict)
    max_running_requests: int | None = None
    max_running_requests_source: str | None = None
    max_running_requests_implicit: bool = False
    max_running_requests_log_line: str | None = Field(None, description="SGLang's own start-up line on the cap")
    stop_warnings: list[str] = Field(default_factory=list, description="a stop that needed a harsher signal")
    jit_cache: JitCacheRecord | None = Field(None, description="the kept compile/JIT cache folder (warm or not)")
    slurm: SlurmLaunch | None = Field(None, description="a Slurm target: the job its server ran in")
    preset_mismatches: list[dict[str, Any]] = Field(default_factory=list)
    speculative_algorithm: str | None = Field(None, description="the preset's (or the server's) speculative algorithm")
    avg_spec_accept_length: float | None = None
    cells: dict[str, dict[str, Any]] = Field(default_factory=dict, description="cell key -> server-wide state after it")

    def add(self, **facts: Any) -> "ArmState":
        """Set these facts (typed fields validated, others kept as extras) and return the state itself."""
        for name, value in facts.items():
            setattr(self, name, value)
        return self

    def add_state(self, state: ServerState) -> "ArmState":
        """What the server said of itself (Engine.server_state): the fields the engine's reading gives."""
        return self.add(**{name: getattr(state, name) for name in state.said})


class Window(_Open):
    """When an arm was measured (epoch seconds) and on what hardware."""

    slot: str | None = None
    hardware: Hardware = Field(default_factory=Hardware)
    start: float
    end: float | None = None


class StopRecord(_Open):
    """How a launch's server was stopped (toolkit.serve.stopping). Archives before issue 29 hold the first
    three fields or none."""

    signals: list[str] = Field(default_factory=list, description="what was sent, in order")
    warnings: list[str] = Field(default_factory=list, description="one per escalation")
    exit_code: int | None = None
    leader_exit_s: float | None = Field(None, description="seconds from the first signal until the server's "
                                                          "main process exited")
    group_empty_s: float | None = Field(None, description="... until no process of its group was left (the "
                                                          "rest: its children, e.g. a GPU context's teardown)")


class MachineRecord(_Open):
    """The machine one launch ran on (toolkit.bench.hostinfo.launch_machine): its host, the GPUs it used (UUID,
    else serial; None where unknown) and the slot's GPU indices."""

    host: str | None = None
    gpus: list[str] | None = None
    gpu_ids: str | None = None


class LaunchRecord(_Open):
    """One server launch of one arm: when, in which round and place, how long start-up took, and where its
    /server_info and log are archived. Built as the launch goes (toolkit.bench.arm): each field assigned is
    validated and counts as set (summary.json keeps what was set)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    arm: str
    launch: int = 0
    position: int | None = Field(None, description="its place in the round's arm order (manifest.rounds)")
    started_at: float | None = Field(None, description="epoch seconds when the launch began")
    startup_s: float | None = Field(None, description="seconds from launch to healthy")
    stop_s: float | None = None
    stop: StopRecord = Field(default_factory=StopRecord)
    startup_phases: dict[str, float] | None = Field(
        None, description="seconds from the launch to each start-up mark in the server's log (SGLang: "
                          "engines.sglang.STARTUP_MARKS; 1 s resolution); None without the marks")
    warm_start: bool | None = Field(None, description="the kept JIT cache folder held files before the start")
    compiled_files: int | None = Field(None, description="kernel files the start added to the kept cache before "
                                                         "the server answered (bytecode aside): 0 for a start "
                                                         "that found every kernel it needed")
    jit_cache: str | None = Field(None, description="the kept compile/JIT cache folder it used")
    ok: bool = True
    error: str | None = None
    server_info_file: str | None = None
    log_file: str | None = None
    cells: list[str] = Field(default_factory=list, description="cell keys measured against this launch")
    slurm: SlurmLaunch | None = Field(None, description="a Slurm target: the job (job_id, job_name, node, gpus, "
                                                        "state as it ended, script, log)")
    machine: MachineRecord | None = Field(None, description="the machine it ran on: {host, gpus: [UUID, else serial, "
                                            "of the GPUs it used; None where unknown], gpu_ids}; absent in older "
                                            "archives (toolkit/results/machines.py falls back to the host fingerprint)")
    warmup: bool = Field(False, description="a warm-up launch (the Matrix's `warmup_launch`): its cells ran and "
                                            "were discarded; `cells` lists them")


class AutoStop(_Open):
    """`launches_auto:` as it ended (Derived.launches_auto): the rounds run, why it stopped (`narrow`: every
    speed-up CI within ±halfwidth_pct; `max`), the widest CI then and its cell, the rule and its first stage."""

    halfwidth_pct: float
    max: int
    rounds_run: int
    stopped: str | None = None
    widest_pct: float | None = None
    widest: str = ""
    rule: str | None = None
    stage1_rounds: int | None = None


class Timing(_Open):
    launch_s: dict[str, float] = Field(default_factory=dict)
    launch_failed_s: dict[str, float] = Field(default_factory=dict)
    stop_s: dict[str, float] = Field(default_factory=dict)
    warmup_launch_s: dict[str, float] = Field(default_factory=dict, description="per arm, its warm-up launch: "
                                              "start, discarded cells and stop")
    arm_cells_s: dict[str, float] = Field(default_factory=dict)
    cells_s: float = 0.0
    wall_s: float | None = None
    overhead_ratio: float | None = None
    arms: dict[str, Window] = Field(default_factory=dict)


class Derived(_Open):
    """summary.json's `derived`: what the runner worked out from the cells. Imports leave it empty."""

    baseline: str | None = None
    speedups: list[Speedup] = Field(default_factory=list)
    crossovers: list[Crossover] = Field(default_factory=list)
    speculative_arms: list[str] = Field(default_factory=list)
    recommended_disable_batch_threshold: dict[str, int | None] = Field(default_factory=dict)
    never_pays_off: list[str] = Field(default_factory=list)
    methodology: list[Check] = Field(default_factory=list)
    representativeness: list[Representativeness] = Field(default_factory=list)
    arm_info: dict[str, ArmState] = Field(default_factory=dict)
    timing: Timing = Field(default_factory=Timing)
    cells_planned: int | None = None
    cells_done: int | None = None
    slo: SloAnalysis | None = Field(None, description="the matrix's service-level objectives against the run "
                                                      "(toolkit/results/slo.py); absent without an slo block")
    launches: dict[str, list[LaunchRecord]] = Field(default_factory=dict, description="per arm, its server launches")
    launches_auto: AutoStop | None = Field(None, description="`launches_auto:`: the rounds run, why it stopped "
                                           "(`narrow`: every speed-up CI within ±halfwidth_pct; `max`), the widest "
                                           "CI then and its cell")
    warmup_launches: dict[str, LaunchRecord] = Field(default_factory=dict, description="per arm, its warm-up launch "
                                                     "(`warmup_launch: true`), whose cells were discarded")
    noise: dict[str, Any] | None = Field(None, description="the launch noise the speedup CIs used: {source, "
                                                           "calibration}; absent in older archives")

    def errors(self) -> list[Check]:
        return [c for c in self.methodology if c.severity == "error"]


class Summary(_Open):
    """summary.json, written at finalize (again after a resume)."""

    format: str = FORMAT
    schema_version: int = SCHEMA_VERSION
    run_id: str | None = None
    status: str  # toolkit.schema.keys.STATUSES
    interrupted: bool | None = Field(None, description="a signal stopped the run before every cell ran (--resume "
                                                       "completes it); absent before the field existed: "
                                                       "load_summary infers it")
    started_at: str | None = None
    finished_at: str | None = None
    cells: list[CellSummary] = Field(default_factory=list)
    derived: Derived = Field(default_factory=Derived)

    def counts(self) -> tuple[int, int, int]:
        """(ok, failed, missing) cells; missing: planned but never archived."""
        ok = sum(c.status == "ok" for c in self.cells)
        failed = len(self.cells) - ok
        planned = self.derived.cells_planned
        return ok, failed, max(0, (planned or 0) - len(self.cells)) if planned else 0

    def why(self) -> str:
        """Why the run is not complete, in words ("" when it is)."""
        return status_reason(self.status, bool(self.interrupted), *self.counts(), self.derived.cells_planned)


def status_reason(status: str, interrupted: bool, ok: int, failed: int, missing: int, planned: int | None) -> str:
    """The words after a run's status: `partial (3 of 12 cells failed)`, `failed (no cell succeeded)`."""
    if status == "complete":
        return ""
    total = planned or ok + failed + missing
    if interrupted:
        return f"interrupted after {ok + failed} of {total} cells: --resume completes it"
    parts = [f"{n} of {total} cells {what}" for n, what in ((failed, "failed"), (missing, "missing")) if n]
    if status == "failed":
        return "no cell succeeded" + (f": {', '.join(parts)}" if parts else "")
    return ", ".join(parts)


# -- reading any version this toolkit reads

def check_schema(raw: Any, path: Path | None = None) -> None:
    """Accept the archive schema versions this toolkit reads; refuse others with what to do."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ToolkitError(f"not a toolkit run archive ({_name(path)} lacks format: {FORMAT})", file=path)
    version = raw.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ToolkitError(f"schema_version {version!r} is not an integer", file=path)
    if version > SCHEMA_VERSION:
        from toolkit import __version__

        raise ToolkitError(
            f"archive schema {version} is newer than this toolkit reads (schema {SCHEMA_VERSION})", file=path,
            hint=f"upgrade the toolkit (this is {__version__}); the archive itself is fine")
    if version < MIN_SCHEMA_VERSION:
        raise ToolkitError(f"archive schema {version} is older than any this toolkit reads "
                           f"({MIN_SCHEMA_VERSION}..{SCHEMA_VERSION})", file=path,
                           hint="re-import the raw numbers with `toolkit results import`")


def _name(path: Path | None) -> str:
    return path.name if path is not None else "the file"


def _validate(model: type[BaseModel], data: dict, path: Path | None):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"])
        raise ToolkitError(f"{_name(path)}: {where}: {e['msg']}", file=path,
                           hint="the file was edited or written by another tool; `toolkit results verify` "
                                "checks every file") from None


def _manifest_v1(raw: dict) -> dict:  # json-edge: manifest.json as read, before validation
    """Every shape version-1 writers left, mapped to the model's names (on a copy)."""
    m = dict(raw)
    for part in ("matrix", "environment"):
        rec = m.get(part)
        if isinstance(rec, dict) and "spec" in rec and "resolved" not in rec:
            rec = dict(rec)
            rec["resolved"] = rec.pop("spec") or {}
            m[part] = rec
        elif rec is None:
            m.pop(part, None)
    if "image" in m and not m.get("build"):
        m["build"] = m.pop("image")
    arms = {}
    for arm, info in (m.get("arms") or {}).items():
        info = dict(info or {})
        if "server_args" in info and not info.get("preset"):
            info["preset"] = info.pop("server_args") or {}
        arms[arm] = info
    m["arms"] = arms
    tk = dict(m.get("toolkit") or {}) if isinstance(m.get("toolkit"), dict) else {}
    version, sha = m.pop("toolkit_version", None), m.pop("git_revision", None)
    tk.setdefault("version", version)
    if tk.get("git_sha") is None:
        tk["git_sha"] = sha
    m["toolkit"] = tk
    host = m.get("host") if isinstance(m.get("host"), dict) else {}
    if host and "controller" not in host and "hosts" not in host:
        host = {"controller": host}  # an older writer's `host: <fingerprint>`
    host = dict(host)
    top_hosts = m.pop("hosts", None)
    if isinstance(top_hosts, dict):
        host["hosts"] = {**top_hosts, **(host.get("hosts") or {})}
    host["hosts"] = {k: v for k, v in (host.get("hosts") or {}).items() if isinstance(v, dict)}
    m["host"] = host
    m["workloads"] = {k: (v if isinstance(v, dict) else {"hash": v}) for k, v in (m.get("workloads") or {}).items()}
    return m


def _derived_v1(raw: Any) -> dict:  # json-edge: summary.json's derived as read, before validation
    d = dict(raw) if isinstance(raw, dict) else {}
    if not isinstance(d.get("methodology"), list):
        for key in ("checks", "warnings", "methodology_checks"):
            if isinstance(d.get(key), list):
                d["methodology"] = d.pop(key)
                break
    d["methodology"] = [w if isinstance(w, dict) else {"message": str(w)} for w in d.get("methodology") or []]
    return d


def load_manifest(raw: Any, path: Path | None = None) -> Manifest:
    """A manifest.json as read (any version this toolkit reads) -> Manifest."""
    check_schema(raw, path)
    return _validate(Manifest, _manifest_v1(raw), path)


def load_derived(raw: Any, path: Path | None = None) -> Derived:
    return _validate(Derived, _derived_v1(raw), path)


def load_summary(raw: Any, path: Path | None = None) -> Summary:
    """A summary.json as read -> Summary (its derived block mapped as load_derived does)."""
    if not isinstance(raw, dict):
        raise ToolkitError(f"{_name(path)} is not a JSON object", file=path)
    data = dict(raw)
    data["derived"] = _derived_v1(data.get("derived"))
    summary = _validate(Summary, data, path)
    if summary.interrupted is None:  # written before the field: `partial` meant interrupted, `complete` meant
        # every cell ran (failed ones too), so the status is read again from the cells
        summary.interrupted = summary.status == "partial"
        if summary.status == "complete":
            summary.status = run_status(*summary.counts(), interrupted=False)
    return summary
