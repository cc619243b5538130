"""Specs are data: YAML files validated into pydantic models, with precise file:line errors.

    spec = load_spec("envs/sglang-cu13-blackwell.yaml")
    spec.model          # Environment | Hosts | Matrix
    spec.path_of(("sglang", "patches", 0, "path"))   # resolved relative to the file that set it
    spec_hash(spec)     # sha256 over canonical spec + referenced files + template version
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
import types
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from toolkit.errors import SpecError, SpecValueError, did_you_mean
from toolkit.fsutil import folder_not_file
from toolkit.fsutil import sha256_file  # noqa: F401  (its home; imported from here by older callers)
from toolkit.specs.base import Hash
from toolkit.specs.environment import Environment
from toolkit.specs.hosts import Hosts
from toolkit.specs.matrix import Matrix
from toolkit.specs.yamlsrc import Mark, Marks, load_marked

KINDS: dict[str, type[BaseModel]] = {"Environment": Environment, "Hosts": Hosts, "Matrix": Matrix}
SpecModel = Union[Environment, Hosts, Matrix]


@dataclass
class LoadedSpec:
    path: Path
    model: Any
    marks: Marks
    files: list[Path] = field(default_factory=list)  # the spec and every file it extends
    warnings: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.model.kind

    @property
    def name(self) -> str:
        return self.model.name

    def mark(self, keypath: tuple) -> Mark | None:
        return self.marks.find(keypath)

    def error(self, keypath: tuple, message: str, hint: str | None = None) -> SpecError:
        m = self.mark(keypath)
        return SpecError(f"{_dotted(keypath)}: {message}" if keypath else message, hint=hint,
                         file=m.file if m else self.path, line=m.line if m else None, column=m.column if m else None)

    def path_of(self, keypath: tuple, value: str | None = None, must_exist: bool = True, file: bool = False) -> Path:
        """Resolve a path-valued field relative to the spec file that set it (extends-aware). `file`: the key
        names a file, and a folder there is an error at its line."""
        if value is None:
            value = _get(self.model.model_dump(), keypath)
        m = self.mark(keypath)
        base = m.file.parent if m else self.path.parent
        if str(value).startswith(PACKAGED):  # `toolkit:NAME`: a folder shipped in the toolkit (toolkit/_data/NAME)
            base = packaged_dir()
            p = base / str(value)[len(PACKAGED):]
        else:
            p = Path(value).expanduser()
            p = p if p.is_absolute() else (base / p)
        if must_exist and not p.exists():
            raise self.error(keypath, f"file {value!r} does not exist (looked in {base}/)",
                             hint="paths in a spec are relative to the spec file that names them")
        if file and (folder := folder_not_file(p)):
            raise self.error(keypath, folder, hint=f"name the file inside it, e.g. {value.rstrip('/')}/NAME")
        return p


PACKAGED = "toolkit:"  # a path-valued field's prefix naming a folder the toolkit ships (its package data)


def packaged_dir() -> Path:
    """toolkit/_data/ of this installation (a checkout, an editable install or a wheel): where `toolkit:NAME`
    paths of a spec point (the quickstart's trained model: toolkit:quickstart-model)."""
    return Path(__file__).resolve().parent.parent / "_data"


def _get(data: Any, keypath: tuple) -> Any:
    for k in keypath:
        data = data[k]
    return data


def _dotted(keypath: tuple) -> str:
    out = ""
    for k in keypath:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _unwrap(tp: Any) -> list[Any]:
    """All concrete types inside Optional/Union/Annotated wrappers at one level."""
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return [t for a in get_args(tp) for t in _unwrap(a)]
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    return [tp]


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names valid at the mapping that contains loc[-1]."""
    return [k for t in _models_at(model, loc) for k in t.model_fields]


def _key_hint(model: type[BaseModel], loc: tuple) -> str | None:
    """A model's own word on an unknown key (`KEY_HINTS`: names other tools use for one of its fields)."""
    for t in _models_at(model, loc):
        hint = getattr(t, "KEY_HINTS", {}).get(str(loc[-1]))
        if hint:
            return hint
    return None


def _models_at(model: type[BaseModel], loc: tuple) -> list[type[BaseModel]]:
    """The models whose mapping may contain loc[-1]."""
    candidates: list[Any] = [model]
    for part in loc[:-1]:
        nxt: list[Any] = []
        for c in candidates:
            for t in _unwrap(c):
                if isinstance(t, type) and issubclass(t, BaseModel):
                    if isinstance(part, str) and part in t.model_fields:
                        nxt.extend(_unwrap(t.model_fields[part].annotation))
                elif get_origin(t) is dict:
                    nxt.extend(_unwrap(get_args(t)[1]))
                elif get_origin(t) is list:
                    nxt.extend(_unwrap(get_args(t)[0]))
        candidates = nxt
    return [t for c in candidates for t in _unwrap(c) if isinstance(t, type) and issubclass(t, BaseModel)]


RANGE_OPS = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
             "less_than_equal": ("<=", "le")}
LENGTH_ERRORS = ("too_short", "too_long")


def _describe(err: dict) -> str:
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if err["type"] == "missing":
        return "required key is missing"
    if len(err.get("alternatives") or ()) > 1:  # every member of a union refused the value's shape
        alts = err["alternatives"]
        return f"expected {', '.join(alts[:-1])} or {alts[-1]}, got {err.get('input')!r}"
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] in ("literal_error", "enum"):
        return f"{msg.replace('Input should be', 'expected')}, got {err.get('input')!r}"
    inp = err.get("input")
    if err["type"] in RANGE_OPS:
        op, key = RANGE_OPS[err["type"]]
        return f"{inp!r} is out of range: it must be {op} {(err.get('ctx') or {}).get(key)}"
    if err["type"] in LENGTH_ERRORS:
        ctx = err.get("ctx") or {}
        if err["type"] == "too_short":
            return f"needs at least {ctx.get('min_length')} item(s), got {ctx.get('actual_length')}"
        return f"takes at most {ctx.get('max_length')} item(s), got {ctx.get('actual_length')}"
    if err["type"] == "string_too_long":
        ctx = err.get("ctx") or {}
        return f"{len(inp) if isinstance(inp, str) else '?'} characters is too long: at most {ctx.get('max_length')}"
    if err["type"] == "finite_number":
        return f"{inp!r} is not a finite number"
    if err["type"] == "int_from_float":
        return f"expected a whole number, got {inp!r}"
    if err["type"].endswith("_type") or err["type"].endswith("_parsing"):
        return f"{msg.replace('Input should be', 'expected')}, got {inp!r}"
    if err["type"] == "string_pattern_mismatch":
        return f"{inp!r} is not of the form this key takes"  # the form and an example: the hint
    return msg


def _field_at(model: type[BaseModel], loc: tuple) -> tuple[list[Any], list[Any], str | None]:
    """The types a location may hold, the constraints on it (annotated_types Ge, Le, ...) and its description."""
    candidates: list[Any] = [model]
    constraints: list[Any] = []
    description = None
    for part in loc:
        nxt: list[Any] = []
        constraints, description = [], None
        for c in candidates:
            for t in _unwrap(c):
                if isinstance(t, type) and issubclass(t, BaseModel) and isinstance(part, str) \
                        and part in t.model_fields:
                    f = t.model_fields[part]
                    constraints += list(f.metadata)
                    description = description or f.description
                    nxt.append(f.annotation)
                elif get_origin(t) in (list, dict):
                    # `[key]` (pydantic's name for a mapping's key): the key's type, else the value's
                    item = (get_args(t)[0 if part == "[key]" and get_origin(t) is dict else -1]
                            if get_args(t) else Any)
                    if get_origin(item) is Annotated:
                        for meta in get_args(item)[1:]:
                            constraints += list(getattr(meta, "metadata", []) or [meta])
                            description = description or getattr(meta, "description", None)
                    nxt.append(item)
        candidates = nxt
    for c in candidates:  # the bounds on a union member's own type (`Positive | None`: Positive's gt=0)
        for m in (get_args(c) if get_origin(c) in (Union, types.UnionType) else ()):
            if get_origin(m) is Annotated:
                for meta in get_args(m)[1:]:
                    constraints += list(getattr(meta, "metadata", []) or [meta])
    types_ = [t for c in candidates for t in _unwrap(c) if t is not type(None)]
    return types_, constraints, _value_description(candidates) or description


def _value_description(candidates: list[Any]) -> str | None:
    """The description on the value's own type (`Annotated[str, Field(pattern=..., description=...)]`)."""
    for c in candidates:
        members = get_args(c) if get_origin(c) in (Union, types.UnionType) else (c,)
        for m in members:
            if get_origin(m) is Annotated:
                for meta in get_args(m)[1:]:
                    if getattr(meta, "description", None):
                        return meta.description
    return None


def _range_hint(model: type[BaseModel], loc: tuple, err: dict) -> str:
    """`allowed: 0 to 3`, `allowed: a whole number >= 1`: every bound on the field, not only the one broken."""
    types_, constraints, _ = _field_at(model, loc)
    bounds = {}
    for c in constraints:
        for key in ("ge", "gt", "le", "lt"):
            if getattr(c, key, None) is not None:
                bounds[key] = getattr(c, key)
    if err["type"] in RANGE_OPS:
        op, key = RANGE_OPS[err["type"]]
        bounds.setdefault(key, (err.get("ctx") or {}).get(key))
    kind = "a whole number" if int in types_ and float not in types_ else "a number"
    if err["type"] == "finite_number":
        kind = "a finite " + kind.split(" ", 1)[1]  # .inf and .nan are YAML's, never a spec's value
        if not bounds:
            return f"allowed: {kind}"
    lo = (">=", bounds["ge"]) if "ge" in bounds else (">", bounds["gt"]) if "gt" in bounds else None
    hi = ("<=", bounds["le"]) if "le" in bounds else ("<", bounds["lt"]) if "lt" in bounds else None
    if lo and hi and lo[0] == ">=" and hi[0] == "<=":
        return f"allowed: {kind} from {lo[1]} to {hi[1]}"
    return "allowed: " + kind + " " + " and ".join(f"{b[0]} {b[1]}" for b in (lo, hi) if b)


def _rank(err: dict) -> int:
    """Which error to report first: an unknown key before anything else (a misspelt required key is also
    reported missing, and the misspelling is the mistake), a missing key last."""
    return 0 if err["type"] == "extra_forbidden" else 2 if err["type"] == "missing" else 1


# the errors by which a union member refuses a value's shape, and the shape that member takes
SHAPE_ERRORS = {
    **dict.fromkeys(("string_type", "string_sub_type", "literal_error", "enum"), "str"),
    **dict.fromkeys(("int_type", "int_parsing", "float_type", "float_parsing", "bool_type", "bool_parsing",
                     "decimal_type", "decimal_parsing"), "number"),
    **dict.fromkeys(("list_type", "tuple_type", "set_type", "frozen_set_type", "iterable_type"), "list"),
    **dict.fromkeys(("dict_type", "model_type", "model_attributes_type", "dataclass_type"), "dict"),
}


def _shape(value: Any) -> str | None:
    """The shape a YAML value has: str, number (booleans too), list or dict."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (list, tuple)):
        return "list"
    return "dict" if isinstance(value, dict) else None


def _walk(err: dict, data: Any) -> tuple[tuple, list[tuple[tuple, str]]]:
    """An error's location in the data (keys and indexes only) and the union members it passed through:
    (the union's location, the member's tag), e.g. (("workloads", 0), "function-after[_trace(), Workload]")."""
    loc, clean, members, cur = err["loc"], [], [], data
    for i, part in enumerate(loc):
        if isinstance(cur, dict) and part in cur:
            clean.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and not isinstance(part, bool) and 0 <= part < len(cur):
            clean.append(part)
            cur = cur[part]
        elif i == len(loc) - 1 and err["type"] in ("missing", "extra_forbidden"):
            clean.append(part)  # the key itself
        elif isinstance(part, str):
            members.append((tuple(clean), part))
        else:
            break
    return tuple(clean), members


def _branch_score(err: dict, where: tuple, data_loc: tuple) -> int:
    """How far a union member at `where` got with the user's value: 0 it took the value's shape (the error
    lies inside the value, or is about its content: a bound, a pattern, a validator's word), 1 it refused the
    shape but takes values of that shape (`'concurency'` to Literal['concurrency']), 2 it takes another shape
    (a mapping offered to `str`, a number to `list[...]`)."""
    wants = SHAPE_ERRORS.get(err["type"])
    if len(data_loc) > len(where) or wants is None:
        return 0
    return 1 if wants == _shape(err.get("input")) else 2


def _meant(errors: list[dict], data: Any) -> list[dict]:
    """The errors of the union members the user meant, first; those of members that refused the value's
    shape while another took it, dropped. A mapping is meant for a mapping member, never for `str` (`{trace:
    x, speed: .inf}` is a Workload whose speed is not finite, not a string); a list for a list member, a
    number for a number; among mapping members, the one that knows the most keys the user wrote."""
    walked = [_walk(e, data) for e in errors]
    branches: dict[tuple, dict[str, list[int]]] = {}  # union location -> member tag -> its errors' scores
    unknown: dict[tuple, dict[str, int]] = {}  # union location -> member tag -> keys it does not know
    for e, (data_loc, members) in zip(errors, walked):
        for where, tag in members:
            branches.setdefault(where, {}).setdefault(tag, []).append(_branch_score(e, where, data_loc))
            if e["type"] == "extra_forbidden" and len(data_loc) == len(where) + 1:
                unknown.setdefault(where, {}).setdefault(tag, 0)
                unknown[where][tag] += 1
    best = {where: {tag: min(s) for tag, s in tags.items()} for where, tags in branches.items()}
    keep, scores = [], []
    for e, (data_loc, members) in zip(errors, walked):
        score, dropped = 0, False
        for where, tag in members:
            tags = best[where]
            if len(tags) < 2:
                continue  # no other member to prefer
            if tags[tag] > 0 and min(tags.values()) == 0:
                dropped = True  # another member took the value's shape
            elif tags[tag] == 0:
                took = [t for t, s in tags.items() if s == 0]
                fewest = min(unknown.get(where, {}).get(t, 0) for t in took)
                dropped = dropped or unknown.get(where, {}).get(tag, 0) > fewest
            score = max(score, tags[tag])
        if not dropped:
            keep.append(e)
            scores.append(score)
    order = sorted(range(len(keep)), key=lambda i: (_rank(keep[i]), scores[i]))
    kept = [keep[i] for i in order] or sorted(errors, key=_rank)
    # members that all refused the value's shape are one mistake: `expected 'concurrency' or an integer`
    out: list[dict] = []
    refused: dict[tuple, dict] = {}
    for e in kept:
        data_loc, members = _walk(e, data)
        if e["type"] in SHAPE_ERRORS and members and members[-1][0] == data_loc:
            if data_loc in refused:
                refused[data_loc]["alternatives"].append(_alternative(e))
                continue
            e = {**e, "alternatives": [_alternative(e)]}
            refused[data_loc] = e
        out.append(e)
    return out


def _alternative(err: dict) -> str:
    """What a union member takes, from its refusal: "Input should be a valid integer, unable to ..." -> "an
    integer"."""
    what = err["msg"].replace("Input should be ", "").split(", unable")[0].replace("a valid ", "a ")
    what = re.sub(r"^a dictionary or instance of (\w+)$", r"a mapping (\1)", what)
    return re.sub(r"^a ([aeiou])", r"an \1", what)


def _choices(model: type[BaseModel], loc: tuple, err: dict) -> list[str]:
    """The values a Literal or Enum field takes (of every union member), else those its error lists."""
    types_, _, _ = _field_at(model, loc)
    out: list[str] = []
    for t in types_:
        if get_origin(t) is Literal:
            out += [str(a) for a in get_args(t)]
        elif isinstance(t, type) and issubclass(t, Enum):
            out += [str(m.value) for m in t]
    return out or re.findall(r"'((?:[^'\\]|\\.)*)'", str((err.get("ctx") or {}).get("expected", "")))


def _value_hint(model: type[BaseModel], loc: tuple, err: dict, errors: list[dict], data: Any) -> str | None:
    """A refused Literal or Enum value (alone or as one member of a union): `did you mean 'concurrency'?`,
    else the values to choose from."""
    here = _walk(err, data)[0]
    literal = next((e for e in [err, *errors] if e["type"] in ("literal_error", "enum")
                    and _walk(e, data)[0] == here), None)
    if literal is None or err["type"] not in SHAPE_ERRORS:
        return None
    choices = _choices(model, loc, literal)
    if not choices or not isinstance(literal.get("input"), (str, int, float)):
        return None
    return did_you_mean(literal["input"], choices) or (
        "write one of the values listed, as it is spelt there" if err["type"] in ("literal_error", "enum") else None)


def _own_check(err: dict) -> SpecValueError | None:
    """The SpecValueError a model validator raised (key and hint), where this error is one."""
    exc = (err.get("ctx") or {}).get("error") if err["type"] == "value_error" else None
    return exc if isinstance(exc, SpecValueError) else None


def _where_of(err: dict, data: Any, marks: Marks, path: Path, model: Any = None) -> tuple[tuple, Mark | None]:
    loc = _walk(err, data)[0]
    if err["type"] == "missing":
        return loc, marks.find(loc[:-1])
    if hasattr(model, "written_at"):  # a value the model put there: where the file wrote it (a host's defaults)
        loc = model.written_at(tuple(err["loc"]), data) or loc
    own = _own_check(err)
    if own is not None:  # the key the check names: the first of its keys the file has
        at = next((loc + k for k in own.keys if loc + k in marks), loc + own.keys[0])
        return at, marks.find(at)
    named = _named_key(err, data, loc)  # a model's own check: at the line of the key it names
    return loc, marks.find(named or loc)


def _named_key(err: dict, data: Any, loc: tuple) -> tuple | None:
    """The key a model validator's message is about, when the error sits on the whole mapping (a Matrix's
    "give exactly one of `concurrency` ... or `rates`" was at 1:1, the document): the first key the message
    names (its first word, or a `key:` in backticks) that the mapping has; else the shallowest such key below
    it (`a `trace:` workload ...`: workloads[1].trace)."""
    if err["type"] not in ("value_error", "assertion_error"):
        return None
    value = data
    for part in loc:
        value = value[part] if isinstance(value, (dict, list)) else None
    if not isinstance(value, dict):
        return None
    msg = err.get("msg", "").removeprefix("Value error, ")
    words = re.match(r"[A-Za-z_]\w*", msg)
    names = ([words.group(0)] if words else []) + [m.group(1) for m in re.finditer(r"`([A-Za-z_]\w*)", msg)]
    for name in names:
        if name in value:
            return loc + (name,)
    level: list[tuple[tuple, Any]] = [(loc, value)]
    while level:  # breadth first: the shallowest key of those named
        for name in names[1:]:
            for where, v in level:
                if isinstance(v, dict) and name in v:
                    return where + (name,)
        level = [(where + (k,), c) for where, v in level
                 for k, c in (v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ())]
    return None


def _form_hint(model: type[BaseModel], loc: tuple, err: dict, data: Any) -> str:
    """The hint of last resort, for an error no rule above words (a field validator's plain ValueError, a
    constraint pydantic reports in its own words): the form the key takes, from the description on its field
    or its type (every validated field has one with an example: tests/badinput/test_field_hints.py)."""
    on_key = err["loc"][-1:] == ("[key]",)  # a mapping's key, e.g. a server flag's name
    field = _walk(err, data)[0]  # the field's place in the model (`loc`: the file's, e.g. a host's defaults)
    for at in (field[:-1] + ("[key]",) if on_key else field, tuple(err["loc"])):
        _, _, description = _field_at(model, at)
        if description:
            return f"expected {description}"
    kind = getattr(model.model_fields.get("kind"), "annotation", None)
    name = get_args(kind)[0] if get_origin(kind) is Literal else model.__name__
    return f"`toolkit schema {name}` describes what `{loc[-1] if loc else name}` takes"


def validation_error(exc: ValidationError, model: type[BaseModel], data: Any, marks: Marks, path: Path) -> SpecError:
    raw = exc.errors()
    errors = _meant(raw, data)
    first = errors[0]
    loc, mark = _where_of(first, data, marks, path, model)
    msg = _describe(first)
    hint = None
    if _own_check(first) is not None:
        hint = _own_check(first).hint
    elif first["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        hint = _key_hint(model, loc) or did_you_mean(loc[-1], allowed) or f"valid keys here: {', '.join(sorted(allowed))}"
    elif first["type"] == "missing":
        hint = f"add `{loc[-1]}:` to {_dotted(loc[:-1]) or 'the top level'}"
    elif first["type"] in RANGE_OPS or first["type"] == "finite_number":
        hint = _range_hint(model, loc, first)
    elif first["type"] == "string_too_long":
        hint = "shorten it: names become file and folder names (results/<matrix>/<run>/, cells/<arm>__<domain>...)"
    elif first["type"] in LENGTH_ERRORS:
        hint = "list the values in [ ... ]" if first["type"] == "too_short" else "remove some of the values"
    elif first["type"] == "string_pattern_mismatch":
        on_key = first["loc"][-1:] == ("[key]",)  # a mapping's key, e.g. a knob name in tune.space.ARM
        _, _, description = _field_at(model, loc[:-1] + ("[key]",) if on_key else loc)
        hint = f"expected {description}" if description else \
            f"expected a value matching {(first.get('ctx') or {}).get('pattern')}"
    elif _value_hint(model, loc, first, raw, data):
        hint = _value_hint(model, loc, first, raw, data)
    elif first["type"] in SHAPE_ERRORS or first["type"].endswith(("_type", "_parsing")) \
            or first.get("alternatives"):
        types_, _, _ = _field_at(model, loc)
        quote = str in types_ and _shape(first.get("input")) == "number"  # `5` where a string may be: '5'
        hint = "fix the value's type" + (" (quote it to make it a string)" if quote else "")
    hint = hint or _form_hint(model, loc, first, data)
    more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    where = _dotted(loc)
    text = f"{where}: {msg}{more}" if where else f"{msg}{more}"
    also = []
    for e in errors[1:]:
        eloc, emark = _where_of(e, data, marks, path, model)
        at = f"{emark.file}:{emark.line}" if emark else str(path)
        also.append(f"{at}: {_dotted(eloc) + ': ' if eloc else ''}{_describe(e)}")
    return SpecError(text, hint=hint, file=mark.file if mark else path, line=mark.line if mark else None,
                     column=mark.column if mark else None, also=also or None)


def load_spec(path: str | Path, expect: str | None = None) -> LoadedSpec:
    """Load, resolve `extends`, validate. Raises SpecError with file:line on any problem."""
    path = Path(path)
    data, marks, files = load_marked(path)
    kind = data.get("kind")
    if kind not in KINDS:
        m = marks.find(("kind",))
        close = difflib.get_close_matches(str(kind), list(KINDS), n=1)
        raise SpecError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}" if kind is not None
                        else "required key `kind` is missing",
                        hint=f"did you mean {close[0]!r}?" if close else "start the file with `kind: Environment` "
                        "(or Hosts, Matrix)", file=m.file if m else path, line=m.line if m else 1,
                        column=m.column if m else None)
    if expect and kind != expect:
        m = marks.find(("kind",))
        raise SpecError(f"expected {'an' if expect[0] in 'AEIOU' else 'a'} {expect} spec, this is a {kind} spec",
                        file=path, line=m.line if m else None,
                        hint=f"name a file that starts with `kind: {expect}`"
                             + (" (an Environment spec holds the arms' server presets)" if expect == "Environment"
                                else ""))
    model_cls = KINDS[kind]
    try:
        model = model_cls.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, model_cls, data, marks, path) from None
    spec = LoadedSpec(path=path, model=model, marks=marks, files=files)
    for keypath, message, hint in getattr(model, "spec_errors", lambda: [])():
        raise spec.error(keypath, message, hint)
    if hasattr(model, "spec_warnings"):
        spec.warnings.extend(model.spec_warnings())
    return spec


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def referenced_files(spec: LoadedSpec) -> dict[str, Path]:  # data-keyed: key path
    """Files whose bytes are part of the spec: patches, CA bundle, model path, workload data, linked specs."""
    m = spec.model
    out: dict[str, Path] = {}
    if isinstance(m, Environment):
        if m.sglang:
            for i, p in enumerate(m.sglang.patches):
                out[f"sglang.patches[{i}]"] = spec.path_of(("sglang", "patches", i, "path"), p.path)
        if m.ca_bundle:
            out["ca_bundle"] = spec.path_of(("ca_bundle", "path"), m.ca_bundle.path)
    elif isinstance(m, Matrix):
        out["environment"] = spec.path_of(("environment",), m.environment)
        for i, a in enumerate(m.arms):  # an arm from another Environment: its spec's bytes too
            if not isinstance(a, str):
                out[f"arms[{i}].environment"] = spec.path_of(("arms", i, "environment"), a.environment)
        if m.target.hosts:
            out["target.hosts"] = spec.path_of(("target", "hosts"), m.target.hosts)
        if m.target.ca_bundle:
            out["target.ca_bundle"] = spec.path_of(("target", "ca_bundle"), m.target.ca_bundle)
        if m.training_data:
            out["training_data"] = spec.path_of(("training_data",), m.training_data)
        for i, w in enumerate(m.workloads):
            if not isinstance(w, str):
                if w.path:
                    out[f"workloads[{i}].path"] = spec.path_of(("workloads", i, "path"), w.path)
                if w.holdout:
                    out[f"workloads[{i}].holdout"] = spec.path_of(("workloads", i, "holdout"), w.holdout)
                if w.trace:
                    out[f"workloads[{i}].trace"] = spec.path_of(("workloads", i, "trace"), w.trace)
    return out


def check_patch_hashes(spec: LoadedSpec) -> dict[str, str]:  # data-keyed: patch path
    """Verify each patch's sha256 against the spec; returns {patch path: sha256}."""
    m = spec.model
    out: dict[str, str] = {}
    if not isinstance(m, Environment) or not m.sglang:
        return out
    for i, p in enumerate(m.sglang.patches):
        f = spec.path_of(("sglang", "patches", i, "path"), p.path)
        actual = sha256_file(f)
        if actual != p.sha256:
            raise spec.error(("sglang", "patches", i, "sha256"),
                             f"sha256 of {p.path} is {actual}, the spec says {p.sha256}",
                             hint="the patch changed since the spec was written: review it, then put the new "
                                  "sha256 in the spec (`sha256sum FILE`)")
        out[p.path] = actual
    return out


def spec_hash(spec: LoadedSpec, template_version: str = "") -> str:
    """sha256 over the canonical resolved spec, the bytes of every referenced file and the template version
    (with a template version, an Environment's also covers its own engine's templates, templates/engines/NAME/:
    toolkit.resources.engine_templates).

    Key order, comments and formatting do not change it; one byte of a referenced file does.
    """
    h = hashlib.sha256()
    h.update(b"toolkit-spec-v1\0")
    h.update(canonical_json(_hash_doc(spec.model)).encode())
    for key, f in sorted(referenced_files(spec).items()):
        h.update(f"\0{key}\0".encode())
        h.update(sha256_file(f).encode() if f.is_file() else b"<dir>")
    h.update(b"\0template\0" + template_version.encode())
    if template_version and isinstance(spec.model, Environment):
        from toolkit.resources import data_dir, engine_templates

        root = data_dir("templates")
        for f in engine_templates(spec.model.engine):  # none for an engine without a folder: its hash holds
            h.update(b"\0" + f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def hash_policy(model: type[BaseModel], name: str) -> str | None:
    """The hash policy a field declares (toolkit.specs.base.Hash): "never", "omit-default", or None (hashed)."""
    info = model.model_fields.get(name)
    return next((m.policy for m in (info.metadata if info else ()) if isinstance(m, Hash)), None)


def _hash_doc(value: Any, dumped: Any = None) -> Any:  # json-edge: the document the spec hash covers
    """What the hash covers of a spec model, at every level: its JSON dump, less the fields whose declared
    policy (`Hash` on the field) leaves them out: `never` (a Matrix's slo and tune), `omit-default` at their
    default (a Matrix's launches: 1; workers, an Environment's dummy_models unset), plus what a model adds that
    the dump does not say (hash_extra: the version of the recipe a dummy model is made with). `dumped`: value's
    JSON dump, for the dicts and lists that hold models."""
    if isinstance(value, BaseModel):
        doc = value.model_dump(mode="json")
        fields = type(value).model_fields
        for name in list(doc):
            v = getattr(value, name, None)
            policy = hash_policy(type(value), name)
            if policy == "never":
                doc.pop(name)
            elif policy == "omit-default" and v == fields[name].get_default(call_default_factory=True):
                doc.pop(name)  # added after hashing began, at its default: the hash of an older spec holds
            elif _has_model(v):
                doc[name] = _hash_doc(v, doc[name])
        if hasattr(value, "hash_extra"):
            doc.update(value.hash_extra())
        return doc
    if isinstance(value, dict):
        return {k: _hash_doc(v, dumped[k]) if _has_model(v) else dumped[k] for k, v in value.items()}
    return [_hash_doc(v, d) if _has_model(v) else d for v, d in zip(value, dumped)]  # a list or tuple


def _has_model(v: Any) -> bool:
    if isinstance(v, BaseModel):
        return True
    if isinstance(v, dict):
        return any(_has_model(x) for x in v.values())
    return isinstance(v, (list, tuple)) and any(_has_model(x) for x in v)


def json_schemas() -> dict[str, dict]:  # data-keyed: kind
    return {kind: cls.model_json_schema() for kind, cls in KINDS.items()}
