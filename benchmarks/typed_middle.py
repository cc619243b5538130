"""Issue 44 item 3, measured: functions over 60 lines in toolkit/bench/, functions that return a plain dict in
toolkit/ (annotated `-> dict...`, or observed: a `return` of a dict display, a dict comprehension or `dict(...)`),
and the Ledger's fields that are dicts.

A plain dict is the right type in two cases, each said by a marker comment on the function's signature lines
(or on the comment line just above its `def` or decorators), so a reviewer checks the claim where it is made:

    # data-keyed   its keys are data (arm, metric, cell, file, flag or variable names; launches; groups), not
                   a record's fixed field names
    # json-edge    it builds (or reads) a JSON or YAML document at the edge: a --json output, a file's payload,
                   a request body, what another process wrote; the dict is the format, not a record in the middle

The marked ones are counted apart; the unmarked ones are what is left to type (or to mark, where the marker
is true). A marker on a function that is not counted is listed as stale.

    python benchmarks/typed_middle.py            # the counts
    python benchmarks/typed_middle.py --list     # and every function counted
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "toolkit"
LONG = 60
MARKERS = ("data-keyed", "json-edge")
MARK = re.compile(r"#\s*(" + "|".join(MARKERS) + r")\b")


def functions(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def annotated_dict(fn: ast.AST) -> bool:
    r = fn.returns
    if r is None:
        return False
    text = ast.unparse(r).replace(" ", "")
    return any(text.startswith(p) for p in ("dict", "Dict", "'dict", '"dict')) or text.startswith("dict|")


def annotated_dict_rows(fn: ast.AST) -> bool:
    """Annotated `-> list[dict...]`: rows that are plain dicts."""
    return fn.returns is not None and ast.unparse(fn.returns).replace(" ", "").startswith("list[dict")


def observed_dict(fn: ast.AST) -> bool:
    """A return of a dict display, a dict comprehension or dict(...) in the function's own body (not a nested one)."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            v = node.value
            if isinstance(v, (ast.Dict, ast.DictComp)) or (
                    isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict"):
                return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def marker(fn: ast.AST, lines: list[str]) -> str | None:
    """The marker on the function's signature lines (from `def` to its body), or on the comment line just
    above its `def` or first decorator."""
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    above = [lines[first - 2]] if first > 1 and lines[first - 2].strip().startswith("#") else []
    for line in above + lines[fn.lineno - 1:fn.body[0].lineno - 1]:
        m = MARK.search(line)
        if m:
            return m.group(1)
    return None


def measure() -> dict[str, list[str]]:
    long, dicts, rows, stale = [], [], [], []
    marked: dict[str, list[str]] = {m: [] for m in MARKERS}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT)
        lines = path.read_text().splitlines()
        for fn in functions(path):
            name = f"{rel}:{fn.lineno} {fn.name}"
            n = fn.end_lineno - fn.lineno + 1
            if rel.parts[1] == "bench" and n > LONG:
                long.append(f"{name} ({n} lines)")
            mark = marker(fn, lines)
            if annotated_dict(fn) or observed_dict(fn):
                (marked[mark] if mark else dicts).append(name)
            elif mark:
                stale.append(f"{name} ({mark})")
            if annotated_dict_rows(fn):
                rows.append(name)
    return {"long": long, "dicts": dicts, **marked, "stale markers": stale, "rows": rows,
            "ledger": ledger_dict_fields()}


def ledger_dict_fields() -> list[str]:
    """The Ledger's attributes set in __init__ to a dict (or annotated as one)."""
    tree = ast.parse((PKG / "bench" / "ledger.py").read_text())
    out = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Ledger"):
        init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        for st in ast.walk(init):
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Attribute):
                ann = ast.unparse(st.annotation)
                if ann.startswith("dict") and ("dict" in ann.split("[", 1)[-1] or "Any" in ann or ann == "dict"
                                               or "list[dict]" in ann):
                    out.append(f"{st.target.attr}: {ann}")
                elif "dict" in ann and "None" in ann:
                    out.append(f"{st.target.attr}: {ann}")
    return out


def main(argv: list[str]) -> None:
    got = measure()
    print(f"functions over {LONG} lines in toolkit/bench/: {len(got['long'])}")
    total = len(got["dicts"]) + sum(len(got[m]) for m in MARKERS)
    print(f"functions returning a plain dict in toolkit/ (annotated or observed): {total}")
    for m in MARKERS:
        print(f"  marked {m}: {len(got[m])}")
    print(f"  unmarked (records, or not yet classified): {len(got['dicts'])}")
    if got["stale markers"]:
        print(f"  stale markers (on a function not counted): {len(got['stale markers'])}")
    print(f"functions returning list[dict] rows in toolkit/: {len(got['rows'])}")
    print(f"Ledger fields holding dicts: {len(got['ledger'])}")
    if "--list" in argv:
        for k in ("long", "dicts", *MARKERS, "stale markers", "rows", "ledger"):
            print(f"\n[{k}]")
            print("\n".join(got[k]))


if __name__ == "__main__":
    main(sys.argv[1:])
