"""`kind: Matrix`: which arms (server presets) run which workloads at which concurrency levels, where."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError, PydanticKnownError

from toolkit.errors import SpecValueError, did_you_mean
from toolkit.schema.slo import BOUNDS, DEFAULT_ATTAINMENT, OBJECTIVE_SAMPLES, Objectives
from toolkit.schema.sweep import Spacing
from toolkit.schema.trace import MAX_TOKENS
from toolkit.specs.base import Hash, Name, NonNegative, Positive, PositiveInt, StrictModel
from toolkit.specs.slurm import SlurmJob


SWEEP_PROBE_SLOTS = 256  # a duration-sized sweep's throughput probe without max_concurrency: requests in flight
# the target kinds shipped with the toolkit, and those a Matrix accepts: these and any toolkit.targets.register
# adds (the targets sit floors above the spec, so they tell it their names)
BUILTIN_TARGET_KINDS: tuple[str, ...] = ("local", "hosts", "external", "slurm")
TARGET_KINDS: set[str] = set(BUILTIN_TARGET_KINDS)
OPEN_LOOP_SLOTS = 4096  # `rates:` without `max_concurrency`: requests in flight at most, more than any cell here sends


class EngineLaunch(StrictModel):
    """`target.engines.<engine>`: where one engine is installed on this machine, for the arms it serves under
    `launcher: process` (engines as arms: SGLang and vLLM each in a Python, or a site, of its own)."""

    python: str | None = Field(None, description="the Python that has this engine (default: the target's `python:`)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables of this engine's "
                                                                  "servers, over the target's `env:`, e.g. "
                                                                  "PYTHONPATH: /opt/vllm-site")


class Target(StrictModel):
    """Where the arms run: this machine, hosts of a Hosts spec, URLs already serving, or Slurm jobs.

    Arms that share hardware (one GPU set of one host) run one after another: a measurement taken while
    another arm loads the same GPU says nothing about either. Side by side only on separate GPU sets.
    """

    # any registered kind (toolkit/targets/__init__.py registers another here); the schema lists the built-in ones
    kind: str = Field("local", json_schema_extra={"enum": list(BUILTIN_TARGET_KINDS)})
    launcher: Literal["docker", "process", "container"] = Field(
        "docker", description="sglang engine, kind local: a container from the built image (docker) or a plain "
                              "process where SGLang is installed (a venv); kind slurm: process (the default) or "
                              "container (container_image)")
    python: str | None = Field(None, description="launcher process: the Python that has SGLang (default: the "
                                                  "toolkit's own)")
    env: dict[str, str] = Field(default_factory=dict, description="launcher process: extra environment variables")
    engines: Annotated[dict[Name, EngineLaunch], Hash.omit_default("added with engines as arms: unset, the hash of "
                                                                  "an older matrix holds")] = Field(
        default_factory=dict, description="launcher process: per engine (sglang, vllm, ...), its own `python:` and "
                                          "`env:` over the target's, for the arms its Environments serve "
                                          "(docs/bench.md#arms-from-several-environments)")
    gpus: list[Annotated[str, Field(pattern=r"^[0-9]+(,[0-9]+)*$", description="GPU indices joined by commas, no "
                                    "spaces, e.g. '0,1'")]] = Field(
        default_factory=list, description="kind local: GPU sets, e.g. ['0,1', '2,3']: one slot per set "
                                          "(CUDA_VISIBLE_DEVICES), arms on different sets run side by side")
    hosts: str | None = Field(None, description="kind hosts: path of a Hosts spec, relative to this file")
    group: str = Field("all", description="kind hosts: the inventory group whose hosts run the arms")
    url: str | None = Field(None, description="kind external: base URL of an OpenAI-compatible server")
    urls: dict[Name, str] = Field(default_factory=dict, description="kind external: one base URL per arm")
    independent: bool = Field(False, description="kind external: the URLs are separate hardware even on one host, "
                                                  "so their arms may run side by side (default: one after another)")
    ca_bundle: str | None = Field(None, description="kind external: PEM file of the CA(s) that https:// URLs are "
                                                     "verified against, relative to this file (default: the system "
                                                     "trust store)")
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="an environment variable's "
                                      "name: letters, digits and _, not starting with a digit, e.g. OPENAI_API_KEY")] | None = Field(
        None, description="kind external: name of the environment variable that holds the API key, sent as "
                          "`Authorization: Bearer <key>` (the key itself never goes in a spec or an archive)")
    parallel: int = Field(1, ge=1, description="kind local, transformers engine: arms run side by side on this many "
                                               "engines (they share the host: the run reports it as an error)")
    slurm: Annotated[SlurmJob | None, Hash.omit_default("added with Slurm targets: unset, the hash of an older "
                                                        "matrix holds")] = Field(
        None, description="kind slurm: partition, account, time limit, GPUs, nodes, sbatch options, container "
                          "(docs/slurm.md)")

    def python_of(self, engine: str) -> str | None:
        """The Python that starts an engine's servers (launcher process): its `engines:` entry's, else `python:`."""
        own = self.engines.get(engine)
        return own.python if own is not None and own.python else self.python

    def env_of(self, engine: str) -> dict[str, str]:  # data-keyed: environment variable names
        """The extra environment of an engine's servers: `env:`, with its `engines:` entry's over it."""
        own = self.engines.get(engine)
        return {**self.env, **own.env} if own is not None else dict(self.env)

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, v: str) -> str:
        """A registered target kind; another is refused as a Literal would be (the values, a did-you-mean)."""
        if v not in TARGET_KINDS:
            names = [repr(n) for n in (*BUILTIN_TARGET_KINDS, *sorted(TARGET_KINDS - set(BUILTIN_TARGET_KINDS)))]
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": " or ".join([", ".join(names[:-1]), names[-1]])})
        return v

    @model_validator(mode="after")
    def _fields(self) -> "Target":
        if self.kind == "hosts" and not self.hosts:
            raise SpecValueError("a target of kind hosts needs `hosts:` (a Hosts spec path)", key="kind",
                                 hint="add `hosts: hosts.yaml` (a `kind: Hosts` spec) to the target")
        if self.kind == "external" and not (self.url or self.urls):
            raise SpecValueError("a target of kind external needs `url:` or `urls:`", key="kind",
                                 hint="add `url: https://host:8443` (one server for every arm) or `urls: {ARM: URL}`")
        if self.kind != "external" and (self.ca_bundle or self.api_key_env):
            raise SpecValueError("`ca_bundle:` and `api_key_env:` apply to a target of kind external",
                                 key=["ca_bundle", "api_key_env"],
                                 hint="remove them, or set `kind: external` (servers the toolkit does not start)")
        for url in ([self.url] if self.url else []) + list(self.urls.values()):
            scheme = url.split("://", 1)[0] if "://" in url else ""
            if scheme not in ("http", "https") or not url.split("://", 1)[1].strip("/"):
                at = ["url"] if url == self.url else [("urls", a) for a, u in self.urls.items() if u == url]
                raise SpecValueError(f"{url!r} is not an http:// or https:// base URL (e.g. https://gateway:8443)",
                                     key=at, hint="write the server's base URL with its scheme and host, e.g. "
                                                  "http://127.0.0.1:30000 or https://gateway:8443")
        if self.ca_bundle and not any(u.startswith("https://") for u in [self.url or "", *self.urls.values()]):
            raise SpecValueError("`ca_bundle:` verifies https:// URLs, and this target has none", key="ca_bundle",
                                 hint="remove `ca_bundle:`, or give the servers' https:// URLs")
        if self.kind == "slurm" and self.launcher == "docker":
            if "launcher" in self.model_fields_set:
                raise SpecValueError("a Slurm job runs `launcher: process` (a Python on the shared file system) "
                                     "or `launcher: container` (container_image), not docker", key="launcher",
                                     hint="set `launcher: process` or `launcher: container` (docs/slurm.md)")
            self.launcher = "process"
        if self.kind != "slurm" and self.launcher == "container":
            raise SpecValueError("`launcher: container` applies to a target of kind slurm (kind local: docker)",
                                 key="launcher", hint="set `launcher: docker` (or `process`) for this target kind, or "
                                                      "`kind: slurm`")
        if self.kind not in ("local", "slurm") and (self.gpus or self.launcher == "process"):
            raise SpecValueError("`gpus:` and `launcher: process` apply to a target of kind local or slurm",
                                 key=["gpus", "launcher"] if self.gpus else ["launcher"],
                                 hint="remove them: a hosts or external target's servers run where it says")
        if self.engines and self.launcher != "process":
            raise SpecValueError("`engines:` sets each engine's Python and environment for `launcher: process`; "
                                 f"this target's launcher is {self.launcher}", key="engines",
                                 hint="set `launcher: process`, or remove `engines:` (an engine's image has its own)")
        if self.kind != "slurm" and self.slurm is not None:
            raise SpecValueError("`slurm:` applies to a target of kind slurm", key="slurm",
                                 hint="remove `slurm:`, or set `kind: slurm`")
        if self.kind == "slurm" and self.slurm is None:
            self.slurm = SlurmJob()
        if self.kind == "slurm" and self.gpus:
            raise SpecValueError("`gpus:` names GPU sets of this machine: a Slurm job's GPUs are "
                                 "`slurm: {gpus_per_arm: N}`", key="gpus",
                                 hint="remove `gpus:` and set `slurm: {gpus_per_arm: N}`")
        if self.kind == "slurm" and self.parallel != 1:
            raise SpecValueError("`parallel:` applies to kind local: Slurm arms run as jobs side by side, "
                                 "at most `slurm: {jobs: N}` at once", key="parallel",
                                 hint="remove `parallel:` and set `slurm: {jobs: N}`")
        if len(set(self.gpus)) != len(self.gpus):
            dup = next(i for i, g in enumerate(self.gpus) if g in self.gpus[:i])
            raise SpecValueError("each GPU set may appear once in `gpus:`", key=[("gpus", dup), "gpus"],
                                 hint=f"remove the second {self.gpus[dup]!r}")
        seen: set[str] = set()
        for i, g in enumerate(self.gpus):
            ids = set(g.split(","))
            if ids & seen:
                raise SpecValueError(f"GPU(s) {sorted(ids & seen)} appear in two sets of `gpus:`: sets must not "
                                     "overlap", key=[("gpus", i), "gpus"],
                                     hint="give each arm's server its own GPUs, e.g. gpus: ['0,1', '2,3']")
            seen |= ids
        return self


def workload_name(path: str) -> str:
    """A workload name (lower-case, digits, . _ -) from a file path."""
    stem = Path(path).stem.lower()
    return re.sub(r"[^a-z0-9._-]+", "-", stem).strip("-._") or "workload"


class Workload(StrictModel):
    """A bundled workload by name, the user's own JSON lines file, or a trace replayed at its own times."""

    name: Name
    path: str | None = Field(None, description="JSON lines file (ShareGPT, OpenAI messages or prompt/completion)")
    sample: int | None = Field(None, ge=1, description="seeded sample of N prompts")
    holdout: str | None = Field(None, description="exclude prompts present in this training file")
    trace: Annotated[str | None, Hash.omit_default("added with trace replay")] = Field(
        None, description="a trace (JSON lines of timestamp, input/output length or prompt; docs/loadgen.md#traces): "
                          "its requests are sent open loop at its times, one cell per speed "
                          "(docs/bench.md#traces-trace)")
    speed: Annotated[Positive | list[Positive], Hash.omit_default("added with trace replay")] = Field(
        1.0, description="with `trace:`: time scaling, 2.0 replays twice as fast; a list gives one cell per speed")
    max_hours: Annotated[Positive, Hash.omit_default("added with the replay estimate")] = Field(
        24.0, description="with `trace:`: the longest replay (trace span / speed) a cell may take, in hours; a "
                          "longer one is refused before the run starts unless this is raised")

    @model_validator(mode="before")
    @classmethod
    def _trace_name(cls, data: Any) -> Any:  # json-edge: the workload's YAML mapping, before validation
        """`{trace: traces/prod.jsonl}` is named after its file (prod) unless it says `name:`."""
        if isinstance(data, dict) and "name" not in data and isinstance(data.get("trace"), str):
            return {"name": workload_name(data["trace"]), **data}
        return data

    @model_validator(mode="after")
    def _trace(self) -> "Workload":
        if self.trace is None:
            if self.speed != 1.0:  # (1.0, the default, is what a resolved spec read back says)
                raise SpecValueError("`speed:` scales a trace's times: it needs `trace:`", key="speed",
                                     hint="remove `speed:`, or add `trace: FILE` (docs/loadgen.md#traces)")
            if self.max_hours != 24.0:  # (the default, as a resolved spec read back says it)
                raise SpecValueError("`max_hours:` bounds a trace's replay: it needs `trace:` (remove it here)",
                                     key="max_hours", hint="remove `max_hours:`, or add `trace: FILE`")
            return self
        if self.path is not None or self.sample is not None or self.holdout is not None:
            raise SpecValueError("a `trace:` workload sends the trace's own requests: drop `path:`, `sample:` and "
                                 "`holdout:` (or make them a separate workload)", key=["path", "sample", "holdout"],
                                 hint="list the prompts file as a workload of its own: `- {name: mine, path: FILE}`")
        speeds = self.speeds
        if not speeds:
            raise SpecValueError("`speed:` names no speed: give one, e.g. 1.0, or a list, e.g. [1, 2, 4]", key="speed",
                                 hint="give one, e.g. 1.0, or a list, e.g. [1, 2, 4]")
        if any(s <= 0 for s in speeds):
            raise SpecValueError("`speed:` must be > 0 (2.0 replays twice as fast)", key="speed",
                                 hint="2.0 replays twice as fast, 0.5 at half speed")
        if len(set(speeds)) != len(speeds):
            dup = next(i for i, x in enumerate(speeds) if x in speeds[:i])
            raise SpecValueError("`speed:` lists a speed twice: each may appear once", key=[("speed", dup), "speed"],
                                 hint=f"remove the second {speeds[dup]:g}")
        return self

    @property
    def speeds(self) -> list[float]:
        """The speeds a trace is replayed at, one cell each."""
        return [float(s) for s in (self.speed if isinstance(self.speed, list) else [self.speed])]


class Arrival(StrictModel):
    """How an open-loop cell's requests arrive (`rates:`): the gaps between send times. The mean gap is
    1/rate whatever the process; `burstiness` B shapes a gamma process as vLLM's --burstiness does: gaps
    gamma(shape=B, scale=1/(rate*B)), coefficient of variation 1/sqrt(B); B=1 is Poisson, lower is burstier."""

    process: Literal["poisson", "gamma", "constant"] = Field(
        "poisson", description="poisson: exponential gaps; gamma: gamma gaps of shape `burstiness`; constant: "
                               "every gap 1/rate")
    burstiness: Positive = Field(1.0, description="gamma: the shape B (1: Poisson; < 1 burstier; > 1 more regular)")

    @model_validator(mode="after")
    def _shape(self) -> "Arrival":
        if self.burstiness != 1.0 and self.process != "gamma":
            raise SpecValueError(f"`burstiness` shapes `process: gamma`; a {self.process} process has none",
                                 key="burstiness", hint="set `process: gamma`, or drop `burstiness`")
        return self


class Sweep(StrictModel):
    """`sweep:` instead of listing `rates:` (guidellm's sweep profile): the baseline arm's server is probed
    first, closed loop, at one request in flight (the synchronous rate) and at `probe_concurrency` (the
    saturation rate); then every arm runs `points` open-loop rates spread between the two, evenly or
    geometrically (`spacing`, toolkit.schema.sweep.sweep_rates). The rates are recorded in the manifest:
    --resume and `results reproduce` run them again rather than probing again
    (docs/bench.md#sweep-rates-from-probes)."""

    points: int = Field(ge=1, le=50, description="open-loop rates between the synchronous and the saturation rate")
    spacing: Annotated[Spacing, Hash.omit_default("added with geometric sweeps: linear, the hash of an older "
                                                  "matrix holds")] = Field(
        "linear", description="linear: the points evenly spaced; geometric: at a constant ratio, dense at low "
                              "load (where speculative decoding's crossover lies)")
    probe_concurrency: int | None = Field(
        None, ge=2, description="requests in flight in the throughput probe (default: max_concurrency, else every "
                                f"measured request at once (`requests`), else {SWEEP_PROBE_SLOTS})")


class Bounds(StrictModel):
    """The bounds on one latency (ms) as the `slo:` block writes them: a percentile over each cell's
    requests, and/or a per-request limit. Each set bound is one objective (toolkit.schema.slo.Objective,
    the one objective type: `Slo.objectives()`)."""

    p50: Positive | None = Field(None, description="the cell's median of this latency is at most this (ms)")
    p75: Positive | None = Field(None, description="the cell's p75 is at most this (ms)")
    p90: Positive | None = Field(None, description="the cell's p90 is at most this (ms)")
    p95: Positive | None = Field(None, description="the cell's p95 is at most this (ms)")
    p99: Positive | None = Field(None, description="the cell's p99 is at most this (ms)")
    per_request: Positive | None = Field(None, description="a request counts toward goodput only when its own "
                                                              "value is at most this (ms)")

    @model_validator(mode="after")
    def _some(self) -> "Bounds":
        if all(v is None for v in self.model_dump().values()):
            raise SpecValueError("give a percentile (p50, p75, p90, p95, p99) or per_request", key=(),
                                 hint="e.g. `{p90: 50}`: the cell's p90 at most 50 ms (docs/slo.md)")
        return self


class Slo(StrictModel):
    """Service-level objectives (docs/slo.md): per cell goodput, attainment and whether they hold; per arm
    and domain the capacity (the highest concurrency at which they hold). Analysis only: the block is not
    part of the matrix hash, and `toolkit results slo RUN --slo ...` recomputes for other objectives."""

    # names other tools give these latencies: the hint for them (spelling alone would suggest ttft_ms for tbt_ms)
    KEY_HINTS: ClassVar[dict[str, str]] = {
        name: "time between tokens is `itl_ms` here (inter-token latency, judged on each request's mean ITL), "
              "or `tpot_ms` (time per output token after the first)"
        for name in ("tbt_ms", "tbt", "time_between_tokens_ms", "inter_token_latency_ms")}

    ttft_ms: Bounds | None = Field(None, description="time to first token, per request")
    tpot_ms: Bounds | None = Field(None, description="time per output token after the first, per request")
    itl_ms: Bounds | None = Field(None, description="inter-token latency, judged on each request's mean ITL "
                                                       "(itl_req_mean_ms): the pooled itl_ms has no per-request value")
    e2e_ms: Bounds | None = Field(None, description="end-to-end latency, per request")
    attainment: float = Field(DEFAULT_ATTAINMENT, gt=0, le=1, description="the share of a cell's requests that must succeed and "
                                                           "meet every per-request objective for the cell to hold")

    @model_validator(mode="after")
    def _some(self) -> "Slo":
        if not any(getattr(self, m) for m in OBJECTIVE_SAMPLES):
            raise SpecValueError("name at least one objective: ttft_ms, tpot_ms, itl_ms or e2e_ms", key=(),
                                 hint="e.g. `tpot_ms: {p90: 50}` (docs/slo.md)")
        return self

    def objectives(self) -> Objectives:
        """This block as the one objective type the analysis reads (toolkit/schema/slo.py)."""
        return Objectives.of(((m, b, getattr(bounds, b)) for m in OBJECTIVE_SAMPLES
                              if (bounds := getattr(self, m)) is not None for b in BOUNDS), self.attainment)


Knob = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$", description="a knob name: an SGLang server flag "
                            "without dashes in front, e.g. speculative-num-steps, or a generation_config key of the "
                            "embedded engine, e.g. prompt_lookup_num_tokens")]
KnobValue = int | float | str | bool


class Tune(StrictModel):
    """`tune:` of a Matrix: the search space of `toolkit bench tune MATRIX --arm ARM` (docs/tune.md).

    `space` maps an arm (a preset of the environment) to its knobs and the values each may take. What a
    knob is (a server flag that needs a restart, or a request-level parameter that does not) and which
    values the engine accepts are checked by toolkit.tune.space before anything runs. The block does not
    change what the matrix measures, so it is left out of the matrix's spec hash (`bench matrix` runs and
    resumes ignore it)."""

    space: dict[Name, dict[Knob, Annotated[list[KnobValue], Field(min_length=1)]]] = Field(
        min_length=1, description="arm -> knob -> the values to try, e.g. {ngram: {prompt_lookup_num_tokens: [2, 4, 8]}}")
    budget: int = Field(8, ge=2, description="trials: distinct settings evaluated (--budget overrides)")
    holdout: float = Field(0.5, gt=0, lt=1, description="share of each workload's prompts kept out of the search "
                                                         "and used only to confirm the winner")
    first_requests: int | None = Field(None, ge=1, description="measured requests per cell in the first rung "
                                                                "(default: a quarter of `requests`, at least 2); "
                                                                "each later rung adds eta times more")
    eta: int = Field(2, ge=2, le=4, description="successive halving: each rung keeps 1/eta of the trials")
    confirm_requests: int | None = Field(None, ge=2, description="measured requests per cell of the confirmation on "
                                                                  "held-out prompts (default: `requests`, else 32)")
    confirm_launches: int = Field(1, ge=1, le=10, description="server launches per arm in the confirmation (server "
                                  "flags only): with 2 or more, launch rounds interleaved as `launches:` runs them, "
                                  "and the decision's interval takes the launch as the unit from those rounds "
                                  "instead of a calibration or the default launch CV")


class LaunchesAuto(StrictModel):
    """Sequential launches (`launches_auto:`), Stein's two-stage rule: after a first stage of max(`launches`, 3)
    rounds, stop once every paired speed-up's 95% CI (the launch as the unit; the first stage's variance) is
    narrow enough, else launch another round, up to `max`."""

    halfwidth_pct: Positive = Field(le=100, description="stop when every speed-up's 95% CI lies within "
                                                           "±this percent of its ratio (log scale)")
    max: int = Field(ge=3, le=100, description="the most launch rounds, whatever the CIs")


def _only_traces(data: dict) -> bool:
    """Does a raw Matrix document list only `trace:` workloads (which need no load axis)?"""
    ws = data.get("workloads")
    return isinstance(ws, list) and bool(ws) and all(isinstance(w, dict) and "trace" in w for w in ws)


class ArmSource(StrictModel):
    """An arm served by a preset of another Environment than the matrix's `environment:` (engines as arms:
    SGLang's and vLLM's presets in one run, on the same prompts, launches interleaved)."""

    name: Name = Field(description="the arm's name in this run (cells, speed-ups, the manifest), e.g. vllm-ngram")
    environment: str = Field(description="path of the Environment spec that serves it, relative to this file")
    preset: Name | None = Field(None, description="its server preset there (default: the arm's name)")

    @model_validator(mode="after")
    def _preset(self) -> "ArmSource":
        if self.preset is None:
            self.preset = self.name
        return self


class Matrix(StrictModel):
    kind: Literal["Matrix"]
    name: Name
    description: str = ""
    environment: str = Field(description="path of the Environment spec whose presets are the arms")
    arms: list[Name | ArmSource] = Field(
        min_length=1, description="the arms to compare: a server preset of `environment:` by name, or "
                                  "{name, environment, preset}: a preset of another Environment "
                                  "(docs/bench.md#arms-from-several-environments)")
    baseline: Name | None = Field(None, description="the reference arm (default: the first arm)")
    target: Target = Field(default_factory=Target)
    workloads: list[Name | Workload] = Field(min_length=1, description="bundled workload names or Workload entries")
    training_data: str | None = Field(None, description="a sample of the drafter's training data (JSON lines)")
    api: Literal["chat", "completions", "generate"] = "chat"
    concurrency: Annotated[list[Annotated[int, Field(ge=1)]] | None, Hash.omit_default(
        "None only with `rates:`: the hash of a closed-loop matrix holds")] = Field(
        None, min_length=1, description="closed loop: requests kept in flight, one cell per level")
    rates: Annotated[list[Positive] | None, Hash.omit_default(
        "added with open-loop load: unset, the hash of an older matrix holds")] = Field(
        None, min_length=1, description="open loop, instead of `concurrency`: requests per second, one cell per "
                                        "rate; each request is sent at its scheduled time (docs/bench.md)")
    arrival: Annotated[Arrival, Hash.omit_default("added with open-loop load")] = Field(
        default_factory=Arrival, description="with `rates:`: the arrival process, {process: poisson|gamma|constant, "
                                             "burstiness: B}")
    max_concurrency: Annotated[int | None, Hash.omit_default("added with open-loop load")] = Field(
        None, ge=1, description="with `rates:`: at most this many requests in flight (a later arrival waits for a "
                                f"free slot and is sent late); unset: no cap ({OPEN_LOOP_SLOTS} slots)")
    sweep: Annotated[Sweep | None, Hash.omit_default("added with sweeps: unset, the hash of an older matrix "
                                                     "holds")] = Field(
        None, description="open loop, instead of `rates:`: {points: N}: probe the baseline's synchronous and "
                          "saturation rates, then N rates between them for every arm (docs/bench.md)")
    output_len: PositiveInt = Field(128, le=MAX_TOKENS, description="max output tokens per request (at most "
                                                                     "2**24: more than any model's context)")
    ignore_eos: Annotated[bool, Hash.omit_default("false: the hash of an older matrix holds")] = Field(
        False, description="every request of every arm carries `ignore_eos: true` (SGLang and vLLM): each answer "
                           "decodes exactly `output_len` tokens, past end of sequence, so arms whose answers would "
                           "end at different lengths (synthetic acceptance forces tokens the target did not choose) "
                           "do the same work; set `output_len` to the domain's real mean answer "
                           "(docs/bench.md#ignore-eos)")
    requests: PositiveInt | None = Field(None, description="measured requests per cell")
    duration_s: Positive | dict[int, Positive] | None = Field(
        None, description="seconds each cell is measured for (instead of `requests`), e.g. 30, or per "
                                "concurrency level {LEVEL: SECONDS}, e.g. {1: 20, 16: 30}: a level takes the value "
                                "of the highest listed level at or below it (docs/bench.md)")
    warmup: Annotated[int, Field(ge=0)] | Literal["concurrency"] = Field(
        2, description="requests per cell sent first and excluded from the figures; `concurrency`: as many as "
                       "the cell's concurrency, all at once, so the server has run a full batch of the cell's "
                       "size (kernels compiled, graphs warm) before the measured phase (docs/bench.md)")
    workers: Annotated[int | None, Hash.omit_default("unset: the hash of a v1 matrix holds")] = Field(None, ge=1, description="load generator processes per cell (default: enough for the "
                                "cell's expected chunk rate, one when it is small; docs/loadgen.md)")
    repeats: int = Field(1, ge=1, description="runs of each cell against the same server launch")
    launches: Annotated[int, Hash.omit_default("1: the hash of an older matrix holds")] = Field(1, ge=1, le=100, description="server launches per arm: each launch runs every cell of its "
                          "arm (and its repeats); rounds interleave the arms in a seeded random order, and verdicts "
                          "take the launch as the unit of replication (docs/results.md#launch-noise)")
    launches_auto: Annotated[LaunchesAuto | None, Hash.omit_default("unset: the hash of an older matrix holds")] = Field(
        None, description="sequential stopping: `launches` rounds first, then one more at a time until every "
                          "paired speed-up's 95% CI is within ±halfwidth_pct, at most `max` rounds "
                          "(docs/bench.md#launches-the-unit-of-replication)")
    warmup_launch: Annotated[bool, Hash.omit_default("false: the hash of an older matrix holds")] = Field(
        False, description="start each arm's server once before the first round, run its cells and discard them: "
                           "the machine's first start compiles kernels into empty caches and measured slower in "
                           "every cell on the H200 (docs/results.md#launch-noise); the warm-up is archived as a "
                           "warm-up launch, never as a measurement")
    synthetic_acceptance: Annotated[list[Annotated[float, Field(ge=1.0, allow_inf_nan=False)]] | None, Hash.omit_default("unset: the hash of an older matrix holds")] = Field(
        None, min_length=1, description="SGLang only: run each speculative arm at these forced mean acceptance "
                                        "lengths (SGLANG_SIMULATE_ACC_LEN, >= 1.0), one server launch per length, "
                                        "as arms <arm>-synacc<length>; the baseline and plain arms run once, "
                                        "unaffected (docs/bench.md#synthetic-acceptance)")
    seed: int = 0
    temperature: NonNegative = 0.0
    slo: Annotated[Slo | None, Hash.never("analysis, not measurement: objectives do not change what a run "
                                          "measures")] = Field(None, description="service-level objectives: goodput, attainment and capacity per arm "
                                              "(docs/slo.md)")
    tune: Annotated[Tune | None, Hash.never("the search `bench tune` runs, not what the matrix measures")] = Field(
        None, description="search space of `toolkit bench tune` (not part of what the matrix measures, nor of its "
                          "hash; archived with the matrix)")

    @field_validator("duration_s", mode="before")
    @classmethod
    def _duration(cls, v: Any, info: ValidationInfo) -> Any:
        """Seconds, or {LEVEL: SECONDS}; every tested level must fall at or above a listed one."""
        if not isinstance(v, dict):  # seconds: the errors (and hints) of a plain number field
            if isinstance(v, float) and not math.isfinite(v):
                raise PydanticKnownError("finite_number")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v <= 0:
                raise PydanticKnownError("greater_than", {"gt": 0})
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, str))):
                raise PydanticKnownError("float_type")
            if isinstance(v, str):
                try:
                    float(v)
                except ValueError:
                    raise PydanticKnownError("float_parsing") from None
            return v
        out = {}
        for k, sec in v.items():
            level = int(k) if isinstance(k, str) and k.isdigit() else k  # a resolved spec read back from JSON
            if isinstance(level, bool) or not isinstance(level, int) or level < 1:
                raise ValueError(f"{k!r} is not a concurrency level (a whole number >= 1)")
            if isinstance(sec, bool) or not isinstance(sec, (int, float)) or not math.isfinite(sec) or sec <= 0:
                raise ValueError(f"level {level}: {sec!r} is not a number of seconds > 0")
            out[level] = float(sec)
        if not out:
            raise ValueError("names no level: give seconds per level, e.g. {1: 20, 16: 30}")
        conc = info.data.get("concurrency") or []
        if conc and min(out) > min(conc):
            raise ValueError(f"starts at level {min(out)}, so concurrency {min(conc)} has no duration: add "
                             f"`{min(conc)}: SECONDS` (a level takes the value of the highest listed level at or "
                             "below it)")
        return out

    @model_validator(mode="wrap")
    @classmethod
    def _axis(cls, data: Any, handler: Any) -> "Matrix":
        """Neither `concurrency` nor `rates` among other mistakes (a misspelt key): name the missing axis
        beside them, as a required key would be (the check below runs only once every field is valid)."""
        try:
            return handler(data)
        except ValidationError as exc:
            if (not isinstance(data, dict) or "concurrency" in data or "rates" in data or "sweep" in data
                    or _only_traces(data)):
                raise
            errors = [{k: e[k] for k in ("type", "loc", "input", "ctx") if k in e} for e in exc.errors()]
            raise ValidationError.from_exception_data(
                exc.title, [*errors, {"type": "missing", "loc": ("concurrency",), "input": data}]) from None

    @model_validator(mode="after")
    def _sweep_axis(self) -> "Matrix":
        """`sweep:` is a third load axis: alone, open loop, sized like `rates:` cells."""
        if self.sweep is None:
            return self
        if self.concurrency is not None or self.rates is not None:
            raise SpecValueError("give exactly one of `concurrency` (closed loop), `rates` (open loop, listed) or "
                                 "`sweep` (open loop, rates from probes of the baseline); one run compares arms "
                                 "along one load axis", key=["concurrency", "rates"],
                                 hint="remove `sweep:` or the " + ("`concurrency:`" if self.concurrency is not None
                                                                   else "`rates:`") + " list")
        if self.traces:
            raise SpecValueError("a `trace:` workload is sent at the trace's own times, not at rates probes choose",
                                 key=self._trace_keys(),
                                 hint="list `rates:` for the other workloads, or run the trace in a matrix of its own")
        if isinstance(self.duration_s, dict):
            raise SpecValueError("`duration_s: {LEVEL: SECONDS}` names concurrency levels: with `sweep:` give "
                                 "seconds", key="duration_s", hint="give one number of seconds, e.g. `duration_s: 30`")
        if self.warmup == "concurrency":
            raise SpecValueError("`warmup: concurrency` sends one full batch of the cell's concurrency: with "
                                 "`sweep:` give a number of requests", key="warmup", hint="e.g. `warmup: 4`")
        return self

    @model_validator(mode="after")
    def _check(self) -> "Matrix":
        if self.traces and self.concurrency is not None:
            raise SpecValueError("a `trace:` workload is sent open loop, at the trace's own times, and its cells are "
                                 "keyed by rate: give the other workloads `rates:` instead of `concurrency:` (one "
                                 "run compares arms along one load axis), or run the trace in a matrix of its own",
                                 key=["concurrency", *self._trace_keys()],
                                 hint="replace `concurrency:` with `rates: [...]` (requests per second), or move the "
                                      "trace to a matrix of its own")
        if self.traces and len(self.traces) == len(self.workloads):
            self._only_traces()
        else:
            if (self.requests is None) == (self.duration_s is None):
                raise SpecValueError("give exactly one of `requests` (per cell) or `duration_s`",
                                     key=["duration_s", "requests", "workloads"],
                                     hint="remove `duration_s:` or `requests:`" if self.requests is not None else
                                     "add `requests: N` (measured requests per cell) or `duration_s: SECONDS`")
            if self.sweep is None and (self.concurrency is None) == (self.rates is None):
                raise SpecValueError("give exactly one of `concurrency` (closed loop: requests in flight) or `rates` "
                                     "(open loop: requests per second); one run compares arms along one load axis",
                                     key=["concurrency", "rates"],
                                     hint="remove `rates:` or `concurrency:`" if self.rates is not None else
                                     "add `concurrency: [1, 4]` (closed loop) or `rates: [1, 2]` (open loop)")
        if self.rates is None and self.sweep is None and self.arrival != Arrival():
            raise SpecValueError("`arrival:` shapes the open-loop cells of `rates:` or `sweep:`: they need `rates:` "
                                 "(a trace's requests arrive at its own times)", key="arrival",
                                 hint="remove `arrival:`, or give `rates:` instead of `concurrency:`")
        if self.rates is None and self.sweep is None and self.max_concurrency is not None and not self.traces:
            raise SpecValueError("`max_concurrency:` caps open-loop cells: it needs `rates:`, `sweep:` or a `trace:` "
                                 "workload", key="max_concurrency",
                                 hint="remove it: a closed-loop cell's `concurrency:` is already its requests in flight")
        if self.rates is not None and isinstance(self.duration_s, dict):
            raise SpecValueError("`duration_s: {LEVEL: SECONDS}` names concurrency levels: with `rates:` give "
                                 "seconds", key="duration_s", hint="give one number of seconds, e.g. `duration_s: 30`")
        if (self.rates is not None or self.traces) and self.warmup == "concurrency":
            raise SpecValueError("`warmup: concurrency` sends one full batch of the cell's concurrency: with "
                                 "`rates:` give a number of requests", key="warmup", hint="e.g. `warmup: 4`")
        names = self.arm_names
        if self.baseline is not None and self.baseline not in names:
            raise SpecValueError(f"baseline {self.baseline!r} is not one of the arms {names}"
                                 + (f": {did_you_mean(self.baseline, names)}" if did_you_mean(self.baseline, names) else ""),
                                 key="baseline", hint=did_you_mean(self.baseline, names)
                                 or f"name one of the arms: {', '.join(names)}")
        if self.synthetic_acceptance is not None and self.target.kind in ("external", "slurm"):
            raise SpecValueError(f"`synthetic_acceptance:` sets the environment of servers the toolkit starts; a "
                                 f"target of kind {self.target.kind} " + ("is started by others" if self.target.kind ==
                                 "external" else "is not supported yet"), key="synthetic_acceptance",
                                 hint="use a target of kind local or hosts, or remove `synthetic_acceptance:`")
        if not self.training_data and any((w if isinstance(w, str) else w.name) == "match-training"
                                          for w in self.workloads if isinstance(w, str) or w.path is None):
            i = next(i for i, w in enumerate(self.workloads)
                     if (w if isinstance(w, str) else w.name) == "match-training")
            raise SpecValueError("workload `match-training` draws the domain mix of `training_data:`; set it",
                                 key=[("workloads", i), "workloads"],
                                 hint="add `training_data: FILE` (the drafter's training data, JSON lines), or "
                                      "remove the workload")
        if self.launches_auto is not None:
            if self.launches < 2:
                raise SpecValueError("`launches_auto:` needs `launches: 2` or more first (a CI over launches needs "
                                     "two)", key=["launches", "launches_auto"], hint="set `launches: 2` (the fewest rounds)")
            if self.launches_auto.max <= self.launches:
                raise SpecValueError(f"launches_auto.max ({self.launches_auto.max}) must exceed `launches` "
                                     f"({self.launches}): it is the most rounds, `launches` the fewest",
                                     key=[("launches_auto", "max"), "launches_auto"],
                                     hint=f"set `max:` to {self.launches + 1} or more, or lower `launches:`")
            if len(self.arms) < 2:
                raise SpecValueError("`launches_auto:` stops on the arms' speed-ups over the baseline: give two arms "
                                     "or more", key=["launches_auto", "arms"],
                                     hint="add an arm to `arms:`, or remove `launches_auto:` (fixed `launches:`)")
        return self

    def _only_traces(self) -> None:
        """Every workload a trace: the traces size and time their cells, so no load axis or size is given."""
        given = [k for k in ("concurrency", "rates", "requests", "duration_s") if getattr(self, k) is not None]
        if given:
            raise SpecValueError(f"every workload is a `trace:`, which sends its own requests at its own times: "
                                 f"`{'`, `'.join(given)}` would size nothing", key=given,
                                 hint="drop " + ("it" if len(given) == 1 else "them") + " (or add a workload it applies to)")

    def _trace_keys(self) -> list[tuple]:
        """Where the `trace:` workloads are (workloads[i].trace), for an error about them."""
        return [("workloads", i, "trace") for i, w in enumerate(self.workloads)
                if isinstance(w, Workload) and w.trace is not None]

    @property
    def traces(self) -> list[Workload]:
        """The `trace:` workloads."""
        return [w for w in self.workloads if isinstance(w, Workload) and w.trace is not None]

    @property
    def planned_launches(self) -> int:
        """The launch rounds planned: `launches`, or with `launches_auto` its `max` (a run may stop sooner)."""
        return self.launches_auto.max if self.launches_auto is not None else self.launches

    def spec_errors(self) -> list[tuple[tuple, str, str]]:
        """Mistakes found after validation, each at its own line (load_spec raises the first): a concurrency
        level, arm or workload listed twice would run a cell twice, or be silently dropped."""
        out = []
        for key, names in (("concurrency", [str(c) for c in self.concurrency or []]),
                           ("synthetic_acceptance", [f"{a:g}" for a in self.synthetic_acceptance or []]),
                           ("rates", [f"{r:g}" for r in self.rates or []]), ("arms", self.arm_names),
                           ("workloads", [w if isinstance(w, str) else w.name for w in self.workloads])):
            seen: dict[str, int] = {}
            for i, name in enumerate(names):
                if name in seen:
                    what = {"concurrency": "concurrency level", "rates": "rate", "arms": "arm",
                            "synthetic_acceptance": "acceptance length",
                            "workloads": "workload"}[key]
                    out.append(((key, i), f"{what} {name} is listed twice (also {key}[{seen[name]}])",
                                f"list each {what} once" + ({"workloads": " (a Workload entry is named by its `name:`)",
                                                             "arms": " (rename one: an {name, environment, preset} "
                                                                     "entry is named by its `name:`)"}.get(key, ""))))
                seen.setdefault(name, i)
        if self.target.slurm is not None:
            out += [(("target", *key), message, hint) for key, message, hint in
                    self.target.slurm.errors(self.target.launcher)]
        return out

    @property
    def arm_names(self) -> list[str]:
        """The arms' names, in the listed order (an `{name, environment, preset}` entry by its name)."""
        return [a if isinstance(a, str) else a.name for a in self.arms]

    def arm_source(self, arm: str) -> ArmSource | None:
        """The `{name, environment, preset}` entry of an arm from another Environment (None: a preset of
        `environment:`)."""
        return next((a for a in self.arms if not isinstance(a, str) and a.name == arm), None)

    def arm_index(self, arm: str) -> int:
        """Where an arm is listed in `arms:` (for an error at its line)."""
        return self.arm_names.index(arm)

    @property
    def baseline_arm(self) -> str:
        return self.baseline or self.arm_names[0]

    def levels(self, swept: list[float] | None = None) -> list[tuple[int, float | None]]:
        """The cells' load levels, (concurrency, rate): closed loop (c, None) per concurrency level; open loop
        (the cap on requests in flight, rate) per rate; a sweep's rates are `swept` (the run's probes chose
        them: none before)."""
        rates = (swept or []) if self.sweep is not None else self.rates
        if rates is not None:
            return [(self.max_concurrency or OPEN_LOOP_SLOTS, float(r)) for r in rates]
        return [(c, None) for c in self.concurrency or []]

    def warmup_at(self, concurrency: int) -> int:
        """Warmup requests of a cell at this concurrency (`warmup: concurrency`: one full batch)."""
        return concurrency if self.warmup == "concurrency" else int(self.warmup)

    def sent_at(self, concurrency: int) -> int | None:
        """Requests a cell at this concurrency sends, warmup included (None: a cell sized by time)."""
        return self.warmup_at(concurrency) + self.requests if self.requests else None

    def duration_at(self, concurrency: int) -> float | None:
        """Seconds to measure a cell at this concurrency (None: cells are sized by `requests`)."""
        if not isinstance(self.duration_s, dict):
            return self.duration_s
        return self.duration_s[max(k for k in self.duration_s if k <= concurrency)]
