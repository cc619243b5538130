"""Issue 43, every field's own error: a bad value for any field of any spec kind (found by walking the models,
not listed by hand) is reported at that value's line, names its key, says what is wrong and gives a hint;
`toolkit validate` exits 2 with no traceback. `duration_s: {0: 5}`, a malformed `base_image` and a host's `key`
holding the key itself reached the user with no `hint:` line (a field validator's plain ValueError), and a
malformed digest was told to "fix the value's type". The hints come from one place (toolkit.specs
validation_error); VALIDATED holds the values that only a field's own validator refuses, and a new validator
with no row there fails `test_every_field_validator_has_a_row`."""

from __future__ import annotations

import json
import math
import types
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from tests.conftest import run_cli
from tests.helpers import TINY_ENV
from toolkit.errors import SpecError
from toolkit.specs import KINDS, load_spec
from toolkit.specs.yamlsrc import load_marked

BASE: dict[str, dict] = {
    "Environment": yaml.safe_load(TINY_ENV),
    "Hosts": {"kind": "Hosts", "name": "h", "hosts": {"a": {"address": "10.0.0.1"}}},
    "Matrix": {"kind": "Matrix", "name": "t", "environment": "env.yaml", "arms": ["baseline", "ngram"],
               "workloads": ["chat"], "requests": 2, "concurrency": [1]},
}
# the key a mapping of models gets in a case (its keys' own form is tests/badinput/test_pattern_hints.py's)
MAP_KEY = {"dummy_models": "/models/t"}

# (kind, key path, value): values of the right type that only a field's own validator refuses; the words
# its hint must hold
VALIDATED: list[tuple[str, tuple, Any, str]] = [
    ("Matrix", ("duration_s",), {0: 5}, "{1: 20, 16: 30}"),
    ("Matrix", ("duration_s",), {1: -5}, "{1: 20, 16: 30}"),
    ("Matrix", ("duration_s",), {1: "soon"}, "{1: 20, 16: 30}"),
    ("Matrix", ("duration_s",), {}, "{1: 20, 16: 30}"),
    ("Matrix", ("duration_s",), "abc", "fix the value's type"),
    ("Environment", ("base_image",), "Nvidia/CUDA:x y", "e.g. nvidia/cuda:13.0.1-devel-ubuntu24.04"),
    ("Environment", ("base_image",), "nvidia/cuda:13.0.1-devel-ubuntu24.04@sha256:abc", "sha256:<64"),
    ("Environment", ("engine",), "sglng", "did you mean 'sglang'?"),
    ("Environment", ("build_args",), {"A": [1]}, "fix the value's type"),
    ("Environment", ("env",), {"A": {"b": 1}}, "fix the value's type"),
    ("Environment", ("dummy_models", "/models/t", "rope_theta"), -1, "a number > 0"),
    ("Environment", ("servers", "baseline", "--port"), 1, "without its leading dashes"),
    ("Environment", ("servers", "baseline", "mem_fraction"), 0.8, "e.g. mem-fraction-static"),
    ("Environment", ("servers", "baseline", "Port"), 1, "lower-case"),
    ("Environment", ("servers", "baseline", "port"), None, "true"),
    ("Environment", ("servers", "baseline", "port"), {"a": 1}, "e.g."),
    ("Environment", ("servers", "baseline", "port"), math.inf, "finite"),
    ("Environment", ("request_params", "ngram", "top_k"), math.nan, "finite"),
    ("Hosts", ("hosts", "a", "key"), "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "~/.ssh/id_ed25519"),
    ("Matrix", ("target", "kind"), "locl", "did you mean 'local'?"),
    ("Hosts", ("defaults", "key"), "-----BEGIN OPENSSH PRIVATE KEY-----", "~/.ssh/id_ed25519"),
]

MISSING = object()


def _types(tp: Any) -> list[Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return [t for a in get_args(tp) for t in _types(a)]
    if origin is Annotated:
        return _types(get_args(tp)[0])
    return [tp]


def _bounded(annotation: Any, metadata: list[Any]) -> bool:
    """Whether a number field has a lower bound (a seed takes any whole number)."""
    stack, metas = [annotation], list(metadata)
    while stack:
        t = stack.pop()
        if get_origin(t) is Annotated:
            metas += [m for fi in get_args(t)[1:] for m in (getattr(fi, "metadata", None) or [fi])]
        stack.extend(get_args(t))
    return any(getattr(m, "ge", None) is not None or getattr(m, "gt", None) is not None for m in metas)


def _bad_values(types_: list[Any], bounded: bool = True) -> list[Any]:
    """Values of the wrong shape or out of any range for a field of these types (those the field takes,
    e.g. a string for `str | None`, never offered)."""
    takes = {("str" if t is str or get_origin(t) is Literal or (isinstance(t, type) and issubclass(t, Enum))
              else "number" if t in (int, float) else "bool" if t is bool
              else "list" if get_origin(t) is list else "dict" if get_origin(t) is dict
              or (isinstance(t, type) and issubclass(t, BaseModel)) else "any") for t in types_
             if t is not type(None)}
    if "any" in takes:
        return []
    out: list[Any] = []
    if "number" in takes:
        out += ([-1] if bounded else []) + [math.inf] + ([] if "str" in takes else ["abc"])
    if "str" in takes and any(get_origin(t) is Literal or (isinstance(t, type) and issubclass(t, Enum))
                              for t in types_) and not any(t is str for t in types_):
        out.append("zzz-no-such-value")
    if "dict" not in takes:
        out.append({"a": 1})
    elif "number" not in takes and "str" not in takes:
        out.append(7)
    if "list" not in takes and "dict" in takes:
        out.append([1])
    if "bool" in takes and "str" not in takes:
        out.append("maybe")
    return out


def _walk(model: type[BaseModel], path: tuple, seen: frozenset) -> list[tuple[tuple, Any]]:
    """(key path, bad value) for every field below `model`, nested models and their lists and mappings too."""
    if model in seen:
        return []
    out = []
    for name, f in model.model_fields.items():
        if name == "kind":
            continue
        here = path + (name,)
        out += [(here, v) for v in _bad_values(_types(f.annotation), _bounded(f.annotation, f.metadata))]
        for t in _types(f.annotation):
            sub, below = None, here
            if isinstance(t, type) and issubclass(t, BaseModel):
                sub = t
            elif get_origin(t) is list and (inner := [a for a in _types(get_args(t)[0]) if isinstance(a, type)
                                                      and issubclass(a, BaseModel)]):
                sub, below = inner[0], here + (0,)
            elif get_origin(t) is dict and (inner := [a for a in _types(get_args(t)[1]) if isinstance(a, type)
                                                      and issubclass(a, BaseModel)]):
                sub, below = inner[0], here + (MAP_KEY.get(name, "a"),)
            if sub is not None:
                out += _walk(sub, below, seen | {model})
    return out


def _with(doc: dict, path: tuple, value: Any) -> dict:
    """`doc` with `value` at `path`, the containers on the way made (a mapping, or a list of one item) where the
    document has none of the right kind."""
    doc = json.loads(json.dumps(doc))
    cur: Any = doc
    for part, nxt in zip(path, path[1:]):
        want = list if isinstance(nxt, int) else dict
        if isinstance(cur, list):
            if not isinstance(cur[part], want):
                cur[part] = [{}] if want is list else {}
            cur = cur[part]
            continue
        if not isinstance(cur.get(part), want):
            cur[part] = [{}] if want is list else {}
        cur = cur[part]
    if isinstance(cur, list):
        cur[path[-1]] = value
    else:
        cur[path[-1]] = value
    return doc


def _cases() -> dict[str, tuple[str, tuple, Any, str | None]]:
    out: dict[str, tuple[str, tuple, Any, str | None]] = {}
    for kind, model in KINDS.items():
        for path, value in _walk(model, (), frozenset()):
            out[f"{kind}:{'.'.join(map(str, path))}={value!r}"] = (kind, path, value, None)
    for kind, path, value, hint in VALIDATED:
        out[f"{kind}:{'.'.join(map(str, path))}={value!r}"] = (kind, path, value, hint)
    return out


CASES = _cases()


def _write(tmp: Path, case: str) -> tuple[Path, set[int]]:
    """The spec file of a case and the lines of its bad value (its key's, and those of what it holds)."""
    kind, path, value, _ = CASES[case]
    (tmp / "env.yaml").write_text(TINY_ENV)
    f = tmp / "spec.yaml"
    f.write_text(yaml.safe_dump(_with(BASE[kind], path, value), sort_keys=False, default_flow_style=False))
    _, marks, _ = load_marked(f)
    lines = {m.line for p, m in marks.items() if p[:len(path)] == path}
    assert lines, (case, f.read_text())
    return f, lines


def test_the_walk_reaches_every_kind_and_nested_models() -> None:
    paths = {c[1] for c in CASES.values()}
    for expected in [("duration_s",), ("target", "slurm", "jobs"), ("workloads", 0, "speed"),
                     ("hosts", "a", "port"), ("dummy_models", "/models/t", "heads"), ("slo", "ttft_ms", "p90"),
                     ("tune", "budget"), ("model", "dummy", "hidden_size"), ("arrival", "burstiness")]:
        assert expected in paths, expected
    assert len(CASES) >= 250


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_value_of_any_field_is_at_its_line_with_what_and_a_hint(tmp_path: Path, case: str) -> None:
    kind, path, value, words = CASES[case]
    f, lines = _write(tmp_path, case)
    with pytest.raises(SpecError) as info:
        load_spec(f)
    e = info.value
    assert e.file == f and e.line in lines, (case, lines, str(e))
    assert str(path[-1] if not isinstance(path[-1], int) else path[-2]) in e.message, (case, str(e))
    assert e.hint and "describes what" not in e.hint, (case, str(e))  # the last resort: a field with no form
    if words:
        assert words in e.hint, (case, str(e))


def test_every_field_validator_has_a_row() -> None:
    """A field validator (pydantic's field_validator, or Before/AfterValidator on a type) refuses values that
    the walk, which offers values by type, may never offer: each needs its own row in VALIDATED."""
    rows = {(kind, path[0]) for kind, path, _, _ in VALIDATED} | {(kind, path[1]) for kind, path, _, _ in VALIDATED
                                                                   if len(path) > 1}
    missing = []

    def has_validator(annotation: Any) -> bool:
        stack = [annotation]
        while stack:
            t = stack.pop()
            if get_origin(t) is Annotated:
                if any(type(m).__name__ in ("BeforeValidator", "AfterValidator", "PlainValidator", "WrapValidator")
                       for m in get_args(t)[1:]):
                    return True
            stack.extend(get_args(t))
        return False

    for kind, model in KINDS.items():
        todo, seen = [model], set()
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            validated = {f for d in m.__pydantic_decorators__.field_validators.values() for f in d.info.fields}
            for name, f in m.model_fields.items():
                if (name in validated or has_validator(f.annotation)) and (kind, name) not in rows:
                    missing.append(f"{kind}: {m.__name__}.{name}")
                stack = [f.annotation]
                while stack:
                    t = stack.pop()
                    if isinstance(t, type) and issubclass(t, BaseModel):
                        todo.append(t)
                    stack.extend(get_args(t))
    assert not missing, f"add a row to VALIDATED for each: {missing}"


def test_validate_exits_2_for_all_with_a_hint_each_and_no_traceback(tmp_path: Path) -> None:
    files = {}
    for i, case in enumerate(CASES):
        d = tmp_path / str(i)
        d.mkdir()
        files[case] = _write(d, case)
    res = run_cli("validate", "--json", *(str(f) for f, _ in files.values()))
    assert res.returncode == 2 and "Traceback" not in res.stdout + res.stderr, res.stderr[-2000:]
    out = {r["path"]: r for r in json.loads(res.stdout)}
    for case, (f, lines) in files.items():
        r = out[str(f)]
        assert not r["ok"] and r["line"] in lines and r["hint"], (case, r)
