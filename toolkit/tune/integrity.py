"""Tune integrity (issue 42, item 6): what a confirmation must be before its winner replaces the preset.

    decide(vs_preset, machines)   adopt the winner only when its launch-aware interval against the preset
                                  lies above 1 and the confirmation ran on one machine; else "keep the preset"
    confirmation_machines(runs)   arm -> the machines (host, GPU) its cells were measured on, read from the
                                  archives (telemetry's GPU uuid per cell, else the manifest's host)
    spliced(machines)             why the confirmation is not one sitting on one machine, or None

Pure where it can be: the numbers come in, the decision goes out. The interval is the geometric mean over
the usable held-out cells of the winner's paired ratio to the preset, request noise combined across cells
and, where every arm had a server of its own, both launches' noise added once (a launch moves all of its
cells together: toolkit.tune.search.score, launch_var). One shared server has no launch between arms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from toolkit.tune.search import Score

ADOPT = "adopt the winner"
KEEP = "keep the preset"


@dataclass(frozen=True)
class Decision:
    adopt: bool
    says: str  # ADOPT or KEEP
    reason: str


def _fmt(s: Score) -> str:
    return f"{s.geomean:.3f} [{s.low:.3f}, {s.high:.3f}]" if s.geomean is not None and s.low is not None else "-"


def decide(vs_preset: Score, winner: str, arm: str, machines: dict[str, list[str]] | None = None) -> Decision:
    """The winner replaces the preset only when the confirmation ran on one machine and the interval of its
    ratio to the preset excludes 1 from above. Anything else (an interval reaching 1, no usable cell, arms
    measured on different machines) keeps the preset: a tune changes only what it proved."""
    d = _on_numbers(vs_preset, winner, arm)
    why = spliced(machines or {})
    if why:
        return Decision(False, KEEP, f"the confirmation is not one sitting on one machine ({why}), so its "
                        f"arms are not comparable; on its numbers alone: {d.reason}")
    return d


def _on_numbers(vs_preset: Score, winner: str, arm: str) -> Decision:
    if vs_preset.geomean is None or vs_preset.low is None:
        return Decision(False, KEEP, f"no held-out cell a verdict may use compares {winner} with {arm}")
    if vs_preset.low > 1:
        return Decision(True, ADOPT, f"{winner} / {arm} as it was = {_fmt(vs_preset)} (launch-aware 95 % interval "
                        "above 1)")
    if vs_preset.high < 1:
        return Decision(False, KEEP, f"{winner} is slower than {arm} as it was: {_fmt(vs_preset)}")
    return Decision(False, KEEP, f"{winner} / {arm} as it was = {_fmt(vs_preset)}: the launch-aware 95 % "
                    "interval includes 1, so the winner is not shown to beat the preset")


def spliced(machines: dict[str, list[str]]) -> str | None:
    """Why the arms of a confirmation were not measured on one machine, or None."""
    seen = sorted({m for ms in machines.values() for m in ms})
    if len(seen) <= 1:
        return None
    return "; ".join(f"{a} on {', '.join(ms)}" for a, ms in sorted(machines.items()))


def _read_json(path: Path):
    from toolkit.results import compact

    try:
        return json.loads(compact.read_text(path))
    except (OSError, ValueError):
        return None


def _gpu_ids(fp) -> list[str]:
    gpu = (fp or {}).get("gpu") or {}
    return sorted(g.get("uuid") or g.get("serial") or "" for g in gpu.get("gpus") or [] if g.get("uuid") or g.get("serial"))


def run_host(run_dir: Path) -> str:
    """The machine a run's manifest names: the provisioned hosts' names, else the controller's, with GPUs."""
    man = _read_json(Path(run_dir) / "manifest.json") or {}
    host = man.get("host") or {}
    hosts = host.get("hosts") or {}
    if hosts:
        return ",".join(f"{n}({'/'.join(_gpu_ids(fp)) or 'no GPU'})" for n, fp in sorted(hosts.items()))
    c = host.get("controller") or {}
    gpus = _gpu_ids(c)
    return f"{c.get('hostname') or '?'}" + (f"({'/'.join(gpus)})" if gpus else "")


def confirmation_machines(run_dirs: list[Path]) -> dict[str, list[str]]:  # data-keyed: arm
    """arm -> the machines its confirmation cells ran on. A cell's GPU is the uuid its telemetry sampled (the
    manifest names only the host that started the run: a resumed run may have measured elsewhere); a cell
    without telemetry (no GPU) is the manifest's host."""
    out: dict[str, set[str]] = {}
    for run in map(Path, run_dirs):
        fallback = run_host(run)
        for cell in sorted((run / "cells").glob("*__r*.json*")):
            if cell.name.endswith((".jsonl", ".jsonl.gz")):
                continue
            key = cell.name.split(".json")[0]
            arm = key.split("__")[0]
            tel = _read_json(run / "telemetry" / f"{key}.json")
            uuids = sorted({s.get("uuid") for s in tel or [] if isinstance(s, dict) and s.get("uuid")})
            out.setdefault(arm, set()).update([f"GPU {u}" if not u.startswith("GPU") else u for u in uuids] or [fallback])
    return {a: sorted(ms) for a, ms in sorted(out.items())}
