"""Write the tuned preset back into the Environment: a round-trip YAML edit (ruamel.yaml) of the original
file, so its comments, key order, anchors and quoting stay as they were; each tuned value carries a comment
naming the tune run that chose it.

    write_tuned(env_spec, Path("OUT.yaml"), arm="ngram", engine="transformers",
                params={"prompt_lookup_num_tokens": 4}, note="toolkit bench tune quickstart-tune/<id> t03 ...")

Server knobs go to `servers.<arm>`, request knobs of the embedded engine to
`request_params.<arm>.generation_config`. Only the tuned preset changes: a mapping the arm shares with other
presets through a YAML alias is copied first, and a preset that merges the arm (`<<: *eagle3`) keeps what it
resolved to before: each value it inherited and the tune changed is written into it as it was, with a comment
(issue 42: the H200 tune moved the untested `eagle3-threshold` that way). The document is resolved before and
after (merge keys and anchors followed); any other difference is a bug and nothing is written. The file is
written atomically, and only after it validates as an Environment.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

from toolkit import engines
from toolkit.engines import engine_facts, sglang, transformers
from toolkit.errors import ToolkitError
from toolkit.fsutil import write_atomic
from toolkit.specs import LoadedSpec, load_spec

THRESHOLD_FLAG = sglang.THRESHOLD


def _yaml(text: str):
    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

    _, seq, offset = load_yaml_guess_indent(text)
    mapping = min((len(x) for x in re.findall(r"(?m)^( +)[^\s#-][^:\n]*:", text)), default=2)
    y = YAML()
    y.preserve_quotes = True
    y.width = 4096  # never fold a long line the author wrote on one
    y.indent(mapping=mapping, sequence=seq or mapping, offset=offset or 0)
    return y


def _own_map(parent, key: str, siblings: list):
    """parent[key] as a mapping of its own (created when absent; when an alias shares it, the preset that holds
    the anchor keeps it and the others get copies, so that no other preset follows the edit)."""
    from ruamel.yaml.comments import CommentedMap

    node = parent.get(key)
    if node is None:
        node = CommentedMap()
        parent[key] = node
    elif any(s is node for s in siblings):
        first = next(k for k in parent if parent[k] is node)
        if first == key:  # the arm defines the anchor (`eagle3: &eagle3`): the presets aliasing it get copies
            for k in list(parent):
                if k != key and parent[k] is node:
                    parent[k] = _copy_map(node)
        else:
            node = _copy_map(node)
            parent[key] = node
    return node


def _copy_map(node):
    """A copy of a mapping without its anchor: its own keys deep-copied in order, its merge keys (`<<: *x`)
    kept as merges of the same anchors."""
    import copy

    from ruamel.yaml.comments import CommentedMap, merge_attrib

    new = CommentedMap()
    merged = getattr(node, merge_attrib, None)
    if merged:
        mv = copy.copy(merged)  # ruamel's MergeValue: the same anchored maps, as one `<<:` or a sequence of them
        mv.value = list(merged.value)
        new.add_yaml_merge(mv)
    for k, v in node.non_merged_items():
        new[k] = copy.deepcopy(v)
    if node.fa.flow_style():
        new.fa.set_flow_style()
    return new


def _rebase(data, src_dir: Path, out_dir: Path) -> None:
    """Relative paths in the file are relative to it: keep them pointing at the same files from out_dir."""
    if src_dir.resolve() == out_dir.resolve():
        return

    def fix(holder, key) -> None:
        v = holder.get(key) if hasattr(holder, "get") else None
        if isinstance(v, str) and v and not v.startswith("toolkit:") and not os.path.isabs(os.path.expanduser(v)):
            target = (src_dir / v).resolve()
            near = os.path.commonpath([target, out_dir.resolve()]) != os.sep
            holder[key] = os.path.relpath(target, out_dir.resolve()) if near else str(target)

    fix(data, "extends")
    for section, key in (("ca_bundle", "path"), ("model", "path")):
        if isinstance(data.get(section), dict):
            fix(data[section], key)
    for p in ((data.get("sglang") or {}).get("patches") or []):
        if isinstance(p, dict):
            fix(p, "path")


def write_tuned(env_spec: LoadedSpec, out: Path, *, arm: str, engine: str, params: dict[str, Any], note: str,
                threshold: int | None = None, threshold_note: str = "") -> Path:
    """Write env_spec's file with the tuned values of `arm` to `out`; returns out."""
    src = env_spec.path
    out = Path(out)
    if out.resolve() == src.resolve():
        raise ToolkitError(f"--out {out} is the environment the tune read", hint="write the tuned environment to "
                           "another file, check it (`toolkit validate`, `toolkit results diff`), then replace")
    text = src.read_text(encoding="utf-8")
    y = _yaml(text)
    data = y.load(text)
    if engine_facts(engine).level == "request":  # request parameters: the arm's generation_config
        rp = data.get("request_params")
        if rp is None:
            from ruamel.yaml.comments import CommentedMap

            data["request_params"] = rp = CommentedMap()
        target = _own_map(rp, arm, [v for k, v in rp.items() if k != arm])
        gen = _own_map(target, transformers.GENERATION_CONFIG, [])
    else:
        servers = data["servers"]
        gen = _own_map(servers, arm, [v for k, v in servers.items() if k != arm])
    if gen.fa.flow_style():
        gen.fa.set_block_style()  # a comment per value needs one value per line
    for knob, value in params.items():
        gen[knob] = value
        gen.yaml_add_eol_comment(f"tuned: {note}", knob)
    servers = data.get("servers")
    if threshold_note and isinstance(servers, dict) and arm in servers:
        if threshold is not None and THRESHOLD_FLAG in engines.get(engine).knobs and _has_threshold_patch(env_spec):
            own = _own_map(servers, arm, [v for k, v in servers.items() if k != arm])
            own[THRESHOLD_FLAG] = threshold
            own.yaml_add_eol_comment(f"tuned: {threshold_note}", THRESHOLD_FLAG)
        else:
            servers.yaml_set_comment_before_after_key(arm, before=f"tuned: {threshold_note}",
                                                      indent=_indent_of(text, "servers"))
    _keep_others(y, data, text, arm)
    _rebase(data, src.parent, out.parent)
    buf = io.StringIO()
    y.dump(data, buf)
    return _write_checked(out, buf.getvalue())


SECTIONS = ("servers", "request_params")


def _resolved(y, data) -> dict:  # json-edge: the YAML document
    """The document as a plain YAML reader sees it (anchors, aliases and merge keys resolved)."""
    import yaml

    buf = io.StringIO()
    y.dump(data, buf)
    return yaml.safe_load(buf.getvalue()) or {}


def _others(doc: dict, arm: str) -> dict:  # json-edge: the YAML document
    """The document without the tuned preset (what must not move)."""
    out = dict(doc)
    for sec in SECTIONS:
        if isinstance(out.get(sec), dict):
            out[sec] = {k: v for k, v in out[sec].items() if k != arm}
    return out


def moved(before: dict, after: dict, arm: str) -> list[str]:
    """Where the resolved documents differ outside the tuned preset: `section.preset` or a top-level key."""
    a, b = _others(before, arm), _others(after, arm)
    out = []
    for key in sorted(set(a) | set(b), key=str):
        if key in SECTIONS and isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out += [f"{key}.{p}" for p in sorted(set(a[key]) | set(b[key]), key=str) if a[key].get(p) != b[key].get(p)]
        elif a.get(key) != b.get(key):
            out.append(str(key))
    return out


def _keep_others(y, data, text: str, arm: str) -> None:
    """Every preset but `arm` resolves as it did before the edit: a value a preset inherited through a merge
    key (or shared through an alias) and the edit changed is pinned in it at its old value."""
    import copy

    import yaml

    before = yaml.safe_load(text) or {}
    for where in moved(before, _resolved(y, data), arm):
        sec, _, preset = where.partition(".")
        node = data.get(sec, {}).get(preset) if preset else None
        old = (before.get(sec) or {}).get(preset) if preset else None
        if not isinstance(old, dict) or not hasattr(node, "yaml_add_eol_comment"):
            continue
        now = _resolved(y, data)[sec][preset]
        for k, v in old.items():
            if now.get(k) != v:
                node[k] = copy.deepcopy(v)
                node.yaml_add_eol_comment(f"kept: as {preset} resolved before the tune of {arm}", k)
    left = moved(before, _resolved(y, data), arm)
    if left:
        raise ToolkitError(f"the tuned environment would change {', '.join(left)} beside {arm}, so it was not "
                           "written", hint="a bug in the tuner's edit: report it with the spec", exit_code=1)


def _indent_of(text: str, section: str) -> int:
    """Column of the keys under a top-level section (for a comment line placed among them)."""
    m = re.search(rf"(?m)^{re.escape(section)}:\s*\n(?:\s*#.*\n)*( +)\S", text)
    return len(m.group(1)) if m else 2


def _has_threshold_patch(env_spec: LoadedSpec) -> bool:
    sg = env_spec.model.sglang
    for i, p in enumerate(sg.patches if sg else []):
        f = env_spec.path_of(("sglang", "patches", i, "path"), p.path, must_exist=False)
        if f.is_file() and THRESHOLD_FLAG in f.read_text(encoding="utf-8", errors="replace"):
            return True
    return False


def _write_checked(out: Path, text: str) -> Path:
    """Validate a temporary copy beside `out` (so relative paths resolve the same), then rename it over out."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tune-check.yaml")
    try:
        write_atomic(tmp, text)
        try:
            load_spec(tmp, expect="Environment")
        except ToolkitError as exc:
            raise ToolkitError(f"the tuned environment would not validate, so {out} was not written: {exc.message}"
                               f" (line {exc.line})", hint="a bug in the tuner's edit: report it with the spec",
                               exit_code=1) from None
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out
