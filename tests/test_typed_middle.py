"""Issue 44 item 3, held: a function in toolkit/ that returns a plain dict says why a dict is the right type
there (`# data-keyed` or `# json-edge`, counted by benchmarks/typed_middle.py), so a record returned as a dict
fails here, and a marker left on a function that no longer returns one is named. docs/lab/speed.md has the
figures."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNMARKED_CEILING = 0  # unmarked plain-dict functions allowed (was 35 before the records were typed)


def _script():
    spec = importlib.util.spec_from_file_location("typed_middle", ROOT / "benchmarks" / "typed_middle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_plain_dict_says_why_and_no_marker_is_stale() -> None:
    got = _script().measure()
    assert len(got["dicts"]) <= UNMARKED_CEILING, (
        "functions returning a plain dict with no `# data-keyed: <keys>` or `# json-edge: <document>` marker: type "
        "the record (a schema model, or a dataclass beside its one user), or mark it where the marker is true:\n  "
        + "\n  ".join(got["dicts"]))
    assert not got["stale markers"], "markers on functions that return no dict:\n  " + "\n  ".join(got["stale markers"])


def test_the_count_finds_an_unmarked_record_and_a_stale_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "toolkit"
    (pkg / "bench").mkdir(parents=True)
    (pkg / "bench" / "ledger.py").write_text("class Ledger:\n    def __init__(self):\n        self.cells: list = []\n")
    (pkg / "mod.py").write_text(textwrap.dedent('''
        def record() -> dict:
            return {"host": "h", "gpus": "all"}

        def by_arm(arms):  # data-keyed: arm
            return {a: 1 for a in arms}

        # json-edge: the --json document
        def document():
            return dict(ok=True)

        def typed() -> int:  # data-keyed: nothing, any more
            return 1
        '''))
    tm = _script()
    monkeypatch.setattr(tm, "ROOT", tmp_path)
    monkeypatch.setattr(tm, "PKG", pkg)
    got = tm.measure()
    assert [n.split()[-1] for n in got["dicts"]] == ["record"]
    assert [n.split()[-1] for n in got["data-keyed"]] == ["by_arm"]
    assert [n.split()[-1] for n in got["json-edge"]] == ["document"]
    assert [n.split()[1] for n in got["stale markers"]] == ["typed"]


def test_no_function_in_bench_runs_over_60_lines() -> None:
    """Issue 44's acceptance: no function over 60 lines in toolkit/bench/ (the merge of engines as arms grew
    reproduce() to 62 before this test held the line)."""
    long = _script().measure()["long"]
    assert not long, "functions over 60 lines in toolkit/bench/ (split them):\n  " + "\n  ".join(long)


def test_the_length_rule_finds_a_long_bench_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "toolkit"
    (pkg / "bench").mkdir(parents=True)
    (pkg / "bench" / "ledger.py").write_text("class Ledger:\n    def __init__(self):\n        pass\n")
    (pkg / "bench" / "long.py").write_text("def f():\n" + "    x = 1\n" * 60 + "\ndef g():\n" + "    x = 1\n" * 59)
    tm = _script()
    monkeypatch.setattr(tm, "ROOT", tmp_path)
    monkeypatch.setattr(tm, "PKG", pkg)
    assert [n.split()[1] for n in tm.measure()["long"]] == ["f"]
