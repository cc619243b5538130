"""What else changed between two runs: spec fields, pinned versions, patches (by sha256), server
arguments per arm, image, host (driver, CUDA, GPU), toolkit version, workloads.

Both manifests are flattened into `section / field -> value` and compared key by key.
"""

from __future__ import annotations

import json
import shlex
from pathlib import PurePosixPath
from typing import Any

from toolkit.results.facts import normalized
from toolkit.schema.manifest import Manifest


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


def parse_argv(command: Any) -> dict[str, str]:  # data-keyed: flag
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


def _patches(env_spec: dict) -> dict[str, str]:  # data-keyed: patch name
    patches = ((env_spec.get("sglang") or {}).get("patches")) or []
    return {PurePosixPath(p.get("path", "?")).name: p.get("sha256", "?") for p in patches if isinstance(p, dict)}


def _versions(n: dict) -> dict[str, str]:  # data-keyed: package name
    spec = n["environment"]["spec"]
    out = {p["name"]: str(p.get("version")) for p in spec.get("packages") or [] if isinstance(p, dict) and "name" in p}
    if isinstance(spec.get("sglang"), dict) and spec["sglang"].get("version"):
        out["sglang"] = str(spec["sglang"]["version"])
    if spec.get("flashinfer"):
        out["flashinfer-python"] = str(spec["flashinfer"])
    for k, v in n["engine_versions"].items():
        out[f"installed {k}"] = _scalar(v)
    return out


def _flat(obj: Any, prefix: str = "") -> dict[str, str]:  # data-keyed: key path
    out: dict[str, str] = {}
    _flatten(obj, prefix, out)
    return {k: v for k, v in out.items() if v not in ("null", "{}", "[]")}


def sections(m: Manifest) -> dict[str, dict[str, str]]:  # data-keyed: section title
    n = normalized(m)
    env = n["environment"]
    spec = dict(env["spec"])
    sg = dict(spec.get("sglang") or {})
    sg.pop("patches", None)
    spec.pop("packages", None)
    spec.pop("servers", None)  # shown per arm under server args
    if sg:
        spec["sglang"] = sg
    flat = _flat(spec, "environment") | _flat(n["matrix"]["spec"], "matrix")
    for part in ("environment", "matrix"):
        if n[part]["hash"]:
            flat[f"{part}.hash"] = n[part]["hash"]
    args: dict[str, str] = {}
    several = any("environment" in info for info in n["arms"].values())  # arms from several Environments
    for arm, info in n["arms"].items():
        if several:  # each arm's Environment and engine (an arm of the run's own: the run's)
            e = info.get("environment") or {"name": env["name"], "hash": env["hash"], "engine": spec.get("engine")}
            args[f"{arm} environment"] = f"{e['name']} ({(e['hash'] or '-')[:12]})"
            args[f"{arm} engine"] = str(e["engine"])
        if info["command"]:
            # the port is the launcher's pick of a free one at each start: never a difference in what ran
            args.update({f"{arm} {flag}": val for flag, val in parse_argv(info["command"]).items() if flag != "--port"})
        else:
            args.update({f"{arm} --{str(flag).lstrip('-')}": _scalar(v) for flag, v in info["server_args"].items()})
        args.update({f"{arm} request {k}": v for k, v in _flat(info["request_params"]).items()})
    return {"spec": flat, "pinned versions": _versions(n), "patches (sha256)": _patches(env["spec"]),
            "server args": args, "image": _flat(n["image"]), "host": _flat(n["host"]), "hosts": _flat(n["hosts"]),
            "toolkit": _flat(n["toolkit"]), "workloads": _flat(n["workloads"]), "source": _flat(n["source"])}


def env_diff(ma: Manifest, mb: Manifest) -> list[dict]:
    """Rows {section, field, a, b}; a or b is None where the field is absent on that side. A spec field present
    on one side only, where both sides' hashes of that spec agree, is no difference: a field added to the
    schema since the older archive was written, at the default the hash omits (`Hash.omit_default`)."""
    sa, sb = sections(ma), sections(mb)
    same = {part for part in ("environment", "matrix")
            if sa["spec"].get(f"{part}.hash") and sa["spec"].get(f"{part}.hash") == sb["spec"].get(f"{part}.hash")}
    rows = []
    for sec in sa:
        fa, fb = sa[sec], sb.get(sec, {})
        for key in sorted(set(fa) | set(fb)):
            va, vb = fa.get(key), fb.get(key)
            if va == vb or (sec == "spec" and (va is None or vb is None) and key.split(".", 1)[0] in same):
                continue
            rows.append({"section": sec, "field": key, "a": va, "b": vb})
    return rows


def arm_env_diff(m: Manifest) -> list[dict]:
    """Within one run whose arms come from several Environments: each other Environment against the run's own,
    field by field (their specs as the run read them, server presets left to the arms' commands). Rows
    {environment, arms, field, own, theirs} (own or theirs None where the field is absent on that side); an
    Environment recorded without its spec (a run written before it was) gives one row whose field is `spec`
    and whose values say so. [] where every arm is a preset of the run's own Environment."""
    own_spec = dict((m.environment.resolved if m.environment else None) or {})
    own_hash = m.environment.hash if m.environment else None
    others: dict[str, dict] = {}  # data-keyed: environment hash (or name)
    for arm, info in m.arms.items():
        e = info.environment
        if e is None or (e.hash and e.hash == own_hash):
            continue
        got = others.setdefault(e.hash or e.name or arm, {"name": e.name, "arms": [], "spec": e.resolved})
        got["arms"].append(arm)
    own = _flat({k: v for k, v in own_spec.items() if k != "servers"})
    rows = []
    for o in others.values():
        if o["spec"] is None:
            rows.append({"environment": o["name"], "arms": o["arms"], "field": "spec", "own": None,
                         "theirs": "not recorded (a run written before arms' Environments were): its hash and "
                                   "engine are in the facts; `results reproduce` reads its file from inputs/"})
            continue
        theirs = _flat({k: v for k, v in o["spec"].items() if k != "servers"})
        for key in sorted(set(own) | set(theirs)):
            if own.get(key) != theirs.get(key):
                rows.append({"environment": o["name"], "arms": o["arms"], "field": key, "own": own.get(key),
                             "theirs": theirs.get(key)})
    return rows
