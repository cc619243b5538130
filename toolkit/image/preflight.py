"""Preflight: everything that can be checked before the Docker engine is touched.

1. patch sha256s match the spec;  2. the pinned SGLang source is fetched (cached);  3. the patches
apply in order to a scratch copy (git or package layout), exactly: a hunk that needs fuzz is an error unless
the spec allows that much for the patch (`fuzz: N`);  4. every touched Python file compiles;
5. every server preset's arguments are valid flags of that SGLang + patches, with valid values.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from toolkit import engines
from toolkit.image.flags import check_presets, flag_table, preset_argv
from toolkit.image.source import apply_patch_checked, compile_touched, fetch_sglang, scratch_tree
from toolkit.errors import SpecError
from toolkit.patches import read_patch
from toolkit.specs import LoadedSpec, check_patch_hashes, referenced_files
from toolkit.specs.environment import Environment


@dataclass
class PreflightReport:
    sglang_version: str
    source: str                      # wheel | git
    source_path: str                 # pristine tree used
    patches: list[dict] = field(default_factory=list)   # path, sha256, layout, strip, files
    flag_mode: str = ""              # exact | static
    flag_mode_reason: str = ""
    flag_count: int = 0
    presets: dict[str, list[str]] = field(default_factory=dict)  # preset -> argv
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:  # json-edge: build record / --json
        return asdict(self)


def preflight(spec: LoadedSpec, flag_mode: str = "auto", keep_scratch: bool = False, log=print) -> PreflightReport:
    env = spec.model
    if not isinstance(env, Environment) or not engines.get(env.engine).builds_image or env.sglang is None:
        raise SpecError(f"not an sglang Environment (engine: {getattr(env, 'engine', '?')}): nothing to build",
                        file=spec.path,
                        hint="`toolkit build env` takes a spec with `engine: sglang` and an `sglang:` section")
    t0 = time.monotonic()
    sg = env.sglang
    hashes = check_patch_hashes(spec)
    files = referenced_files(spec)
    infos = []
    for i, p in enumerate(sg.patches):
        path = files[f"sglang.patches[{i}]"]
        infos.append((path, read_patch(path), hashes[p.path], p.fuzz))
    pristine = fetch_sglang(sg, env.python, log=log)
    report = PreflightReport(sglang_version=sg.version, source=sg.source, source_path=str(pristine))
    touched: dict[str, tuple[Path, object]] = {}
    for path, info, sha, _ in infos:
        for rel in info.files:
            touched[rel] = (path, info)
    root = scratch_tree(pristine, set(touched))
    try:
        for path, info, sha, fuzz in infos:
            outcome = apply_patch_checked(root, path, info, sg.version, fuzz=fuzz)
            report.warnings += outcome.warnings
            # fuzz: what the spec allows for this patch (0: exact context only); hunks: offsets and fuzz used
            report.patches.append({"path": str(path), "name": path.name, "sha256": sha, "layout": info.layout,
                                   "strip": info.strip, "files": list(info.files), "fuzz": fuzz,
                                   "hunks": outcome.hunks})
        compile_touched(root, touched)
        raw_argv = {name: preset_argv(args) for name, args in env.servers.items()}
        table = flag_table(root, raw_argv, flag_mode)
        report.flag_mode, report.flag_mode_reason, report.flag_count = table.mode, table.reason, len(table.by_name)
        report.warnings += check_presets(spec, table, sg.version)
        report.presets = {name: preset_argv(args, table) for name, args in env.servers.items()}
    finally:
        if not keep_scratch:
            shutil.rmtree(root, ignore_errors=True)
    report.seconds = round(time.monotonic() - t0, 3)
    return report
