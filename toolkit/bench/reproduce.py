"""`toolkit results reproduce RUN`: replay an archived run from the archive alone and say whether its
result reproduced.

    rep = reproduce("20261202T111454Z-7d0001", root=Path("results"))
    rep.verdict        # "reproduced" | "differs" | "inconclusive" (exit 0 / 1 / 3)
    rep.new.path       # the new run: its manifest says `reproduces: <the original's run id>`

1. The original is checked: it verifies (SHA256SUMS, schema), it is complete, it was run by the toolkit.
2. Its inputs/ are laid out in a temporary tree (toolkit.bench.inputs), every file checked against the
   manifest's listing; the Matrix is loaded from there, never from the checkout's envs/. An archive from
   before inputs/ existed is rebuilt from the manifest's resolved specs when it read no other file, and
   otherwise names what it lacks.
3. What changed underneath is drift: another GPU model, another engine version, a different dummy-model
   recipe, the spec resolving differently. Drift is refused (exit 2) unless --allow-drift, which records
   it in the new manifest; --target and --image are drift asked for, recorded too.
4. The same cells run with the same seeds, prompts and launches (toolkit.bench.matrix.run_matrix); the new
   run is compared with the original by toolkit.results.diff (the server launch as the unit of
   replication), and toolkit.results.equivalence gives the verdict with a margin X fixed before the data
   (--tolerance, else its DEFAULT_MARGIN_PCT): `reproduced within ±X %` (equivalence shown for every
   metric and arm), `differs` (a change beyond X with confidence, or a cell missing, failed or not
   comparable), `inconclusive` (neither: a CI straddles the margin, launch noise unknown, or a test that
   could not run), with the environment diff (toolkit.results.envdiff) beside them.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import yaml

from toolkit import engines, targets
from toolkit.bench.inputs import Origin, check_outside, materialize
from toolkit.bench.sources import ArmSource
from toolkit.errors import ToolkitError
from toolkit.results.archive import Archive, open_archive
from toolkit.results.diff import DiffResult, diff_runs
from toolkit.results.equivalence import Verdict, judge, supported_margin
from toolkit.schema.manifest import BuildRecord, DriftRecord, Manifest
from toolkit.specs import LoadedSpec, load_spec, spec_hash

ASKED = {"target", "image"}  # drift the user asked for: recorded, never refused


@dataclass
class Reproduction:
    original: Archive
    new: Archive
    status: str  # of the new run: complete | partial | failed
    diff: DiffResult
    moved: list[dict]  # cells missing, failed or not comparable, then the changes beyond the margin
    drift: list[DriftRecord]
    notes: list[str] = field(default_factory=list)
    judged: Verdict | None = None
    interrupted: bool = False  # the new run was stopped by a signal (exit 130; --resume completes it)
    arms: dict[str, Verdict] = field(default_factory=dict)  # per arm: the same rules on its cells alone

    @property
    def verdict(self) -> str:
        return self.judged.verdict if self.judged else ("differs" if self.moved else "reproduced")

    @property
    def exit_code(self) -> int:
        return self.judged.exit_code if self.judged else (1 if self.moved else 0)

    def to_dict(self) -> dict:  # json-edge: bench reproduce --json
        d = self.diff.to_dict()
        cells = d["cells"]
        moved_labels = {m["cell"] for m in self.moved}
        for c in cells:
            c["moved"] = c["label"] in moved_labels
        untested = sum(1 for c in self.diff.cells for m in c.metrics.values()
                       if m.verdict == "too-few" or m.noise == "default floor")
        j = self.judged
        return {"verdict": self.verdict, "headline": j.headline if j else self.verdict,
                "tolerance_pct": j.tolerance_pct if j else None, "tolerance_source": j.tolerance_source if j else None,
                "supported_pct": j.supported_pct if j else None,
                "reasons": j.reasons if j else [], "metrics": j.metrics if j else {},
                **({"metrics_left_out": j.left_out} if j and j.left_out else {}), "noise": d["noise"],
                "calibration": d["calibration"], "calibration_refused": d["calibration_refused"],
                "original": {"run_id": self.original.run_id, "path": str(self.original.path)},
                "reproduction": {"run_id": self.new.run_id, "path": str(self.new.path), "status": self.status},
                "moved": self.moved, "cells": cells, "only_original": d["only_a"], "only_reproduction": d["only_b"],
                "untested": untested, "geomean": d["geomean"], "correction": d["correction"], "env": d["env"],
                "drift": [x.model_dump(mode="json") for x in self.drift], "notes": self.notes,
                "arms": {arm: {"verdict": v.verdict, "headline": v.headline, "reasons": v.reasons,
                               "supported_pct": v.supported_pct} for arm, v in self.arms.items()}}


# -- the original

def open_original(ref: str, root: Path) -> Archive:
    """The run to replay: it verifies, it is complete, and the toolkit ran it."""
    from toolkit.bench.inputs import check_inputs
    from toolkit.results.commands import resolve_run
    from toolkit.results.verify import errors, verify_run

    arch = open_archive(resolve_run(ref, root))
    bad = check_inputs(arch)
    if bad:
        raise bad[0]
    problems = errors(verify_run(arch.path))  # a warning (records re-encoded at 1 us) finds nothing wrong
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise ToolkitError(f"run {arch.run_id} does not verify: {problems[0].message}{more}",
                           file=arch.path / problems[0].file,
                           hint=f"`toolkit results verify {arch.path}` names every problem; restore the run folder "
                                "from a copy")
    if arch.manifest.source is not None and arch.manifest.source.format != "toolkit":
        raise ToolkitError(f"run {arch.run_id} was imported from {arch.manifest.source.format}: the toolkit did not "
                           "run it, so there is nothing to replay",
                           hint="reproduce a run made by `toolkit bench matrix`")
    if arch.interrupted:  # failed cells are a final result (a replay compares them); missing ones are not
        raise ToolkitError(f"run {arch.run_id} was interrupted ({arch.why}): its result is not final",
                           hint="finish it first (`toolkit bench matrix MATRIX --resume RUN`), or reproduce a "
                                "finished run")
    return arch


def _needs(matrix: dict, env: dict) -> list[str]:
    """The files an archive without inputs/ would have to hold for a replay (from its resolved specs)."""
    from toolkit.workloads.bundled import BUNDLED, MATCH_TRAINING

    out = []
    for i, w in enumerate(matrix.get("workloads") or []):
        if isinstance(w, str) and w not in BUNDLED and w != MATCH_TRAINING:
            out.append(f"matrix workloads[{i}] ({w})")
        elif isinstance(w, dict):
            out += [f"matrix workloads[{i}].{k} ({w[k]})" for k in ("path", "holdout", "trace") if w.get(k)]
    target = matrix.get("target") or {}
    out += [f"matrix target.{k} ({target[k]})" for k in ("hosts", "ca_bundle") if target.get(k)]
    if matrix.get("training_data"):
        out.append(f"matrix training_data ({matrix['training_data']})")
    for i, p in enumerate((env.get("sglang") or {}).get("patches") or []):
        out.append(f"environment sglang.patches[{i}] ({p.get('path')})")
    if (env.get("ca_bundle") or {}).get("path"):
        out.append(f"environment ca_bundle ({env['ca_bundle']['path']})")
    if (env.get("model") or {}).get("path"):
        out.append(f"environment model.path ({env['model']['path']})")
    return out


def rebuild_from_manifest(arch: Archive, tree: Path, notes: list[str]) -> Path:
    """An archive written before inputs/ existed: its resolved specs as files, when it read no other file."""
    m = arch.manifest
    mres, eres = m.matrix.resolved, m.environment.resolved
    where = arch.path / "manifest.json"
    if not mres or not eres:
        raise ToolkitError(f"run {arch.run_id} has no inputs/ and its manifest lacks the resolved "
                           f"{'Matrix' if not mres else 'Environment'}: there is nothing to replay from", file=where)
    missing = _needs(mres, eres)
    if missing:
        raise ToolkitError(f"run {arch.run_id} was archived before runs kept their inputs/, and it read files the "
                           f"archive does not hold: {'; '.join(missing)}", file=where,
                           hint="a replay needs their bytes: run the matrix again with this toolkit (its archive keeps "
                                "inputs/), then reproduce that run")
    env_rel = str(mres.get("environment") or f"{eres.get('name', 'environment')}.yaml")
    mdir = tree.joinpath(*(["m"] * (PurePosixPath(env_rel).parts.count("..") + 1)))
    matrix_path = mdir / f"{mres.get('name', 'matrix')}.yaml"
    env_path = Path(os.path.normpath(mdir / env_rel))
    for path, data in ((matrix_path, mres), (env_path, eres)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    notes.append("archived before inputs/ existed: the Matrix and Environment were rebuilt from the manifest's "
                 "resolved specs (it read no other file), so the matrix hash differs from the original's")
    return matrix_path


# -- what changed underneath

def _changed(was: Any, now: Any, prefix: str = "") -> dict[str, tuple[Any, Any]]:  # data-keyed: dotted field
    """Dotted fields whose recorded value differs now; fields a newer toolkit added are not changes."""
    if isinstance(was, dict) and isinstance(now, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for k, v in was.items():
            out.update(_changed(v, now.get(k), f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {} if was == now else {prefix: (was, now)}


def _resolution_drift(part: str, resolved: dict, spec: LoadedSpec) -> list[DriftRecord]:
    """Fields the replayed spec resolves to differently than the run recorded (a toolkit change)."""
    moved = _changed(resolved, spec.model.model_dump(mode="json"))
    if not moved:
        return []
    return [DriftRecord(what=f"{part} resolves differently", original={k: a for k, (a, _) in moved.items()},
                        current={k: b for k, (_, b) in moved.items()})]


def _engine_version(m: Manifest, derived: Any, engine: str) -> str | None:
    for info in derived.arm_info.values():
        if info.engine_version:
            return info.engine_version
    if engines.get(engine).builds_image and m.build and m.build.served_version:
        return m.build.served_version
    return m.host.primary.engines.get(engine)


def host_drift(original: Archive, spec: LoadedSpec, env_spec: LoadedSpec,
               build: BuildRecord | None) -> list[DriftRecord]:
    """Another GPU model, engine version or dummy-model recipe than the original's."""
    from toolkit.bench.hostinfo import host_fingerprint
    from toolkit.bench.inputs import dummy_record
    from toolkit.bench.slots import plan_slots
    from toolkit.results.facts import gpu_model

    env = env_spec.model
    now = Manifest(host=host_fingerprint(plan_slots(spec, env.engine)))
    out = []
    g0, g1 = gpu_model(original.manifest.host.primary), gpu_model(now.host.primary)
    if g0 != g1:
        out.append(DriftRecord(what="gpu", original=g0, current=g1))
    v0 = _engine_version(original.manifest, original.derived, env.engine)
    built = engines.get(env.engine).builds_image  # its version: the image's
    if built:
        v1 = (build.served_version if build else None) or now.host.primary.engines.get(env.engine)
    else:
        v1 = now.host.primary.engines.get(env.engine)
    if v0 != v1 and (v1 is not None or not built):  # an image of unknown version: see notes
        out.append(DriftRecord(what=f"engine {env.engine}", original=v0, current=v1))
    was = original.manifest.inputs.dummy_model if original.manifest.inputs else None
    dummy = dummy_record(env_spec)
    if was is not None and was.hash != (dummy.hash if dummy else None):
        out.append(DriftRecord(what="dummy model", original=was.model_dump(exclude_unset=True),
                               current=dummy.model_dump(exclude_unset=True) if dummy else {}))
    return out


def check_target(target: str) -> None:
    """--target before anything is read: a URL of another scheme is not a Hosts spec named `ftp`."""
    if "://" in target and not target.startswith(("http://", "https://")):
        raise ToolkitError(f"--target {target}: an external target is an http:// or https:// URL, not "
                           f"{target.split('://', 1)[0]}://",
                           hint="give `local`, an http(s) URL (e.g. https://gateway:8443), or a Hosts spec "
                                "PATH[:GROUP]")


def _retarget(spec: LoadedSpec, target: str) -> tuple[LoadedSpec, DriftRecord]:
    """The matrix with its target replaced: `local`, an http(s) URL, or a Hosts spec (PATH[:GROUP])."""
    new = targets.from_option(target).model_dump(mode="json", exclude_unset=True)  # the first kind reading it
    data = spec.model.model_dump(mode="json", exclude_none=True)
    old = data["target"]
    data["target"] = new
    path = spec.path.with_name(f".{spec.path.stem}.target.yaml")  # beside it: relative paths still resolve
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path, expect="Matrix"), DriftRecord(what="target", original=old, current=new)


def choose_image(original: Archive, env_spec: LoadedSpec, spec: LoadedSpec, image: str | None,
                 drift: list[DriftRecord], notes: list[str]) -> BuildRecord | None:
    """The image an SGLang replay runs: --image, else the one built from the same spec hash here, else the
    original's (by id or tag, where this host still has it)."""
    env, m = env_spec.model, original.manifest
    docker = engines.get(env.engine).builds_image and spec.model.target.launcher != "process"
    if not docker:
        if image:
            raise ToolkitError("--image applies to SGLang arms in containers; this run launched no image",
                               hint="leave --image out")
        return None
    from toolkit.image.records import find_build_record

    if image:
        rec = find_build_record(m.environment.hash or "")
        built = rec if rec is not None and rec.image_id and image in (rec.tags or []) else None
        if (m.build.image if m.build else None) != image:
            drift.append(DriftRecord(what="image", original=m.build.image if m.build else None, current=image))
        if built is None:
            notes.append(f"--image {image}: no build record of it here, so its SGLang version was not checked")
        return built or BuildRecord(tags=[image])
    rec = find_build_record(m.environment.hash or "")
    if rec is not None:
        return rec
    if m.build is not None and m.build.image:
        notes.append(f"no build record of environment {m.environment.hash[:12]} here: running the original's image "
                     f"{m.build.image}")
        return m.build
    raise ToolkitError(f"no image for environment {(m.environment.hash or '?')[:12]} on this machine",
                       hint="build it from the archived spec (`toolkit results reproduce "
                            f"{original.run_id} --extract DIR`, then `toolkit build env DIR/<environment spec>`), "
                            "or pass --image")


# -- the replay

def extract(ref: str, root: Path, dest: Path) -> Path:
    """The run's inputs laid out under dest (which must not exist yet); returns the Matrix spec's path."""
    original = open_original(ref, root)
    if dest.exists():
        raise ToolkitError(f"{dest} exists", hint="--extract writes a new folder; name one that does not exist")
    if original.manifest.inputs is None:
        return rebuild_from_manifest(original, dest, [])
    return materialize(original, dest)


def _hash_notes(m: Manifest, spec: LoadedSpec, env_spec: LoadedSpec, sources: dict[str, ArmSource]) -> list[str]:
    """Where the archived inputs hash differently under this toolkit than in the original's manifest (the
    Matrix, its Environment, each arm's other Environment): its templates or spec hashing changed."""
    from toolkit.render import template_version

    notes = []
    for part, loaded in (("environment", env_spec), ("matrix", spec)):
        was = getattr(m, part).hash
        if was and was != spec_hash(loaded, template_version()):
            notes.append(f"the {part} hash differs from the original's ({was[:12]}): this toolkit's templates "
                         "or spec hashing changed")
    for arm, s in sources.items():
        rec = m.arms.get(arm)
        was = rec.environment.hash if rec is not None and rec.environment is not None else None
        if was and was != s.hash:
            notes.append(f"arm {arm}: the hash of its environment {s.env_spec.model.name} differs from the "
                         f"original's ({was[:12]}): this toolkit's templates or spec hashing changed")
    return notes


def reproduce(ref: str, *, root: Path, image: str | None = None, target: str | None = None,
              allow_drift: bool = False, progress: Any = None, log: Callable[[str], None] = print,
              tolerance: float | None = None) -> Reproduction:
    """Replay run `ref` from its archive, archive the replay under root, and compare the two (`tolerance`:
    the margin X of `reproduced within ±X %`, percent; default toolkit.results.equivalence.DEFAULT_MARGIN_PCT)."""
    from toolkit.bench.matrix import run_matrix
    from toolkit.bench.plan import load_environment, load_workloads
    from toolkit.bench.plan import load_arm_sources
    from toolkit.bench.sources import other_environments

    if target:
        check_target(target)
    original = open_original(ref, root)
    m = original.manifest
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="toolkit-reproduce-") as tmp:
        tree = Path(tmp) / "files"
        matrix_path = (materialize(original, tree) if m.inputs is not None
                       else rebuild_from_manifest(original, tree, notes))
        spec = load_spec(matrix_path, expect="Matrix")
        env_spec = load_environment(spec)
        sources = load_arm_sources(spec, env_spec)  # arms of other Environments: theirs, from inputs/ too
        check_outside(original, {"matrix": spec, "environment": env_spec,
                                 **other_environments(sources, env_spec)}, tree)
        drift = _resolution_drift("matrix", m.matrix.resolved, spec) + \
            _resolution_drift("environment", m.environment.resolved, env_spec)
        if m.inputs is not None:
            notes += _hash_notes(m, spec, env_spec, sources)
        if target:
            spec, asked = _retarget(spec, target)
            drift.append(asked)
        for name, w in load_workloads(spec).items():
            was = m.workloads.get(name)
            if was is not None and was.hash and was.hash != w.hash:
                raise ToolkitError(f"workload {name}: the prompts this toolkit loads (hash {w.hash[:12]}) are not the "
                                   f"ones the run sent (hash {was.hash[:12]}, {was.source})",
                                   file=original.path / "manifest.json",
                                   hint="bundled workloads changed since the run: reproduce it with the toolkit "
                                        f"version that made it ({m.toolkit.version})")
        build = choose_image(original, env_spec, spec, image, drift, notes)
        drift += host_drift(original, spec, env_spec, build)
        refused = [d for d in drift if d.what not in ASKED]
        if refused and not allow_drift:
            raise ToolkitError(f"this is not the setup run {original.run_id} ran on: "
                               + "; ".join(f"{d.what} {_short(d.original)} -> {_short(d.current)}" for d in refused),
                               hint="--allow-drift runs it anyway and records the drift in the new run's manifest")
        log(f"replaying {original.matrix_name}/{original.run_id} from its archive"
            + (f" (drift recorded: {', '.join(d.what for d in drift)})" if drift else ""))
        result = run_matrix(spec, results_root=root, progress=progress, log=log,
                            origin=Origin(original.run_id, drift, build, original.manifest.sweep))
    new = open_archive(result.path)
    return compare_runs(original, new, result.status, drift, notes, tolerance, result.interrupted)


def compare_runs(original: Archive, new: Archive, status: str = "complete", drift: list[DriftRecord] | None = None,
                 notes: list[str] | None = None, tolerance: float | None = None,
                 interrupted: bool = False) -> Reproduction:
    """The verdict of a replay against its original (both archived)."""
    diff = diff_runs(original, new)
    structural = moved_cells(original, new, diff)
    judged = judge(diff, structural, tolerance)
    if judged.verdict == "inconclusive":
        judged.supported_pct = supported_margin(diff, structural, judged.tolerance_pct)
    arms = sorted({c.arm for c in diff.cells})
    # Per arm, at the run's margin: one unstable arm (a bimodal speculative cell) leaves the run inconclusive,
    # but says nothing of the others. Each arm is its own family for the Holm correction.
    per_arm = {}
    for arm in arms if len(arms) > 1 else []:
        own, rows = diff_runs(original, new, arms=[arm]), [r for r in structural if r["cell"].startswith(f"{arm} ")]
        per_arm[arm] = judge(own, rows, judged.tolerance_pct, source=judged.tolerance_source)
        if per_arm[arm].verdict == "inconclusive":
            per_arm[arm].supported_pct = supported_margin(own, rows, judged.tolerance_pct)
    moved = structural + [{"cell": x["cell"], "metric": x["metric"], "why": f"beyond ±{judged.tolerance_pct:g}%",
                           "delta_pct": x["delta_pct"], "low_pct": x["low_pct"], "high_pct": x["high_pct"],
                           "p": x["p"]} for x in judged.differs]
    return Reproduction(original, new, status, diff, moved, list(drift or []), list(notes or []), judged,
                        interrupted, per_arm)


def judge_replay(ref: str, replay: str, *, root: Path, tolerance: float | None = None) -> Reproduction:
    """The verdict of a replay made earlier (`results reproduce RUN --replay RUN2`): nothing is run."""
    original, new = open_original(ref, root), open_original(replay, root)
    if new.manifest.reproduces != original.run_id:
        raise ToolkitError(f"{new.run_id} is not a replay of {original.run_id} (its manifest says reproduces: "
                           f"{new.manifest.reproduces or 'nothing'})",
                           hint=f"compare any two runs with `toolkit results diff {original.run_id} {new.run_id}`")
    return compare_runs(original, new, new.status, tolerance=tolerance, interrupted=new.interrupted)


def _short(v: Any) -> str:
    return "none" if v is None else str(v) if not isinstance(v, dict) else \
        ", ".join(f"{k}={x}" for k, x in v.items())


def moved_cells(original: Archive, new: Archive, diff: DiffResult) -> list[dict]:
    """The cells whose outcome changed, one row per cell and reason: not comparable, missing on a side, or
    another status. (Changes of the figures are toolkit.results.equivalence's to judge.)"""
    out: list[dict] = []
    for c in diff.cells:
        if not c.comparable:
            out.append({"cell": c.label, "why": f"not comparable: {c.reason}"})
    out += [{"cell": label, "why": "not in the reproduction"} for label in diff.only_a]
    out += [{"cell": label, "why": "not in the original"} for label in diff.only_b]
    for key, c in original.cell_map.items():
        n = new.cell_map.get(key)
        if n is not None and n.status != c.status:
            out.append({"cell": f"{c.arm} {c.domain} {c.label} out={c.output_len}"
                                + (f" launch {c.launch}" if c.launch else ""),
                        "why": f"status {c.status} -> {n.status}" + (f" ({n.reason})" if n.reason else "")})
    return out


def _supported(v) -> str:
    """What an inconclusive verdict's data can show: the narrowest margin it would be reproduced within."""
    if v.supported_pct is None:
        return "no margin up to ±100% makes it reproduced"
    return f"the narrowest margin it supports: ±{v.supported_pct:g}% (--tolerance {v.supported_pct:g}: reproduced)"


def reproduce_text(rep: Reproduction) -> str:
    """The diff as `toolkit results diff` prints it, then the verdict and why."""
    from toolkit.results.report import build_diff_report, render_text

    lines = [render_text(build_diff_report(rep.original, rep.new, rep.diff)), ""]
    for d in rep.drift:
        lines.append(f"drift: {d.what} {_short(d.original)} -> {_short(d.current)}")
    lines += [f"note: {n}" for n in rep.notes]
    j = rep.judged
    across = "; across machines, the machine level included" if rep.diff.cross_machine else ""
    lines.append(f"{j.headline} ({rep.original.run_id} -> {rep.new.run_id}; tolerance ±{j.tolerance_pct:g}% from "
                 f"{j.tolerance_source}{across}; exit {j.exit_code})")
    m = rep.diff.machines
    if m is not None and m.cross.status in ("different", "unknown"):
        lines.append(f"  machines: {m.cross.text()}")
    lines += [f"  {why}" for why in rep.diff.calibration_refused]
    lines.append(f"  ±{j.tolerance_pct:g}% on the log scale, as every test: a ratio B/A within "
                 f"{1 / (1 + j.tolerance_pct / 100):.3f}..{1 + j.tolerance_pct / 100:.3f}")
    for mv in rep.moved:
        if "metric" in mv:
            ci = f" [{mv['low_pct']:+.1f}%, {mv['high_pct']:+.1f}%]" if mv.get("low_pct") is not None else ""
            p = f" (p={mv['p']:.3g})" if mv.get("p") is not None else ""
            lines.append(f"  {mv['cell']}: {mv['metric']} {mv['delta_pct']:+.2f}%{ci}{p} {mv['why']}")
        else:
            lines.append(f"  {mv['cell']}: {mv['why']}")
    for name, x in j.metrics.items():
        lines.append(f"  {name}: geomean over {x['cells']} cells {x['delta_pct']:+.1f}% [{x['low_pct']:+.1f}%, "
                     f"{x['high_pct']:+.1f}%]: " + (f"within ±{j.tolerance_pct:g}%" if x["within"]
                                                    else f"not shown within ±{j.tolerance_pct:g}%")
                     + f" (TOST p={x['tost_p']:.3g})")
    lines += [f"  {name}: not tested: {why}" for name, why in j.left_out.items()]
    if j.verdict == "inconclusive":  # the rest of why (the metric lines above already say theirs)
        lines += [f"  {r}" for r in j.reasons[1:] if not any(r.startswith(f"{n}: the geometric") for n in j.metrics)]
        lines.append(f"  {_supported(j)}")
    if rep.arms:
        lines.append(f"per arm (each arm's cells alone, at ±{j.tolerance_pct:g}%):")
        lines += [f"  {arm}: {v.headline}" + (f"; {_supported(v)}" if v.verdict == "inconclusive" else "")
                  for arm, v in rep.arms.items()]
    return "\n".join(lines)


__all__ = ["Reproduction", "reproduce", "judge_replay", "extract", "open_original", "moved_cells", "reproduce_text", "compare_runs"]
