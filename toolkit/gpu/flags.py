"""Which of an Environment's server flags run on which GPU generation.

SGLang gates FlashInfer allreduce fusion and torch symmetric memory to SM90 (Hopper) and SM100
(Blackwell datacenter) in its help text and its checks (FACTS.md). The RTX PRO 6000 is SM120, so
the Blackwell environment carries a patch that lifts the gate; a spec that lists such a patch
under `sglang.patches` gets the flags on SM120 too. A patch counts as lifting the gate when its
file name or one of its added lines names SM120 (`sm120`, `sm_120`, `is_sm120...`, `(12, 0)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# flag (as written in a preset) -> what it is, for messages
GATED_FLAGS: dict[str, str] = {
    "enable-flashinfer-allreduce-fusion": "FlashInfer allreduce fusion",
    "flashinfer-allreduce-fusion-backend": "FlashInfer allreduce fusion",
    "enable-torch-symm-mem": "torch symmetric memory",
}
# environment variables that switch the same features on
GATED_ENV: dict[str, str] = {"SGLANG_ENABLE_TORCH_SYMM_MEM": "torch symmetric memory"}
# the SM120 patch enables the single-node trtllm backend only (its own header says so)
SM100_ONLY_BACKENDS = {"mnnvl", "cutedsl"}
_SM120 = re.compile(r"(?i)sm_?12[0-9]|is_sm12|\(\s*12\s*,\s*[0-9]\s*\)|sm12x")


def sm_name(capability: tuple[int, int]) -> str:
    return f"SM{capability[0]}{capability[1]}"


def upstream_supported(capability: tuple[int, int]) -> bool:
    major, minor = capability
    return (major == 9 and minor == 0) or major == 10


@dataclass(frozen=True)
class GatedUse:
    flag: str          # the flag or env var as written
    feature: str
    presets: tuple[str, ...]  # presets that turn it on ("env" for an env var)
    values: tuple[str, ...] = ()  # the values given, as strings


def _on(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off", "none")
    return bool(value)


def gated_uses(env_model: Any) -> list[GatedUse]:
    """Gated flags the spec turns on, with the presets that do so. Pure over the model."""
    found: dict[str, list[str]] = {}
    values: dict[str, list[str]] = {}
    for preset, args in (env_model.servers or {}).items():
        for flag, value in args.items():
            if flag in GATED_FLAGS and _on(value):
                found.setdefault(flag, []).append(preset)
                if str(value) not in values.setdefault(flag, []):
                    values[flag].append(str(value))
    uses = [GatedUse(f, GATED_FLAGS[f], tuple(p), tuple(values[f])) for f, p in found.items()]
    for var, feature in GATED_ENV.items():
        if _on(env_model.env.get(var, "")):
            uses.append(GatedUse(var, feature, ("env",)))
    return uses


def sm120_patch(loaded: Any) -> Path | None:
    """The patch listed in the spec that lifts the SM90/SM100 gate for SM120, or None."""
    sglang = getattr(loaded.model, "sglang", None)
    if sglang is None:
        return None
    for i, patch in enumerate(sglang.patches):
        path = loaded.path_of(("sglang", "patches", i, "path"), patch.path, must_exist=False)
        if _SM120.search(path.name):
            return path
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        added = (ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        if any(_SM120.search(ln) for ln in added):
            return path
    return None


def flag_support(use: GatedUse, capability: tuple[int, int], patch: Path | None) -> tuple[str, str]:
    """(status, reason) of one gated flag on a GPU of this compute capability."""
    sm = sm_name(capability)
    where = f"{use.flag} ({use.feature}; presets: {', '.join(use.presets)})"
    if upstream_supported(capability):
        return "pass", f"{where}: supported upstream on {sm}"
    if capability[0] == 12 and patch is not None:
        only_sm100 = sorted(set(use.values) & SM100_ONLY_BACKENDS)
        if use.flag == "flashinfer-allreduce-fusion-backend" and only_sm100:
            return "fail", (f"{where}: backend {', '.join(only_sm100)} stays SM100-only under the SM120 patch "
                            f"{patch.name}; use auto or trtllm")
        return "pass", f"{where}: gated upstream to SM90/SM100; {sm} enabled by patch {patch.name}"
    hint = ("list the SM120 patch (envs/patches/) under sglang.patches" if capability[0] == 12
            else "turn the flag off for this GPU")
    return "fail", f"{where}: gated upstream to SM90/SM100, not supported on {sm}; {hint}"
