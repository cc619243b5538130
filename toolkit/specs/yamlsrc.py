"""YAML loading that remembers where every key and value came from (file, line, column).

`load_marked(path)` returns plain Python data plus a `Marks` table keyed by the key path
(tuple of keys / list indexes). `extends:` is resolved here: the parent is deep-merged under
the child (mappings merge key by key, lists and scalars replace, `null` removes a key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from toolkit.errors import SpecError

KeyPath = tuple


@dataclass(frozen=True)
class Mark:
    file: Path
    line: int
    column: int


class Marks(dict):
    """key path -> Mark of the key (for mappings) or the item (for lists); () is the document."""

    def find(self, path: KeyPath) -> Mark | None:
        """The mark of `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            if path in self:
                return self[path]
            if not path:
                return None
            path = path[:-1]


def _mark(file: Path, node: yaml.Node) -> Mark:
    return Mark(file, node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(loader: yaml.SafeLoader, node: yaml.Node, path: KeyPath, marks: Marks, file: Path) -> Any:
    if isinstance(node, yaml.MappingNode):
        explicit = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
        loader.flatten_mapping(node)  # resolves YAML merge keys (<<): merged pairs first, explicit ones override
        out: dict = {}
        merged_keys: set = set()
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if id(key_node) not in explicit:
                if key in merged_keys:  # nested merge (<<: *a where a has <<): the later pair wins, as in YAML
                    del out[key]
                merged_keys.add(key)
            elif key in merged_keys:
                merged_keys.discard(key)
                del out[key]
            if not isinstance(key, (str, int, float, bool)):
                raise SpecError("mapping keys must be plain scalars", file=file,
                                line=key_node.start_mark.line + 1, column=key_node.start_mark.column + 1)
            if key in out:
                m = _mark(file, key_node)
                raise SpecError(f"duplicate key {key!r}", hint="each key may appear once in a mapping; "
                                "remove or merge the repeated one", file=file, line=m.line, column=m.column)
            marks[path + (key,)] = _mark(file, key_node)
            out[key] = _convert(loader, value_node, path + (key,), marks, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            marks[path + (i,)] = _mark(file, item)
            items.append(_convert(loader, item, path + (i,), marks, file))
        return items
    return loader.construct_object(node, deep=True)


def parse_marked(text: str, file: Path) -> tuple[Any, Marks]:
    marks = Marks()
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, marks
        marks[()] = _mark(file, node)
        return _convert(loader, node, (), marks, file), marks
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise SpecError(f"YAML syntax error: {problem}",
                        hint="check indentation, quoting and that every `key:` is followed by a space",
                        file=file, line=m.line + 1 if m else None, column=m.column + 1 if m else None) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}", file=file) from None
    finally:
        loader.dispose()


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"spec file not found: {path}", hint="check the path") from None
    except IsADirectoryError:
        raise SpecError(f"{path} is a directory, not a spec file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text: {exc}", file=path) from None


def deep_merge(parent: Any, child: Any, ppath: KeyPath, pmarks: Marks, cmarks: Marks, out_marks: Marks) -> Any:
    """Merge child over parent; marks of the winning side go to out_marks."""
    if isinstance(parent, dict) and isinstance(child, dict):
        merged = {}
        for key in list(parent) + [k for k in child if k not in parent]:
            kp = ppath + (key,)
            if key in child:
                if child[key] is None:
                    continue  # null removes an inherited key
                if key in parent:
                    merged[key] = deep_merge(parent[key], child[key], kp, pmarks, cmarks, out_marks)
                else:
                    merged[key] = child[key]
                    _copy_marks(cmarks, kp, out_marks)
                if kp in cmarks:
                    out_marks[kp] = cmarks[kp]
            else:
                merged[key] = parent[key]
                _copy_marks(pmarks, kp, out_marks)
        return merged
    _copy_marks(cmarks, ppath, out_marks)
    return child


def _copy_marks(src: Marks, prefix: KeyPath, dst: Marks) -> None:
    n = len(prefix)
    for k, v in src.items():
        if k[:n] == prefix:
            dst[k] = v


def load_marked(path: str | Path, _seen: tuple = ()) -> tuple[dict, Marks, list[Path]]:
    """Load a spec file, resolving `extends:`. Returns (data, marks, files in the extends chain)."""
    path = Path(path)
    data, marks = parse_marked(read_text(path), path)
    if data is None:
        raise SpecError("the spec file is empty", hint="a spec needs at least `kind:` and `name:`", file=path, line=1)
    if not isinstance(data, dict):
        m = marks.find(())
        raise SpecError("a spec must be a YAML mapping (key: value lines) at the top level",
                        file=path, line=m.line if m else 1)
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data, marks, [path]
    m = marks[("extends",)]
    if not isinstance(parent_ref, str):
        raise SpecError("`extends` must be a path to another spec file", file=path, line=m.line, column=m.column)
    parent_path = (path.parent / parent_ref).resolve()
    if parent_path in _seen or parent_path == path.resolve():
        raise SpecError(f"`extends` forms a cycle through {parent_ref}", file=path, line=m.line, column=m.column)
    if not parent_path.is_file():
        raise SpecError(f"`extends` names {parent_ref}, which does not exist",
                        hint=f"paths are relative to {path.parent}/", file=path, line=m.line, column=m.column)
    pdata, pmarks, chain = load_marked(parent_path, _seen + (path.resolve(),))
    out_marks = Marks()
    out_marks[()] = marks[()]
    merged = deep_merge(pdata, data, (), pmarks, marks, out_marks)
    return merged, out_marks, [path] + chain
