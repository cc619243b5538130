"""What an engine is to the rest of the toolkit: one `Engine` object per serving engine, asked by spec,
render, image, serve, slurm, bench and tune instead of comparing `env.engine` with a name. Each concrete
engine (sglang.py, transformers.py) gives its facts here; the registry is toolkit/engines/__init__.py.

    eng = engines.get(env.engine)
    eng.meaning(env, arm)            PresetMeaning (what the preset means to this engine)
    eng.knobs, eng.level             what the tuner may search, and whether a trial restarts the server
    eng.supports_launcher("docker")  the target launchers it runs under
    eng.server_state(info)           what its /server_info says (engines without one: {})
    eng.spec_errors(env)             mistakes its Environment has before any server starts ([] by default)
    eng.acceptance                   where a cell's acceptance is read: "metrics" (the server's counters,
                                     speculative arms), "log" (its log, every arm) or None

Launchers live in toolkit.serve (a floor above): an Engine names them by kind, never imports them.
"""

from __future__ import annotations

from typing import Any

from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning


class Engine:
    name: str = ""
    facts: EngineFacts
    # the launcher kinds of a Matrix target it runs under (docker/container: an image; process: a Python)
    launchers: frozenset[str] = frozenset()
    # runs in the toolkit's own Python (its `local` extra) from the Environment's `model:`, whatever the
    # target's launcher says; its server command is the toolkit's own (toolkit.serve)
    embedded: bool = False
    # the toolkit builds it an image from a pinned source (Dockerfile, patch and flag preflight, build record,
    # the Environment's base_image and engine section)
    builds_image: bool = False
    # the server reports itself (/server_info, /metrics, /flush_cache): read into the arm facts and the report
    reports_server_info: bool = False
    spans_nodes: bool = False          # a Slurm job of several nodes
    slurm_jobs: bool = False           # toolkit/slurm renders its server command into a job script
    tunes_server_flags: bool = False   # bench tune knows its server flags' rules (toolkit/tune/space.py)
    exclusive_gpus: bool = False       # two arms on the same GPUs disturb each other (no `parallel`)
    synthetic_acceptance: bool = False  # a forced acceptance length (the Matrix's `synthetic_acceptance:`)
    reads_generation_config: bool = False  # its arms differ by per-request generation_config (transformers' keys)
    knob_separator: str = "-"          # how its knob names join words (flags: dashes; generation_config: _)
    dummy_weight_seed: int | None = None  # dummy weights it fills itself from this fixed seed
    acceptance: str | None = None      # "metrics", "log" or None (see the module's docstring)
    job_env: dict[str, str] = {}       # what a batch job of it adds to the server's environment
    top_k_off: tuple[int, ...] = (-1, 0)  # a request body's top_k values that turn top-k off (toolkit/specs/sampling.py)

    @property
    def knobs(self) -> dict[str, KnobInfo]:
        return self.facts.knobs

    @property
    def level(self) -> str:
        return self.facts.level

    def supports_launcher(self, kind: str) -> bool:
        return kind in self.launchers

    def meaning(self, env: Any, arm: str) -> PresetMeaning:
        """What preset `arm` of Environment `env` means to this engine (an unknown arm: a plain preset)."""
        raise NotImplementedError

    def server_state(self, info: dict | None) -> dict:
        """The arm facts a running server's /server_info gives ({} for an engine that has none)."""
        return {}

    def acceptance_counts(self, metrics: dict[str, float]) -> dict[str, float] | None:
        """Its counters in one shape, for the difference over a cell: {"tokens", "steps", "requests"}, cumulative,
        so that d(tokens) / d(steps) is the cell's tokens per verification step and d(requests) the requests the
        difference holds; None without them (bench/acceptance.py reads every engine through this)."""
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
