"""Where each arm's server comes from: a preset of the Matrix's `environment:` (an arm named by a string), or
of another Environment (`{name, environment, preset}`: engines as arms, e.g. SGLang's and vLLM's presets in
one run). Each Environment file is loaded once, however many arms it serves.

    primary = load_env_spec(spec, ("environment",), m.environment)
    sources = load_arm_sources(spec, primary)    # {arm: ArmSource(env_spec, preset, hash)} of the mapping arms
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import SpecError, did_you_mean
from toolkit.specs import LoadedSpec, load_spec, spec_hash


@dataclass(frozen=True)
class ArmSource:
    """An arm's Environment (loaded once per file) and its server preset there."""

    env_spec: LoadedSpec
    preset: str
    index: int  # its place in the Matrix's `arms:` (an error about it points there)
    hash: str  # the Environment's spec hash (as the manifest's `environment.hash` is taken)


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


def load_arm_sources(spec: LoadedSpec, primary: LoadedSpec) -> dict[str, ArmSource]:
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
