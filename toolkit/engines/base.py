"""What an engine is to the rest of the toolkit: one `Engine` object per serving engine, asked by spec,
render, image, serve, slurm, bench and tune instead of comparing `env.engine` with a name. Each concrete
engine (sglang.py, transformers.py) gives its facts here; the registry is toolkit/engines/__init__.py.

    eng = engines.get(env.engine)
    eng.meaning(env, arm)            PresetMeaning (what the preset means to this engine)
    eng.knobs, eng.level             what the tuner may search, and whether a trial restarts the server
    eng.supports_launcher("docker")  the target launchers it runs under
    eng.server_state(info)           ServerState: what its /server_info says (engines without one: nothing)
    eng.spec_errors(env)             mistakes its Environment has before any server starts ([] by default)
    eng.acceptance                   where a cell's acceptance is read: "metrics" (the server's counters,
                                     speculative arms), "log" (its log, every arm) or None
    eng.server_command(args, python) the exact server command of a preset (process, container and Slurm job)
    eng.image_template               the Dockerfile template its image is rendered from (templates/), or None

Launchers live in toolkit.serve (a floor above): an Engine names them by kind, never imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning, ServerState


@dataclass(frozen=True)
class AcceptanceCounts:
    """An engine's acceptance counters in one shape (Engine.acceptance_counts), cumulative: the tokens its
    verification steps made, the steps, the finished requests. The difference of two samples (`after - before`)
    is a cell's: tokens / steps its tokens per verification step, requests the requests it holds."""

    tokens: float
    steps: float
    requests: float

    def __sub__(self, before: AcceptanceCounts) -> AcceptanceCounts:
        return AcceptanceCounts(self.tokens - before.tokens, self.steps - before.steps,
                                self.requests - before.requests)


class Engine:
    name: str = ""
    title: str = ""                    # its name in a sentence ("SGLang", "vLLM")
    facts: EngineFacts
    # the launcher kinds of a Matrix target it runs under (docker/container: an image; process: a Python)
    launchers: frozenset[str] = frozenset()
    # runs in the toolkit's own Python (its `local` extra) from the Environment's `model:`, whatever the
    # target's launcher says; its server command is the toolkit's own (toolkit.serve)
    embedded: bool = False
    # the toolkit builds it an image (toolkit render env / build env: a Dockerfile from `image_template`, the
    # content-hash cache, a build record); its Matrix arms run in that image under `launcher: docker`
    builds_image: bool = False
    image_template: str | None = None  # under templates/; an engine's own folder templates/engines/NAME/ is hashed
                                       # into its Environments' spec hash alone (toolkit.specs.spec_hash)
    requires_image: bool = False       # every Environment of it names its image (base_image and its engine section)
    # where its presets' flags are checked: "build" (against its pinned source, fetched: toolkit build env and
    # bench tune), "load" (when the spec loads, from a table shipped with the toolkit), None (not at all)
    flag_check: str | None = None
    # the server reports itself (/server_info, /metrics, /flush_cache): read into the arm facts and the report
    reports_server_info: bool = False
    spans_nodes: bool = False          # a Slurm job of several nodes
    slurm_jobs: bool = False           # toolkit/slurm renders its server command into a job script
    tunes_server_flags: bool = False   # bench tune knows its server flags' rules (toolkit/tune/space.py)
    exclusive_gpus: bool = False       # two arms on the same GPUs disturb each other (no `parallel`)
    synthetic_acceptance: bool = False  # a forced acceptance length (the Matrix's `synthetic_acceptance:`)
    # a request's `ignore_eos: true` (the Matrix's `ignore_eos:`): it decodes to its max tokens past end of sequence
    ignore_eos: bool = False
    reads_generation_config: bool = False  # its arms differ by per-request generation_config (transformers' keys)
    knob_separator: str = "-"          # how its knob names join words (flags: dashes; generation_config: _)
    dummy_weight_seed: int | None = None  # dummy weights it fills itself from this fixed seed
    acceptance: str | None = None      # "metrics", "log" or None (see the module's docstring)
    # the counters a "metrics" acceptance is made of, as reports say it (None: SGLang's, the default wording of
    # toolkit.schema.metrics.ACCEPT_SOURCES["server-metrics"])
    metrics_counters: str | None = None
    job_env: dict[str, str] = {}       # what a batch job of it adds to the server's environment
    top_k_off: tuple[int, ...] = (-1, 0)  # a request body's top_k values that turn top-k off (toolkit/specs/sampling.py)

    @property
    def knobs(self) -> dict[str, KnobInfo]:  # data-keyed: knob names
        return self.facts.knobs

    @property
    def level(self) -> str:
        return self.facts.level

    def supports_launcher(self, kind: str) -> bool:
        return kind in self.launchers

    def meaning(self, env: Any, arm: str) -> PresetMeaning:
        """What preset `arm` of Environment `env` means to this engine (an unknown arm: a plain preset)."""
        raise NotImplementedError

    def server_command(self, args: dict, python: str) -> list[str]:
        """The exact command that serves preset `args` with this `python` (what a process, a container or a
        Slurm job runs); engines whose server is the toolkit's own (embedded) have none here."""
        raise NotImplementedError(f"engine {self.name!r} has no server command of its own")

    def served_name(self, args: dict) -> str | None:
        """The model name requests to a server of preset `args` carry (None: the server's only model)."""
        return None

    def pinned_version(self, env: Any) -> str | None:
        """The engine version an Environment pins (its image's, where it builds one); None when it pins none."""
        return None

    def canonical(self, params: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """What its server would really run for these preset values: (the values, "") or (None, why it refuses);
        a rewrite the server makes by itself is applied (bench tune merges two spellings of one setting). By
        default the values as they are."""
        return dict(params), ""

    def knob_error(self, env: Any, knob: str, value: Any) -> tuple[str, str | None] | None:
        """What its server's own parser says of flag `knob` set to `value` in Environment `env`, before any
        launch: (message, hint), or None when it takes it or the engine checks elsewhere (SGLang: against its
        fetched source in the tune session)."""
        return None

    def server_state(self, info: dict | None) -> ServerState:
        """The arm facts a running server's /server_info gives (none said, for an engine that has none)."""
        return ServerState()

    def acceptance_counts(self, metrics: dict[str, float]) -> AcceptanceCounts | None:
        """Its counters in one shape (AcceptanceCounts), for the difference over a cell; None without them
        (bench/acceptance.py reads every engine through this)."""
        return None

    def spec_errors(self, env: Any) -> list[tuple[tuple, str, str | None]]:
        """Mistakes in an Environment of this engine found when the spec loads, before any server starts:
        (key path, message, hint) each; load_spec raises the first at its line (vllm: its flags checked
        against the pinned vLLM's parser)."""
        return []

    def spec_warnings(self, env: Any) -> list[str]:
        """What the spec load warns about for an Environment of this engine."""
        return []

    def __repr__(self) -> str:
        return f"<Engine {self.name}>"


def flag_args(args: dict[str, Any], false: str | None) -> list[str]:
    """A preset's `flag: value` pairs as a command line: true -> `--flag`, a list -> `--flag a b`, anything else
    `--flag value`; false -> `--{false}flag` (e.g. "no-", vLLM's BooleanOptionalAction), or left out when None."""
    out: list[str] = []
    for key, value in args.items():
        if value is True:
            out.append(f"--{key}")
        elif value is False:
            if false is not None:
                out.append(f"--{false}{key}")
        elif isinstance(value, list):
            out += [f"--{key}", *map(str, value)]
        else:
            out += [f"--{key}", str(value)]
    return out
