"""No import cycle, between modules or between packages, and the floors of the house hold.

Every `import` and `from ... import` in toolkit/ counts, at module level or inside a function (an
import inside a function hides a cycle from the interpreter, not from the reader). The graph is read
from the source with `ast`; nothing is imported.

Packages are toolkit's sub-packages (toolkit.bench, toolkit.results, ...); a top-level module
(toolkit.cli, toolkit.render, ...) is a package of its own. Every package has a floor (FLOORS) and imports
only packages on floors below it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "toolkit"

# packages the shared types may use: they import no stage (engine knowledge is facts, not a stage)
SCHEMA_MAY_IMPORT = {"toolkit", "toolkit.errors", "toolkit.engines", "toolkit.stats"}
# what the load generator may use: the shared types, errors, endpoints and settings, and the ground floor's one
# rule for numbers (its command line's options) and atomic writer (its --records); never bench, spec, results or tune
LOADGEN_MAY_IMPORT = {"toolkit", "toolkit.errors", "toolkit.endpoints", "toolkit.schema", "toolkit.settings",
                      "toolkit.numbers", "toolkit.fsutil", "toolkit.loadgen"}
# Every package's floor, lowest first. A package imports only packages on floors below its own: never one
# above (that would run back up the house) and never a neighbour on its own floor (neighbours stand side by
# side, so each reads without the other). A new package needs a floor here before the test passes.
FLOORS: list[tuple[str, set[str]]] = [
    ("ground: imports no toolkit package",
     {"toolkit", "toolkit._data", "toolkit.errors", "toolkit.fsutil", "toolkit.numbers", "toolkit.settings",
      "toolkit.signals"}),
    ("the statistics: pure math on numbers (tests, intervals, combination, power), imports no toolkit package; "
     "the shared types' intervals and every stage's verdicts call it", {"toolkit.stats"}),
    ("the registry of named plug-ins (engines, target kinds): errors alone", {"toolkit.registry"}),
    ("what the engines mean (SGLang's flags, the embedded engine's generation_config): facts the spec, "
     "the shared types and every stage ask", {"toolkit.engines"}),
    ("the shared types and leaf helpers",
     {"toolkit.schema", "toolkit.console", "toolkit.endpoints", "toolkit.extras",
      "toolkit.gitinfo", "toolkit.patches", "toolkit.resources", "toolkit.scrub"}),
    ("the spec models (they give the shared types: a Matrix's objectives)", {"toolkit.specs"}),
    ("wrappers, rendering, the exit mapping, the load generator and workloads",
     {"toolkit.checksums", "toolkit.docker_api", "toolkit.exits", "toolkit.render", "toolkit.loadgen",
      "toolkit.workloads"}),
    ("the stages that stand alone: results, image, gpu, serve, the model pair (reads the workload generators)",
     {"toolkit.results", "toolkit.image", "toolkit.gpu", "toolkit.serve", "toolkit.pair"}),
    ("provisioning (uses gpu's probes)", {"toolkit.provision"}),
    ("Slurm jobs (serve's launchers as batch jobs)", {"toolkit.slurm"}),
    ("where arms run: one Target per kind (local, hosts, external, slurm), making serve's and slurm's launchers",
     {"toolkit.targets"}),
    ("the benchmark (drives loadgen, serve, image, provision; writes through results)", {"toolkit.bench"}),
    ("the tuner (runs bench matrices)", {"toolkit.tune"}),
    ("the command line", {"toolkit.cli"}),
    ("`python -m toolkit`: the command line run as a module", {"toolkit.__main__"}),
]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(known: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported toolkit module: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for mod, path in known.items():
        edges: dict[str, int] = {}
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                # `from toolkit.x import y`: y is a module when toolkit/x/y.py exists, else a name in toolkit.x
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for t in targets:
                while t and t not in known and "." in t:  # `import toolkit.x.y as z` of a name: its module
                    t = t.rsplit(".", 1)[0]
                if t in known and t != mod and t.startswith("toolkit"):
                    edges.setdefault(t, node.lineno)
        graph[mod] = edges
    return graph


def package_of(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path that returns to its start) per strongly connected component of size > 1."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def strong(v: str) -> None:  # Tarjan, iterative enough for a few hundred modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:  # a shortest path from the first member back to itself, inside the component
        start, members = comp[0], set(comp)
        prev, frontier, found = {start: None}, [start], None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph.get(v, ())):
                    if w == start:
                        found = v
                        break
                    if w in members and w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        path, v = [], found
        while v is not None:
            path.append(v)
            v = prev[v]
        out.append(list(reversed(path)) + [start])
    return out




def _describe(cycle: list[str], graph: dict[str, dict[str, int]], known: dict[str, Path]) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        line = graph[a].get(b)
        where = f"{known[a].relative_to(ROOT)}:{line}" if line else "(via its modules)"
        steps.append(f"{a} -> {b}  [{where}]")
    return "\n    ".join(steps)


def test_no_module_imports_itself_back():
    known = modules()
    graph = imports(known)
    found = cycles({m: set(e) for m, e in graph.items()})
    assert not found, "import cycles between modules:\n  " + "\n  ".join(
        _describe(c, graph, known) for c in found)


def test_no_package_imports_itself_back():
    known = modules()
    graph = imports(known)
    pkg: dict[str, set[str]] = defaultdict(set)
    example: dict[tuple[str, str], str] = {}
    for mod, edges in graph.items():
        for t, line in edges.items():
            a, b = package_of(mod), package_of(t)
            if a != b:
                pkg[a].add(b)
                example.setdefault((a, b), f"{known[mod].relative_to(ROOT)}:{line} imports {t}")
    found = cycles(pkg)
    msg = []
    for c in found:
        msg.append(" -> ".join(c) + "\n    " + "\n    ".join(example[(a, b)] for a, b in zip(c, c[1:])))
    assert not found, "import cycles between packages:\n  " + "\n  ".join(msg)


def test_the_shared_types_import_no_stage():
    known = modules()
    graph = imports(known)
    bad = [f"{known[m].relative_to(ROOT)}:{line} imports {t}"
           for m, edges in graph.items() if package_of(m) == "toolkit.schema"
           for t, line in edges.items() if package_of(t) != "toolkit.schema" and package_of(t) not in SCHEMA_MAY_IMPORT]
    assert not bad, "toolkit/schema must import no stage:\n  " + "\n  ".join(bad)


def test_the_load_generator_imports_nothing_above_it():
    """toolkit/loadgen sits below bench: bench drives it, and it never imports back up (no bench, spec, results,
    tune, serve), so the client, its workers and the cell loop can be read and run on their own."""
    known = modules()
    graph = imports(known)
    assert "toolkit.loadgen.cell" in known and "toolkit.loadgen" in graph["toolkit.bench.arm"]
    bad = [f"{known[m].relative_to(ROOT)}:{line} imports {t}"
           for m, edges in graph.items() if package_of(m) == "toolkit.loadgen"
           for t, line in edges.items() if package_of(t) not in LOADGEN_MAY_IMPORT]
    assert not bad, "toolkit/loadgen must import only " + ", ".join(sorted(LOADGEN_MAY_IMPORT)) + ":\n  " + \
        "\n  ".join(bad)
    stayed = sorted(n for n in ("client", "http", "share", "workers", "loadgen", "metrics")
                    if f"toolkit.bench.{n}" in known)
    assert not stayed, f"the load generator's modules live in toolkit/loadgen/, not toolkit/bench/: {stayed}"


def floor_of() -> dict[str, int]:
    return {p: i for i, (_, ps) in enumerate(FLOORS) for p in ps}


def test_every_package_has_a_floor():
    """The floors name every package there is (a new one gets its place), and only packages there are."""
    have = {package_of(m) for m in modules()}
    listed = [p for _, ps in FLOORS for p in ps]
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not twice, f"packages on two floors: {twice}"
    assert not have - set(listed), f"packages with no floor in FLOORS (give each one): {sorted(have - set(listed))}"
    assert not set(listed) - have, f"FLOORS lists packages that do not exist: {sorted(set(listed) - have)}"


def floor_breaches(graph: dict[str, dict[str, int]], known: dict[str, Path]) -> list[str]:
    floor = floor_of()
    bad = []
    for m, edges in graph.items():
        a = package_of(m)
        for t, line in edges.items():
            b = package_of(t)
            if a != b and floor[b] >= floor[a]:
                where = "a floor above it" if floor[b] > floor[a] else "a neighbour on its own floor"
                bad.append(f"{known[m].relative_to(ROOT)}:{line}: {a} (floor {floor[a]}) imports {t}, {where} "
                           f"(floor {floor[b]}: {FLOORS[floor[b]][0]})")
    return bad


def test_floors_import_only_downwards():
    known = modules()
    bad = floor_breaches(imports(known), known)
    assert not bad, "imports running up or across the house:\n  " + "\n  ".join(bad)


def test_the_floor_rule_catches_an_import_up_or_across():
    """The rule bites: an edge up a floor, or across to a neighbour, is named with its file and line."""
    known = modules()
    real = imports(known)
    graph = {m: dict(e) for m, e in real.items()}
    graph["toolkit.results.archive"]["toolkit.bench.matrix"] = 7      # results -> bench: up
    graph["toolkit.loadgen.cell"]["toolkit.workloads.loader"] = 9     # loadgen -> workloads: across
    graph["toolkit.schema.records"]["toolkit.specs.matrix"] = 11       # schema -> spec: across
    bad = sorted(set(floor_breaches(graph, known)) - set(floor_breaches(real, known)))
    assert any(b.startswith("toolkit/results/archive.py:7: toolkit.results") and "a floor above it" in b for b in bad)
    assert any(b.startswith("toolkit/loadgen/cell.py:9:") and "neighbour" in b for b in bad)
    assert any(b.startswith("toolkit/schema/records.py:11:") for b in bad)
    assert len(bad) == 3


def test_the_walk_sees_function_level_and_relative_imports(tmp_path):
    """The reader itself: an import inside a function and a relative import both count."""
    src = "def f():\n    from toolkit.results import archive\n"
    tree = ast.parse(src)
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    rel = ast.ImportFrom(module="y", names=[], level=1)
    assert nodes and _resolve("toolkit.bench.x", False, rel) == "toolkit.bench.y"
    assert _resolve("toolkit.bench", True, ast.ImportFrom(module="y", names=[], level=1)) == "toolkit.bench.y"
    known = modules()
    graph = imports(known)
    assert "toolkit.results.archive" in graph["toolkit.bench.matrix"]  # imported inside a method


def test_a_cycle_is_found_and_named():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


WRAPPERS = {"docker": "toolkit.docker_api", "ansible_runner": "toolkit.provision.runner"}


def test_one_wrapper_per_external_tool():
    """Only the tool's wrapper imports its SDK; everything else calls the wrapper."""
    bad = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top in WRAPPERS and WRAPPERS[top] != mod:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name} (use {WRAPPERS[top]})")
    assert not bad, "\n  ".join(["SDKs imported outside their wrapper:"] + bad)
