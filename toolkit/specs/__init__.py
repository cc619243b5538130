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
from dataclasses import dataclass, field
from pathlib import Path
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from toolkit.errors import SpecError
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

    def path_of(self, keypath: tuple, value: str | None = None, must_exist: bool = True) -> Path:
        """Resolve a path-valued field relative to the spec file that set it (extends-aware)."""
        if value is None:
            value = _get(self.model.model_dump(), keypath)
        m = self.mark(keypath)
        base = m.file.parent if m else self.path.parent
        p = Path(value).expanduser()
        p = p if p.is_absolute() else (base / p)
        if must_exist and not p.exists():
            raise self.error(keypath, f"file {value!r} does not exist (looked in {base}/)",
                             hint="paths in a spec are relative to the spec file that names them")
        return p


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
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "literal_error":
        return msg.replace("Input should be", "expected")
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
        return f"{inp!r} does not match the pattern {(err.get('ctx') or {}).get('pattern')}"
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
                    item = get_args(t)[-1] if get_args(t) else Any
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


def _clean_loc(loc: tuple, data: Any) -> tuple:
    """Drop pydantic's union-member and validator tags from a location, keeping real keys."""
    out: list = []
    cur = data
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and not isinstance(part, int) and str(part).isidentifier() and "[" not in str(part) \
                and part not in ("str", "int", "float", "bool", "function-after", "function-before"):
            out.append(part)  # a missing or unknown key
            cur = None
    return tuple(out)


def _rank(err: dict) -> int:
    """Which error to report first: an unknown key before anything else (a misspelt required key is also
    reported missing, and the misspelling is the mistake), a missing key last."""
    return 0 if err["type"] == "extra_forbidden" else 2 if err["type"] == "missing" else 1


def _where_of(err: dict, data: Any, marks: Marks, path: Path) -> tuple[tuple, Mark | None]:
    loc = _clean_loc(err["loc"], data)
    return loc, marks.find(loc) if err["type"] != "missing" else marks.find(loc[:-1])


def validation_error(exc: ValidationError, model: type[BaseModel], data: Any, marks: Marks, path: Path) -> SpecError:
    errors = sorted(exc.errors(), key=_rank)
    first = errors[0]
    loc, mark = _where_of(first, data, marks, path)
    msg = _describe(first)
    hint = None
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        hint = _key_hint(model, loc) or (f"did you mean {close[0]!r}?" if close else
                                         f"valid keys here: {', '.join(sorted(allowed))}")
    elif first["type"] == "missing":
        hint = f"add `{loc[-1]}:` to {_dotted(loc[:-1]) or 'the top level'}"
    elif first["type"] in RANGE_OPS or first["type"] == "finite_number":
        hint = _range_hint(model, loc, first)
    elif first["type"] == "string_too_long":
        hint = "shorten it: names become file and folder names (results/<matrix>/<run>/, cells/<arm>__<domain>...)"
    elif first["type"] in LENGTH_ERRORS:
        hint = "list the values in [ ... ]" if first["type"] == "too_short" else "remove some of the values"
    elif first["type"] == "string_pattern_mismatch":
        _, _, description = _field_at(model, loc)
        hint = f"expected {description}" if description else None
    elif "expected" in msg or "Input should" in first["msg"]:
        types_, _, _ = _field_at(model, loc)
        hint = "fix the value's type" + (" (quote it to make it a string)" if str in types_ else "")
    more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    where = _dotted(loc)
    text = f"{where}: {msg}{more}" if where else f"{msg}{more}"
    also = []
    for e in errors[1:]:
        eloc, emark = _where_of(e, data, marks, path)
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
        raise SpecError(f"expected a {expect} spec, this is a {kind}", file=path, line=m.line if m else None)
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


def referenced_files(spec: LoadedSpec) -> dict[str, Path]:
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


def check_patch_hashes(spec: LoadedSpec) -> dict[str, str]:
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
    """sha256 over the canonical resolved spec, the bytes of every referenced file and the template version.

    Key order, comments and formatting do not change it; one byte of a referenced file does.
    """
    h = hashlib.sha256()
    h.update(b"toolkit-spec-v1\0")
    h.update(canonical_json(_hash_doc(spec.model)).encode())
    for key, f in sorted(referenced_files(spec).items()):
        h.update(f"\0{key}\0".encode())
        h.update(sha256_file(f).encode() if f.is_file() else b"<dir>")
    h.update(b"\0template\0" + template_version.encode())
    return h.hexdigest()


def hash_policy(model: type[BaseModel], name: str) -> str | None:
    """The hash policy a field declares (toolkit.specs.base.Hash): "never", "omit-default", or None (hashed)."""
    info = model.model_fields.get(name)
    return next((m.policy for m in (info.metadata if info else ()) if isinstance(m, Hash)), None)


def _hash_doc(value: Any, dumped: Any = None) -> Any:
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


def json_schemas() -> dict[str, dict]:
    return {kind: cls.model_json_schema() for kind, cls in KINDS.items()}
