"""Only the plan reads the Matrix spec (issue 44): toolkit/bench/plan.py is the one runner module that imports the
Matrix spec model or loads a spec file; the stages after it (the runner, its arms, ledger, derivation, sweep,
slots, inputs, targets) take the typed RunPlan, its cells' CellLoad and the target and engine objects. The
commands that hand a spec to the runner (bench matrix/noise, results reproduce) load it and call run_matrix,
which calls plan_run first."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "toolkit" / "bench"
PLAN = "plan.py"
ENTRY = {"commands.py", "noise.py", "reproduce.py"}  # load a Matrix file, hand it to run_matrix
# what plan_run (and bench tune's preflight, through plan_target) calls while it plans: the slots of a spec, the
# target's preflight of a spec not yet planned, the spec files archived as inputs/ (they take LoadedSpecs)
PLANNING = {"slots.py", "targets.py", "inputs.py", "sources.py"}  # sources: the Environments arms come from


def spec_reads(path: Path) -> list[str]:
    """Where a module imports toolkit.specs.matrix (or the Matrix model) or calls load_spec / plan_run's reader."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {a.name for a in node.names}
            if node.module == "toolkit.specs.matrix" or (node.module == "toolkit.specs" and
                                                         names & {"load_spec", "load_marked", "Matrix"}):
                found.append(f"{path.name}:{node.lineno} from {node.module} import {', '.join(sorted(names))}")
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if name in {"load_spec", "load_marked"}:
                found.append(f"{path.name}:{node.lineno} {name}(...)")
    return found


def test_only_the_plan_reads_the_matrix_spec() -> None:
    readers = {p.name: spec_reads(p) for p in sorted(BENCH.glob("*.py"))}
    assert readers[PLAN], "plan.py reads the Matrix spec: this test would pass on any tree without it"
    stray = [hit for name, hits in readers.items() if name != PLAN and name not in ENTRY for hit in hits]
    assert not stray, f"runner modules reading the Matrix spec (take the RunPlan instead): {stray}"


def test_the_check_sees_a_stray_reader(tmp_path: Path) -> None:
    """The control: a module that imports the model or loads a spec file is caught."""
    mod = tmp_path / "stray.py"
    mod.write_text("from toolkit.specs.matrix import Matrix\nfrom toolkit.specs import load_spec\n"
                   "def f(p):\n    return load_spec(p, expect='Matrix')\n")
    assert len(spec_reads(mod)) == 3


def test_run_matrix_plans_first_and_the_stages_take_the_plan() -> None:
    """run_matrix hands the spec to plan_run and to nothing else; every other function of the stages after the
    plan takes no LoadedSpec or Matrix parameter (they take the RunPlan)."""
    tree = ast.parse((BENCH / "matrix.py").read_text())
    run = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_matrix")
    uses = [n for n in ast.walk(run) if isinstance(n, ast.Name) and n.id == "spec"]
    calls = [n for n in ast.walk(run) if isinstance(n, ast.Call) and any(a is u for a in n.args for u in uses)]
    assert [c.func.id for c in calls] == ["plan_run"] and len(uses) == 1
    taking = []
    for path in sorted(BENCH.glob("*.py")):
        if path.name == PLAN or path.name in ENTRY | PLANNING:
            continue
        for fn in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)):
            for a in fn.args.args + fn.args.kwonlyargs:
                ann = ast.unparse(a.annotation) if a.annotation is not None else ""
                if fn.name != "run_matrix" and ("LoadedSpec" in ann or ann == "Matrix"):
                    taking.append(f"{path.name}:{fn.lineno} {fn.name}({a.arg}: {ann})")
    assert not taking, taking
