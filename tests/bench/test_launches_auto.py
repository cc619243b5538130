"""`launches_auto:` (sequential launches): the rule stops once every paired speed-up's CI is within
±halfwidth_pct, never before `launches` rounds, always at `max`; and end to end on the embedded engine a
run that cannot reach its width runs `max` rounds and is complete, with the record of why it stopped."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.bench.test_launches_e2e import small_quickstart
from tests.conftest import ROOT, run_cli
from toolkit.bench import derive
from toolkit.bench.matrix import _auto_round
from toolkit.specs.matrix import LaunchesAuto
from toolkit.results import compact
from toolkit.schema.manifest import Speedup


def _plan(launches: int = 2, halfwidth: float = 10.0, top: int = 5):
    m = SimpleNamespace(launches=launches, launches_auto=LaunchesAuto(halfwidth_pct=halfwidth, max=top),
                        baseline_arm="baseline", seed=0)
    return SimpleNamespace(m=m, stopped_after=None)


def _rows(*cis, rounds=3):
    return [Speedup(arm="ngram", domain="coding", concurrency=c, ci_low=lo, ci_high=hi, rounds=rounds)
            for c, (lo, hi) in enumerate(cis, 1)]


@pytest.mark.parametrize("r, cis, stop, why", [
    (0, [(0.99, 1.01)], False, None),                 # narrow, but fewer than `launches` rounds
    (1, [(0.99, 1.01)], False, None),                 # narrow, but the first stage is 3 rounds (Stein's s0)
    (2, [(0.95, 1.05), (0.92, 1.08)], True, "narrow"),  # widest ±8.3% <= ±10%
    (2, [(0.95, 1.05), (0.80, 1.25)], False, None),     # ±25% > ±10%: one more round
    (2, [(0.95, 1.05), (None, None)], False, None),     # a speed-up with no CI yet is not narrow
    (4, [(0.50, 2.00)], True, "max"),                 # the fifth round is the most
])
def test_the_stopping_rule(monkeypatch, r, cis, stop, why) -> None:
    asked = {}
    monkeypatch.setattr(derive, "speedups", lambda *a, **k: asked.update(k) or _rows(*cis))
    plan, ledger, said = _plan(), SimpleNamespace(cells=[], records={}, auto=None), []
    at = {"r": r, "stop": False}
    _auto_round(plan, ledger, at, said.append)
    assert at["stop"] is stop
    if r >= 2:
        assert asked["stage1"] == 3  # the rows' CIs are Stein's: the variance of the first 3 rounds
    if stop:
        assert plan.stopped_after == r + 1 and ledger.auto.stopped == why and ledger.auto.rounds_run == r + 1
        assert ledger.auto.widest_pct == max(derive.halfwidth_pct(x) for x in _rows(*cis))
        assert ledger.auto.rule == "stein-two-stage" and ledger.auto.stage1_rounds == 3
    else:
        assert plan.stopped_after is None and ledger.auto is None
    assert bool(said) is (r >= 1)  # each round from `launches` on says what the rule saw


def test_a_row_short_of_the_first_stage_is_not_narrow(monkeypatch) -> None:
    monkeypatch.setattr(derive, "speedups", lambda *a, **k: _rows((0.99, 1.01), rounds=2))
    plan, ledger = _plan(), SimpleNamespace(cells=[], records={}, auto=None)
    at = {"r": 2, "stop": False}
    _auto_round(plan, ledger, at, lambda line: None)
    assert at["stop"] is False


def test_halfwidth_is_on_the_log_scale() -> None:
    assert derive.halfwidth_pct(Speedup(arm="a", domain="d", concurrency=1, ci_low=0.8, ci_high=1.25)) == \
        pytest.approx(25.0)
    assert derive.halfwidth_pct(Speedup(arm="a", domain="d", concurrency=1, ci_low=None, ci_high=1.1)) is None


def test_bad_values_are_spec_errors(tmp_path: Path) -> None:
    for extra, words in (("launches: 1\nlaunches_auto: {halfwidth_pct: 10, max: 4}\n", "launches: 2"),
                         ("launches: 3\nlaunches_auto: {halfwidth_pct: 10, max: 3}\n", "must exceed"),
                         ("launches: 2\nlaunches_auto: {halfwidth_pct: 0, max: 4}\n", "halfwidth_pct")):
        spec = tmp_path / "m.yaml"
        spec.write_text((ROOT / "envs/matrices/quickstart.yaml").read_text().replace(
            "environment: ../local-cpu-pair.yaml", f"environment: {ROOT / 'envs/local-cpu-pair.yaml'}") + extra)
        r = run_cli("validate", str(spec))
        assert r.returncode == 2 and words in r.stderr + r.stdout and "Traceback" not in r.stderr


@pytest.mark.slow
def test_a_width_never_reached_runs_the_most_rounds_and_is_complete(tmp_path: Path) -> None:
    spec = small_quickstart(tmp_path, "launches: 2\nlaunches_auto: {halfwidth_pct: 0.001, max: 3}\n")
    r = run_cli("bench", "matrix", str(spec), "--results", str(tmp_path / "results"), "--json", timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    summary = json.loads(compact.read_text(run / "summary.json"))
    auto = summary["derived"]["launches_auto"]
    assert auto["stopped"] == "max" and auto["rounds_run"] == 3 and auto["widest_pct"] > 0.001
    assert summary["status"] == "complete" and summary["derived"]["cells_planned"] == 2 * 3
    assert {(c["arm"], c["launch"]) for c in summary["cells"]} == {(a, n) for a in ("baseline", "ngram") for n in range(3)}
    assert "launches_auto: after round 2" in r.stderr and "the most rounds (3), stopping" in r.stderr
