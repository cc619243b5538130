"""The search on numbers only: trial choice, rung sizes and requests, pooled paired speedups (with the
baseline bracketed by its A/A twin), scores, survivors, the early stop and the winner per cell. Synthetic
per-request records with known speedups; every result is deterministic."""

from __future__ import annotations

import math
import random

import pytest

from toolkit.schema.records import RequestRecord
from toolkit.tune import search
from toolkit.tune.search import PairedRatio, Score

CELLS = [("coding", 1), ("coding", 4), ("math", 1), ("math", 4)]


def recs(arm: str, domain: str, conc: int, e2e: list[float], tokens: int = 48, warmup: int = 1) -> list[RequestRecord]:
    """One cell's records: `warmup` excluded ones first, then one per e2e value (prompt ids p0, p1, ...)."""
    out = [RequestRecord(arm=arm, domain=domain, concurrency=conc, prompt_id="w", warmup=True, send_s=0,
                         e2e_ms=1.0, output_tokens=tokens) for _ in range(warmup)]
    out += [RequestRecord(arm=arm, domain=domain, concurrency=conc, prompt_id=f"p{i}", send_s=0, e2e_ms=e,
                          output_tokens=tokens) for i, e in enumerate(e2e)]
    return out


def rung(speedups: dict[str, dict[tuple, float]], n: int, rng: random.Random, noise: float = 0.05,
         drift: float = 1.0) -> dict[tuple, list[RequestRecord]]:
    """A rung's records: the baseline, each trial at its true speedup per cell, the baseline again (its
    times multiplied by `drift`: load that changed during the cell). Prompt costs differ; noise is small."""
    out = {}
    for d, c in CELLS:
        cost = [rng.uniform(200, 800) for _ in range(n)]
        jitter = lambda: math.exp(rng.gauss(0, noise))  # noqa: E731
        out[("baseline", d, c)] = recs("baseline", d, c, [x * jitter() for x in cost])
        for trial, sp in speedups.items():
            out[(trial, d, c)] = recs(trial, d, c, [x / sp[(d, c)] * math.sqrt(drift) * jitter() for x in cost])
        out[("baseline-again", d, c)] = recs("baseline-again", d, c, [x * drift * jitter() for x in cost])
    return out


def test_choose_trials_takes_all_or_a_seeded_sample_in_grid_order():
    cands = [{"k": i} for i in range(12)]
    assert search.choose_trials(cands[:4], 6, seed=0) == cands[:4]
    a, b = search.choose_trials(cands, 6, seed=0), search.choose_trials(cands, 6, seed=0)
    assert a == b and len(a) == 6 and a == sorted(a, key=lambda c: c["k"])
    assert search.choose_trials(cands, 6, seed=1) != a


@pytest.mark.parametrize("n, eta, sizes", [(6, 2, [6, 3, 2]), (2, 2, [2]), (8, 2, [8, 4, 2]), (9, 3, [9, 3]),
                                           (10, 3, [10, 4, 2]), (3, 2, [3, 2])])
def test_schedule(n, eta, sizes):
    assert search.schedule(n, eta) == sizes


def test_rung_requests_double_the_pooled_total():
    added = [search.rung_requests(4, 2, k) for k in range(4)]
    assert added == [4, 4, 8, 16]
    assert [sum(added[:k + 1]) for k in range(4)] == [4, 8, 16, 32]
    assert [search.rung_requests(2, 3, k) for k in range(3)] == [2, 4, 12]


def test_pooled_cells_pairs_within_rungs_and_pools_across_them():
    r0 = {("t", "coding", 1): recs("t", "coding", 1, [100, 200]), ("baseline", "coding", 1):
          recs("baseline", "coding", 1, [200, 400])}
    r1 = {("t", "coding", 1): recs("t", "coding", 1, [300, 300]), ("baseline", "coding", 1):
          recs("baseline", "coding", 1, [600, 600])}
    cells = search.pooled_cells([r0, r1], "t", "baseline")
    r = cells[("coding", 1)]
    assert r.ratio == pytest.approx(2.0) and r.n_pairs == 4  # the same prompt ids in two rungs: 4 pairs
    assert r.ci_low == pytest.approx(2.0) and r.ci_high == pytest.approx(2.0)
    # a rung the trial did not run in adds nothing
    assert search.pooled_cells([r0, {("baseline", "coding", 1): recs("baseline", "coding", 1, [1, 1])}],
                               "t", "baseline")[("coding", 1)].n_pairs == 2


def test_the_baseline_measured_before_and_after_brackets_a_linear_drift():
    # the machine slows down 3x during the cell: baseline 100 ms before, 300 ms after; the trial, measured in
    # between at twice the baseline's speed, takes 100 ms against a midpoint baseline of 200 ms
    r = {("t", "math", 1): recs("t", "math", 1, [100] * 4), ("baseline", "math", 1): recs("baseline", "math", 1, [100] * 4),
         ("baseline-again", "math", 1): recs("baseline-again", "math", 1, [300] * 4)}
    assert search.pooled_cells([r], "t", "baseline")[("math", 1)].ratio == pytest.approx(1.0)
    assert search.pooled_cells([r], "t", "baseline", "baseline-again")[("math", 1)].ratio == pytest.approx(2.0)
    aa = search.pooled_cells([r], "baseline-again", "baseline")[("math", 1)]
    assert aa.ratio == pytest.approx(1 / 3) and aa.ci_high < 1  # the A/A check sees the drift


def test_score_is_the_geometric_mean_with_a_log_space_interval():
    s = search.score({("a", 1): PairedRatio(2.0, 1.8, 2.2, 0),
                      ("b", 1): PairedRatio(0.5, 0.4, 0.6, 0)})
    assert s.geomean == pytest.approx(1.0) and s.cells == 2
    assert s.low < 1.0 < s.high
    assert search.score({("a", 1): PairedRatio(None, None, None, 0)}) == Score(None, None, None, 0)


def test_ranking_survivors_and_the_early_stop():
    scores = {"t0": Score(1.1, 0.9, 1.3, 4), "t1": Score(1.5, 1.4, 1.6, 4), "t2": Score(None, None, None, 0),
              "t3": Score(1.1, 1.0, 1.2, 4)}
    assert search.ranking(scores) == ["t1", "t0", "t3", "t2"]  # ties by name, unmeasured last
    assert search.survivors(scores, 2) == ["t1", "t0"]
    assert search.settled(scores)  # 1.4 > 1.3 and > 1.2
    scores["t0"] = Score(1.2, 0.9, 1.45, 4)
    assert not search.settled(scores)


def test_launch_noise_is_added_once_and_keeps_a_relaunch_from_settling_a_rung():
    """The H200 tune's first rung (results/sglang-h200-tune-tune/20261204T180338Z-2eece0): one launch per trial,
    six cells each with request-level intervals of a few percent. Without the launch noise the leader's interval
    lay above every other trial's and the search stopped; with the default launch CV (10 %) on both sides,
    t01 (0.52x) and t03 (0.46x) overlap, so a second rung must run (a relaunch can move a trial that much)."""
    from toolkit.stats import DEFAULT, quantile

    def cells(g, half):  # six cells with the same ratio and a +-half (log) interval
        return {(d, c): PairedRatio(g, g * math.exp(-half), g * math.exp(half), 0)
                for d in ("coding", "encyclopedic") for c in (1, 8, 32)}

    rung = {"t00": cells(0.262, 0.09), "t01": cells(0.520, 0.08), "t02": cells(0.338, 0.09), "t03": cells(0.460, 0.08)}
    plain = {t: search.score(c) for t, c in rung.items()}
    assert search.settled(plain)
    noisy = {t: search.score(c, search.launch_var(lambda arm: DEFAULT, t, "baseline", 1)) for t, c in rung.items()}
    assert not search.settled(noisy) and search.ranking(noisy)[:2] == ["t01", "t03"]
    # once per launch, not per cell: six cells do not shrink it, two rungs (two launches each side) halve it
    one = search.launch_var(lambda arm: DEFAULT, "t01", "baseline", 1)
    assert one == pytest.approx(2 * DEFAULT.var)
    assert search.launch_var(lambda arm: DEFAULT, "t01", "baseline", 2) == pytest.approx(one / 2)
    half_width = math.log(noisy["t01"].high / noisy["t01"].geomean)
    assert half_width >= quantile(0.975) * math.sqrt(one) - 1e-9
    assert search.launch_var(None, "t01", "baseline", 1) == 0.0  # one shared server: requests only


def test_cell_winners_and_speculation_off():
    per = {"t0": {("coding", 1): PairedRatio(1.4, 1.2, 1.6, 8),
                  ("coding", 4): PairedRatio(0.7, 0.6, 0.8, 8)},
           "t1": {("coding", 1): PairedRatio(1.2, 1.0, 1.4, 16),
                  ("coding", 4): PairedRatio(0.8, 0.7, 0.95, 16)}}
    w = {(x["domain"], x["concurrency"]): x for x in search.cell_winners(per)}
    assert w[("coding", 1)]["trial"] == "t0" and not w[("coding", 1)]["speculation_off"]
    assert w[("coding", 4)]["trial"] == "t1" and w[("coding", 4)]["speculation_off"]


def simulate(truth: dict[str, dict[tuple, float]], seed: int, first: int = 4, eta: int = 2) -> tuple[str, list[list[str]]]:
    """The session's decision loop (toolkit.tune.session._search) on synthetic rungs."""
    rng = random.Random(seed)
    trials = list(truth)
    sizes = search.schedule(len(trials), eta)
    rungs, plan, k = [], [trials], 0
    while True:
        n = search.rung_requests(first, eta, k)
        rungs.append(rung({t: truth[t] for t in plan[k]}, n, rng))
        scores = {t: search.score(search.pooled_cells(rungs, t, "baseline", "baseline-again")) for t in plan[k]}
        if k + 1 < len(sizes) and not search.settled(scores):
            plan.append(search.survivors(scores, sizes[k + 1]))
            k += 1
        else:
            return search.ranking(scores)[0], plan


def test_successive_halving_finds_the_best_trial_deterministically():
    speed = {"t0": 0.9, "t1": 1.05, "t2": 1.3, "t3": 1.0, "t4": 0.8, "t5": 1.1}
    truth = {t: {cell: s * (1.1 if cell[1] == 1 else 0.95) for cell in CELLS} for t, s in speed.items()}
    best, plan = simulate(truth, seed=3)
    assert best == "t2"
    assert plan == simulate(truth, seed=3)[1]  # the same data, the same choices
    assert len(plan[0]) == 6 and all(len(p) < len(q) for p, q in zip(plan[1:], plan))


def test_a_clear_leader_stops_the_search_early():
    truth = {t: {cell: s for cell in CELLS} for t, s in {"t0": 0.5, "t1": 3.0, "t2": 0.6, "t3": 0.55}.items()}
    best, plan = simulate(truth, seed=1, first=8)
    assert best == "t1" and len(plan) == 1  # settled after the first rung: no more requests spent


def test_the_report_shows_the_interval_each_rung_was_decided_on():
    """The H200 session (trials on servers of their own): its rungs were decided with the launches' noise in each
    score; the report's trial table must carry those intervals, not the narrower requests-only ones (t01 and t03
    overlap in the decision: [0.507, 0.757] and [0.458, 0.684]; requests only they would not)."""
    from pathlib import Path

    from toolkit.schema.tune import load_tune_state
    from toolkit.tune.report import build_tune_report, result

    folder = Path(__file__).resolve().parents[2] / "results" / "sglang-h200-tune-tune" / "20261204T180338Z-2eece0"
    state = load_tune_state(folder / "tune.json")
    res = result(state, folder)
    last = {t: sc for r in state.rungs if r.status == "complete" for t, sc in r.scores.items()}
    assert {t.name for t in res.trials} == set(last) == {"t00", "t01", "t02", "t03"}
    for t in res.trials:
        assert (t.score.geomean, t.score.ci_low, t.score.ci_high) == (last[t.name].geomean, last[t.name].low,
                                                                    last[t.name].high)
    t01, t03 = (next(t.score for t in res.trials if t.name == n) for n in ("t01", "t03"))
    assert t03.ci_high > t01.ci_low  # they overlap, as when rung 1 was decided
    assert res.best.score == t01
    from toolkit.results.report import render_text

    assert "launches' noise is in it" in render_text(build_tune_report(res))


def _launches(per_launch: dict[int, float], cells=CELLS[:2], n: int = 12) -> dict[tuple, list[RequestRecord]]:
    """A confirmation run of len(per_launch) launch rounds: in round k the trial is per_launch[k] x as fast as
    the baseline in every cell, on the same prompts (prompt costs differ; no other noise)."""
    rng = random.Random(7)
    out: dict[tuple, list[RequestRecord]] = {}
    for d, c in cells:
        cost = [rng.uniform(200, 800) for _ in range(n)]
        for k, sp in per_launch.items():
            for arm, f in (("baseline", 1.0), ("t01", 1 / sp)):
                out.setdefault((arm, d, c), []).extend(
                    r.model_copy(update={"launch": k}) for r in recs(arm, d, c, [x * f for x in cost]))
    return out


def test_confirmation_launches_are_the_unit_of_the_decision_interval():
    """Two launch rounds whose speed-ups differ a lot (1.5x, then 0.9x in every cell): the decision interval is
    the t-interval over the two rounds' geometric means (df 1), by hand; the same requests taken as one launch
    give a narrow request-only interval, so an interval that dropped the launches' spread would fail here."""
    from toolkit.stats import quantile

    runs = [_launches({0: 1.5, 1: 0.9})]
    got = search.round_score(runs, "t01", "baseline", CELLS[:2])
    logs = [math.log(1.5), math.log(0.9)]
    m = sum(logs) / 2
    h = quantile(0.975, 1) * math.sqrt(sum((x - m) ** 2 for x in logs) / 1 / 2)
    assert got.cells == 2
    assert (got.geomean, got.low, got.high) == pytest.approx((math.exp(m), math.exp(m - h), math.exp(m + h)))
    assert got.low < 0.5 and got.high > 2.5  # df 1: t 12.7 over a spread of 1.5 / 0.9

    pooled = [{k: [r.model_copy(update={"launch": 0}) for r in v] for k, v in runs[0].items()}]
    assert search.round_score(pooled, "t01", "baseline", CELLS[:2]) is None  # one round: nothing to take it from
    one = search.score(search.pooled_cells(pooled, "t01", "baseline"))
    assert got.high / got.low > 5 * (one.high / one.low)

    # rounds that agree: a narrow interval
    agree = search.round_score([_launches({0: 1.2, 1: 1.2})], "t01", "baseline", CELLS[:2])
    assert agree.geomean == pytest.approx(1.2) and agree.high / agree.low == pytest.approx(1.0)
    # only the usable cells count
    assert search.round_score(runs, "t01", "baseline", CELLS[:1]).cells == 1
    assert search.round_score(runs, "t01", "baseline", []) is None


def test_confirmation_cells_of_launch_rounds_take_the_rounds_own_variance():
    """Per cell, as the runner's speed-ups with launches > 1: one paired ratio per round, a t-interval over the
    rounds (the cell's own variance); a cell measured in one round falls back to the default launch CV."""
    from toolkit.stats import quantile

    cells = search.round_cells([_launches({0: 1.5, 1: 0.9, 2: 1.2})], "t01", "baseline")
    assert set(cells) == set(CELLS[:2])
    logs = [math.log(x) for x in (1.5, 0.9, 1.2)]
    m = sum(logs) / 3
    h = quantile(0.975, 2) * math.sqrt(sum((x - m) ** 2 for x in logs) / 2 / 3)
    for r in cells.values():
        assert (r.ratio, r.ci_low, r.ci_high) == pytest.approx((math.exp(m), math.exp(m - h), math.exp(m + h)))
        assert r.rounds == 3 and r.n_pairs == 36 and "t-interval over 3 rounds" in r.ci_method
    single = search.round_cells([_launches({0: 1.5})], "t01", "baseline")[CELLS[0]]
    assert single.rounds == 1 and "default launch CV" in single.ci_method
