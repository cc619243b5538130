"""SGLang's server flags, read statically from its source (no import, standard library only).

Two sources, both walked with `ast`:
- annotated fields (`name: A[type, "help" | Arg(...)]`) turned into flags exactly as
  arg_groups/arg_utils.add_cli_args_from_dataclass does: the namespace classes of
  sglang/srt/arg_groups/fields/*.py (0.5.23) or the ServerArgs dataclass in server_args.py (0.5.19);
- explicit `parser.add_argument("--x", ...)` calls in sglang/srt/server_args.py (every flag in older
  versions such as 0.5.9; the dynamic and deprecated ones later).

Each flag becomes a dict: {names, takes_value, nargs, type, choices, kind, deprecated, help}.
`choices` is None when the source computes them at run time. This file has no toolkit imports:
the smoke check runs it inside a built image against the installed package.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

SIMPLE_TYPES = {"int": "int", "float": "float", "str": "str"}


def _const_list(node, names: dict) -> list | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = []
        for e in node.elts:
            if isinstance(e, ast.Constant):
                vals.append(e.value)
            else:
                return None
        return vals
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _const_list(node.left, names), _const_list(node.right, names)
        return a + b if a is not None and b is not None else None
    return None


def _module_lists(tree: ast.Module, names: dict) -> None:
    """Module-level NAME = [literal, ...] assignments (choice lists)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            vals = _const_list(node.value, names)
            if vals is not None:
                names[node.targets[0].id] = vals


def _text(node) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return ""


def _name(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _unwrap_optional(t):
    if isinstance(t, ast.Subscript) and _name(t.value) == "Optional":
        return t.slice
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.BitOr):
        parts = [p for p in (t.left, t.right) if not (isinstance(p, ast.Constant) and p.value is None)]
        if len(parts) == 1:
            return parts[0]
    if isinstance(t, ast.Subscript) and _name(t.value) == "Union" and isinstance(t.slice, ast.Tuple):
        parts = [p for p in t.slice.elts if not (isinstance(p, ast.Constant) and p.value is None)]
        if len(parts) == 1:
            return parts[0]
    return t


# json-edge: a flag table row, the exact parser's JSON shape
def _flag(names, takes_value, nargs=None, typ=None, choices=None, kind="store", help_text="") -> dict:
    return {"names": names, "takes_value": takes_value, "nargs": nargs, "type": typ,
            "choices": [str(c) for c in choices] if choices is not None else None, "kind": kind,
            "deprecated": "deprecated" in help_text.lower()[:60], "help": " ".join(help_text.split())[:240]}


# json-edge: a flag table row, the exact parser's JSON shape
def _field_flag(field: str, ann: ast.Subscript, has_default: bool, names: dict) -> dict | None:
    elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    raw, meta = elts[0], None
    for m in elts[1:]:
        if isinstance(m, ast.Call) and _name(m.func) == "Arg":
            meta = {k.arg: k.value for k in m.keywords}
            break
        if isinstance(m, (ast.Constant, ast.JoinedStr, ast.BinOp)) and _text(m):
            meta = {"help": m}
            break
    if meta is None:
        return None
    if isinstance(meta.get("no_cli"), ast.Constant) and meta["no_cli"].value is True:
        return None
    cli = _text(meta["cli_name"]) if "cli_name" in meta else "--" + field.replace("_", "-")
    aliases = _const_list(meta["aliases"], names) or [] if "aliases" in meta else []
    flag_names = [cli] + [str(a) for a in aliases]
    help_text = _text(meta.get("help")) if meta.get("help") is not None else ""
    choices = _const_list(meta["choices"], names) if "choices" in meta else None
    nargs = meta["nargs"].value if isinstance(meta.get("nargs"), ast.Constant) else None
    if "action" in meta:
        action = _name(meta["action"])
        if action == "BooleanOptionalAction":
            return _flag(flag_names + ["--no-" + cli[2:]], False, 0, None, None, "boolean_optional", help_text)
        akw = {}
        if isinstance(meta.get("action_kwargs"), ast.Dict):
            akw = {k.value: v for k, v in zip(meta["action_kwargs"].keys, meta["action_kwargs"].values)
                   if isinstance(k, ast.Constant)}
        if isinstance(akw.get("nargs"), ast.Constant):
            nargs = akw["nargs"].value
        typ = SIMPLE_TYPES.get(_name(akw["type"]), "custom") if "type" in akw else "str"
        return _flag(flag_names, nargs != 0, nargs, typ, choices, f"custom:{action}", help_text)
    custom_type = "type_parser" in meta
    inner = _unwrap_optional(raw)
    if isinstance(inner, ast.Subscript) and _name(inner.value) == "Literal":
        lits = _const_list(inner.slice if isinstance(inner.slice, ast.Tuple) else ast.Tuple(elts=[inner.slice]), names)
        first = type(lits[0]).__name__ if lits else "str"
        return _flag(flag_names, True, nargs, "custom" if custom_type else SIMPLE_TYPES.get(first, "str"),
                     choices if choices is not None else lits, "store", help_text)
    if isinstance(inner, ast.Subscript) and _name(inner.value) in ("List", "list") and not custom_type:
        elem = _name(inner.slice)
        return _flag(flag_names, True, nargs or "+", SIMPLE_TYPES.get(elem, "str"), choices, "store", help_text)
    if _name(inner) == "bool":
        return _flag(flag_names, False, 0, None, None, "store_true", help_text)
    typ = "custom" if custom_type else SIMPLE_TYPES.get(_name(inner), "str")
    return _flag(flag_names, True, nargs, typ, choices, "store", help_text)


def _fields_flags(tree: ast.Module, names: dict) -> list[dict]:
    """Annotated fields of namespace classes (0.5.23: `_NS_PATH`) or of the ServerArgs dataclass (0.5.19)."""
    out = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if cls.name != "ServerArgs" and not any(
                isinstance(s, ast.Assign) and any(_name(t) == "_NS_PATH" for t in s.targets) for s in cls.body):
            continue
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and isinstance(stmt.annotation, ast.Subscript) and _name(stmt.annotation.value) in ("A", "Annotated"):
                flag = _field_flag(stmt.target.id, stmt.annotation, stmt.value is not None, names)
                if flag:
                    out.append(flag)
    return out


def _add_argument_flags(tree: ast.Module, names: dict) -> list[dict]:
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) == "add_argument"):
            continue
        opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                and a.value.startswith("-")]
        if not opts:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        help_text = _text(kw["help"]) if "help" in kw else ""
        action = kw.get("action")
        action_name = action.value if isinstance(action, ast.Constant) else _name(action) if action is not None else ""
        nargs = kw["nargs"].value if isinstance(kw.get("nargs"), ast.Constant) else None
        choices = _const_list(kw["choices"], names) if "choices" in kw else None
        # a Deprecated* action is on/off unless it takes a value (DeprecatedAliasStoreAction: type=int)
        if action_name in ("store_true", "store_false", "store_const", "count", "DeprecatedStoreTrueAction",
                           "DeprecatedAction") or (action_name.startswith("Deprecated") and "nargs" not in kw
                                                   and "type" not in kw and "choices" not in kw
                                                   and "Alias" not in action_name):
            out.append(_flag(opts, False, 0, None, None, action_name, help_text or action_name))
        elif action_name == "BooleanOptionalAction":
            out.append(_flag(opts + ["--no-" + opts[0][2:]], False, 0, None, None, "boolean_optional", help_text))
        else:
            typ = SIMPLE_TYPES.get(_name(kw["type"]), "custom") if "type" in kw else "str"
            if action_name.startswith("Deprecated"):
                help_text = help_text or "Deprecated."
            out.append(_flag(opts, nargs != 0, nargs, typ, choices, action_name or "store", help_text))
    return out


def static_flags(package_dir: str | Path) -> list[dict]:
    """All server flags of the SGLang package at `package_dir` (the `sglang/` folder)."""
    pkg = Path(package_dir)
    srt = pkg / "srt"
    names: dict = {}
    for mod in (srt / "arg_groups" / "choices.py", srt / "server_args.py"):
        if mod.is_file():
            _module_lists(ast.parse(mod.read_text(encoding="utf-8"), str(mod)), names)
    flags: list[dict] = []
    fields_dir = srt / "arg_groups" / "fields"
    if fields_dir.is_dir():
        for f in sorted(fields_dir.glob("*.py")):
            local = dict(names)
            tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
            _module_lists(tree, local)
            flags += _fields_flags(tree, local)
    server_args = srt / "server_args.py"
    if server_args.is_file():
        tree = ast.parse(server_args.read_text(encoding="utf-8"), str(server_args))
        flags += _fields_flags(tree, names) + _add_argument_flags(tree, names)
    return flags


if __name__ == "__main__":  # python flags_static.py SGLANG_PACKAGE_DIR -> JSON on stdout
    json.dump(static_flags(sys.argv[1]), sys.stdout)
