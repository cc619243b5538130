"""Write the tuned preset back into the Environment: a round-trip YAML edit (ruamel.yaml) of the original
file, so its comments, key order, anchors and quoting stay as they were; each tuned value carries a comment
naming the tune run that chose it.

    write_tuned(env_spec, Path("OUT.yaml"), arm="ngram", engine="transformers",
                params={"prompt_lookup_num_tokens": 4}, note="toolkit bench tune quickstart-tune/<id> t03 ...")

Server knobs go to `servers.<arm>`, request knobs of the embedded engine to
`request_params.<arm>.generation_config`. A mapping the arm shares with other presets through a YAML alias
is copied first, so only the tuned arm changes (a preset that merges the arm with `<<:` inherits the new
values, as YAML says). The file is written atomically, and only after it validates as an Environment.
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
    """parent[key] as a mapping of its own (created when absent, copied when an alias shares it)."""
    from ruamel.yaml.comments import CommentedMap

    node = parent.get(key)
    if node is None:
        node = CommentedMap()
        parent[key] = node
    elif any(s is node for s in siblings):
        import copy

        node = copy.deepcopy(node)  # nested mappings too: they are shared through the alias as well
        node.anchor.value, node.anchor.always_dump = None, False
        parent[key] = node
    return node


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
    _rebase(data, src.parent, out.parent)
    buf = io.StringIO()
    y.dump(data, buf)
    return _write_checked(out, buf.getvalue())


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
