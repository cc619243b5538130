"""Tune integrity (issue 42, item 6): the winner replaces the preset only when a launch-aware interval of its
ratio to the preset lies above 1 and the confirmation ran in one sitting on one machine; an interrupted
confirmation runs every arm again; the committed H200 tune judged again under that rule."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.schema.tune import ConfirmationPlan, load_tune_state
from toolkit.tune import integrity
from toolkit.tune.integrity import ADOPT, KEEP, decide, spliced
from toolkit.tune.search import PairedRatio, Score

H200 = ROOT / "results/sglang-h200-tune-tune/20261204T180338Z-2eece0"
H200_MATRIX = ROOT / "benchmarks/sglang_h200/matrix-tune.yaml"
QUICK = ROOT / "results/quickstart-tune/20261203T083318Z-598b59"
ONE = {"baseline": ["GPU-a"], "eagle3": ["GPU-a"], "t01": ["GPU-a"]}


@pytest.mark.parametrize("score, adopt, words", [
    (Score(1.20, 1.05, 1.37, 6), True, "interval above 1"),
    (Score(1.17, 0.89, 1.55, 6), False, "includes 1"),
    (Score(0.80, 0.70, 0.92, 6), False, "slower than eagle3"),
    (Score(None, None, None, 0), False, "no held-out cell"),
])
def test_the_winner_must_beat_the_preset_with_an_interval_excluding_1(score, adopt, words):
    d = decide(score, "t01", "eagle3", ONE)
    assert d.adopt is adopt and d.says == (ADOPT if adopt else KEEP) and words in d.reason


def test_a_confirmation_on_two_machines_keeps_the_preset_whatever_its_numbers():
    machines = {"baseline": ["GPU-a"], "eagle3": ["GPU-a"], "t01": ["GPU-b"]}
    assert spliced(ONE) is None and spliced({}) is None
    assert "t01 on GPU-b" in spliced(machines)
    d = decide(Score(1.5, 1.3, 1.7, 6), "t01", "eagle3", machines)
    assert not d.adopt and d.says == KEEP and "not one sitting on one machine" in d.reason


def test_the_committed_h200_tune_judged_again_keeps_the_preset():
    """Its confirmation was spliced (baseline and preset at 18:14 on one GPU, the winner at 21:22 on
    another: the telemetry's GPU uuid per cell says so) and, on its numbers alone, t01 / eagle3 reaches 1."""
    from toolkit.tune.report import result

    res = result(load_tune_state(H200 / "tune.json"), H200)
    d = res.confirmation.decision
    assert res.decision == KEEP and not d.adopt
    assert d.machines["baseline"] == d.machines["eagle3"] != d.machines["t01"]
    assert "not one sitting on one machine" in d.reason and "includes 1" in d.reason
    assert d.vs_preset.ci_low < 1 < d.vs_preset.ci_high and d.vs_preset.speedup > 1
    # the winner and the preset both slower than the baseline (random weights: speculation never accepts)
    assert d.vs_baseline.ci_high < 1 and d.preset_vs_baseline.ci_high < 1 and d.cells == 6


def test_the_committed_quickstart_tune_judged_again_keeps_the_preset():
    from toolkit.tune.report import result

    d = result(load_tune_state(QUICK / "tune.json"), QUICK).confirmation.decision
    assert not d.adopt and d.cells == 1 and d.vs_preset.ci_high < 1  # 3 of its 4 cells drifted


def test_the_cli_judges_a_complete_session_again_and_writes_nothing(tmp_path):
    out = tmp_path / "tuned.yaml"
    r = run_cli("bench", "tune", str(H200_MATRIX), "--arm", "eagle3", "--resume", str(H200), "--out", str(out),
                "--json")
    assert r.returncode == 3, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["decision"] == KEEP and res["confirmation"]["decision"]["adopt"] is False
    assert "out" not in res and not out.exists()
    assert "judged again from its archives: nothing run" in r.stderr and "keep the preset" in r.stderr


# -- one sitting

def _loop(tmp_path: Path, plan: ConfirmationPlan | None, calls: list, status: str = "complete"):
    from toolkit.tune.loop import SearchLoop

    state = load_tune_state(QUICK / "tune.json")
    state.confirmation = plan
    m = SimpleNamespace(name="quickstart", baseline_arm="baseline", concurrency=[1, 4], seed=0, repeats=1)
    loop = SearchLoop(SimpleNamespace(model=m), None, "ngram", tmp_path, state, servers=None,
                      progress=__import__("toolkit.tune.progress", fromlist=["x"]).SearchProgress(),
                      save=lambda: None, log=lambda s: calls.append(("log", s)))

    def run_units(units, **kw):
        calls.append(("run", [u[1] for u in units], kw.get("fresh")))
        return status, [f"quickstart-tune-confirm/new{i}" for i in range(len(units))], {}

    loop._run_units = run_units
    return loop, state


@pytest.fixture
def no_archives(monkeypatch):
    from toolkit.tune import loop as loop_mod

    monkeypatch.setattr(loop_mod, "run_records", lambda run: {})
    monkeypatch.setattr(loop_mod.search, "pooled_cells", lambda *a, **k: {("coding", 1): PairedRatio(1.0, None, None, 0)})
    monkeypatch.setattr(integrity, "confirmation_machines", lambda runs: {"baseline": ["vm"], "ngram": ["vm"]})


def test_an_interrupted_confirmation_runs_every_arm_again(tmp_path, no_archives):
    calls: list = []
    old = ConfirmationPlan(runs=["quickstart-tune-confirm/old"], status="partial", trials=["ngram", "t05"],
                           requests=24)
    loop, state = _loop(tmp_path, old, calls)
    assert loop.confirm() == "complete"
    runs = [c for c in calls if c[0] == "run"]
    assert len(runs) == 1 and runs[0][2] is True  # fresh: nothing reused, nothing resumed
    arms = {a for unit in runs[0][1] for a in unit}
    assert {"baseline", "ngram", "t05"} <= arms  # every arm of the confirmation, in this sitting
    plan = state.confirmation
    assert plan.sitting == 1 and plan.abandoned == ["quickstart-tune-confirm/old"]
    assert plan.status == "complete" and all(r.startswith("quickstart-tune-confirm/new") for r in plan.runs)
    assert plan.machines == {"baseline": ["vm"], "ngram": ["vm"]}
    assert any("runs again in this sitting" in c[1] for c in calls if c[0] == "log")


def test_an_interrupted_confirmation_of_several_launches_runs_all_of_them_again(tmp_path, no_archives):
    """`confirm_launches: 3` (the session's recorded tune block): --resume runs the confirmation afresh, as one
    run of 3 launch rounds, never a resumed or partly reused one."""
    calls: list = []
    old = ConfirmationPlan(runs=["quickstart-tune-confirm/old"], status="partial", trials=["ngram", "t05"],
                           requests=24)
    loop, state = _loop(tmp_path, old, calls)
    state.tune["confirm_launches"] = 3
    seen = []
    inner = loop._run_units
    loop._run_units = lambda units, **kw: (seen.append(kw), inner(units, **kw))[1]
    assert loop.confirm() == "complete"
    assert [(kw["launches"], kw["fresh"]) for kw in seen] == [(3, True)]
    assert state.confirmation.sitting == 1 and state.confirmation.abandoned == ["quickstart-tune-confirm/old"]


def test_a_complete_confirmation_is_reused_not_run(tmp_path, no_archives):
    calls: list = []
    done = ConfirmationPlan(runs=["quickstart-tune-confirm/x"], status="complete", trials=["ngram", "t05"],
                            requests=24)
    loop, state = _loop(tmp_path, done, calls)
    assert loop.confirm() == "complete"
    assert not [c for c in calls if c[0] == "run"] and state.confirmation.runs == ["quickstart-tune-confirm/x"]


def test_a_fresh_run_never_resumes_an_earlier_partial_one(tmp_path, monkeypatch):
    from toolkit.tune import loop as loop_mod

    seen = {}
    monkeypatch.setattr(loop_mod, "_run_trials", lambda path, **kw: seen.update(kw) or (path, "complete"))
    monkeypatch.setattr(loop_mod.specs, "write_yaml", lambda *a, **k: None)
    (tmp_path / "quickstart-tune-confirm" / "old").mkdir(parents=True)
    (tmp_path / "quickstart-tune-confirm" / "old" / "manifest.json").write_text("{}")
    loop, _ = _loop(tmp_path, None, [])
    loop._execute("quickstart-tune-confirm", {"arms": ["baseline"], "workloads": {}, "concurrency": [1],
                                              "repeats": 1}, "h", fresh=True)
    assert seen["resume"] is None
