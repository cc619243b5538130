"""Where each arm's server comes from: a preset of the Matrix's `environment:` (an arm named by a string), or
of another Environment (`{name, environment, preset}`: engines as arms, e.g. SGLang's and vLLM's presets in
one run). The plan (toolkit.bench.plan.load_arm_sources, the one reader of spec files) loads each Environment
file once, however many arms it serves, into an ArmSource per such arm.

    plan.sources["vllm-ngram"]        # ArmSource(env_spec, preset="ngram", index=3, hash=...)
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.specs import LoadedSpec


@dataclass(frozen=True)
class ArmSource:
    """An arm's Environment (loaded once per file) and its server preset there."""

    env_spec: LoadedSpec
    preset: str
    index: int  # its place in the Matrix's `arms:` (an error about it points there)
    hash: str  # the Environment's spec hash (as the manifest's `environment.hash` is taken)


# data-keyed: the arms[I].environment reference
def other_environments(sources: dict[str, ArmSource], primary: LoadedSpec) -> dict[str, LoadedSpec]:
    """The Environments other than the Matrix's own that arms come from, each once, named after the first arm
    entry that names it (`arms[I].environment`: its key among the Matrix's referenced files, and its name in
    the archive's inputs/ listing)."""
    out: dict[str, LoadedSpec] = {}
    for s in sorted(sources.values(), key=lambda s: s.index):
        if s.env_spec is not primary and all(s.env_spec is not e for e in out.values()):
            out[f"arms[{s.index}].environment"] = s.env_spec
    return out
