"""What else changed between two runs: spec fields, pinned versions, patches (by sha256), server
arguments per arm, image, host (driver, CUDA, GPU), toolkit version, workloads.

Both manifests are flattened into `section / field -> value` and compared key by key.
"""

from __future__ import annotations

import json
import shlex
from pathlib import PurePosixPath
from typing import Any

VOLATILE = {"run_id", "started_at", "finished_at", "format", "schema_version", "matrix_name"}


def _scalar(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


def _flatten(obj: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif (isinstance(obj, list) and obj and all(isinstance(x, dict) and "name" in x for x in obj)
          and len({str(x["name"]) for x in obj}) == len(obj)):
        for x in obj:
            rest = {k: v for k, v in x.items() if k != "name"}
            _flatten(rest if len(rest) != 1 else next(iter(rest.values())), f"{prefix}[{x['name']}]", out)
    elif isinstance(obj, list) and len(obj) > 1 and all(isinstance(x, dict) and x == obj[0] for x in obj):
        _flatten(obj[0], f"{prefix}[{len(obj)}x]", out)  # e.g. 8 identical GPUs
    elif isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        for i, x in enumerate(obj):
            _flatten(x, f"{prefix}[{i}]", out)
    else:
        out[prefix] = _scalar(obj)


def parse_argv(command: Any) -> dict[str, str]:
    """`--flag value`, `--flag=value` and bare `--flag` into {flag: value}; leading words into `argv`."""
    argv = shlex.split(command) if isinstance(command, str) else [str(x) for x in (command or [])]
    out: dict[str, str] = {}
    words, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            flag, eq, val = tok.partition("=")
            if not eq:
                if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                    val, i = argv[i + 1], i + 1
                else:
                    val = "true"
            out[flag] = f"{out[flag]} {val}" if flag in out else val
        elif not out:
            words.append(tok)
        else:
            out[f"{list(out)[-1]}"] += f" {tok}"  # a flag taking several values
        i += 1
    if words:
        out["argv"] = " ".join(words)
    return out


def _patches(env_spec: dict) -> dict[str, str]:
    patches = ((env_spec.get("sglang") or {}).get("patches")) or []
    return {PurePosixPath(p.get("path", "?")).name: p.get("sha256", "?") for p in patches if isinstance(p, dict)}


def _versions(m: dict) -> dict[str, str]:
    spec = (m.get("environment") or {}).get("spec") or {}
    out = {p["name"]: str(p.get("version")) for p in spec.get("packages") or [] if isinstance(p, dict) and "name" in p}
    if isinstance(spec.get("sglang"), dict) and spec["sglang"].get("version"):
        out["sglang"] = str(spec["sglang"]["version"])
    if spec.get("flashinfer"):
        out["flashinfer-python"] = str(spec["flashinfer"])
    for k, v in (m.get("engine_versions") or {}).items():
        out[f"engine:{k}"] = _scalar(v)
    return out


def sections(m: dict) -> dict[str, dict[str, str]]:
    env = m.get("environment") or {}
    spec = dict(env.get("spec") or {})
    sg = dict(spec.get("sglang") or {})
    sg.pop("patches", None)
    spec.pop("packages", None)
    if sg:
        spec["sglang"] = sg
    out: dict[str, dict[str, str]] = {}
    flat: dict[str, str] = {}
    _flatten(spec, "environment", flat)
    _flatten((m.get("matrix") or {}).get("spec") or {}, "matrix", flat)
    for k in ("hash",):
        if env.get(k):
            flat[f"environment.{k}"] = env[k]
        if (m.get("matrix") or {}).get(k):
            flat[f"matrix.{k}"] = m["matrix"][k]
    out["spec"] = flat
    out["pinned versions"] = _versions(m)
    out["patches (sha256)"] = _patches(env.get("spec") or {})
    args: dict[str, str] = {}
    for arm, info in (m.get("arms") or {}).items():
        info = info or {}
        for flag, val in parse_argv(info.get("command")).items():
            args[f"{arm} {flag}"] = val
        for flag, val in (info.get("server_args") or {}).items():
            if not info.get("command"):
                args[f"{arm} --{str(flag).lstrip('-')}"] = _scalar(val)
    out["server args"] = args
    for name in ("image", "host", "hosts", "toolkit", "workloads", "source"):
        flat = {}
        if m.get(name) is not None:
            _flatten(m[name], "", flat)
        out[name] = flat
    rest = {k: v for k, v in m.items() if k not in VOLATILE and k not in
            {"environment", "matrix", "arms", "engine_versions", "image", "host", "hosts", "toolkit", "workloads",
             "source"}}
    flat = {}
    _flatten(rest, "", flat)
    out["other"] = flat
    return out


def env_diff(ma: dict, mb: dict) -> list[dict]:
    """Rows {section, field, a, b}; a or b is None where the field is absent on that side."""
    sa, sb = sections(ma), sections(mb)
    rows = []
    for sec in sa:
        fa, fb = sa[sec], sb.get(sec, {})
        for key in sorted(set(fa) | set(fb)):
            va, vb = fa.get(key), fb.get(key)
            if va != vb:
                rows.append({"section": sec, "field": key, "a": va, "b": vb})
    return rows
