"""`launches:` in the Matrix: the hash of a spec that does not name it (or says 1) is the one it had, the
plan's cells carry the launch (keys unchanged for launch 0), rounds are seeded shuffles recorded in the
manifest, and a bad value is refused like any spec error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_cli
from toolkit.bench.plan import plan_rounds, plan_run
from toolkit.schema.keys import cell_key
from toolkit.specs import load_spec, spec_hash

MATRIX = textwrap.dedent("""\
    kind: Matrix
    name: m
    environment: {env}
    arms: [baseline, ngram]
    workloads: [coding]
    concurrency: [1, 4]
    requests: 4
    """)


def write(tmp: Path, extra: str = "") -> Path:
    f = tmp / "m.yaml"
    f.write_text(MATRIX.format(env=ROOT / "envs/local-cpu.yaml") + extra)
    return f


def test_one_launch_keeps_the_matrix_hash_and_more_change_it(tmp_path: Path) -> None:
    plain = spec_hash(load_spec(write(tmp_path)))
    assert spec_hash(load_spec(write(tmp_path, "launches: 1\n"))) == plain
    assert spec_hash(load_spec(write(tmp_path, "launches: 3\n"))) != plain  # what a run measures changed
    assert spec_hash(load_spec(write(tmp_path, "warmup_launch: false\n"))) == plain
    assert spec_hash(load_spec(write(tmp_path, "warmup_launch: true\n"))) != plain


def test_cells_per_launch_with_old_keys_for_launch_0(tmp_path: Path) -> None:
    plan = plan_run(load_spec(write(tmp_path, "launches: 3\nrepeats: 2\n")))
    cells = plan.todo["baseline"]
    assert plan.cells_planned == 2 * 1 * 2 * 2 * 3 and len(cells) == 12
    assert [c.launch for c in cells] == [0] * 4 + [1] * 4 + [2] * 4  # launch by launch
    assert cells[0].key == cell_key("baseline", "coding", 1, 0) == "baseline__coding__c1__r0"
    assert cells[-1].key == "baseline__coding__c4__r1__l2"
    assert plan.prompts(cells[0]) == plan.prompts(cells[8])  # the same prompts in every launch
    m = plan.m
    assert plan.rounds == plan_rounds(m, plan.round_seed) and len(plan.rounds) == 3
    assert all(sorted(r) == ["baseline", "ngram"] for r in plan.rounds)
    assert plan_rounds(m, 5) == plan_rounds(m, 5)  # seeded: a recorded round_seed replays the orders
    one = plan_run(load_spec(write(tmp_path)))
    assert one.rounds == [["baseline", "ngram"]] and {c.launch for c in one.todo["ngram"]} == {0}


def test_rounds_shuffle_the_arm_order(tmp_path: Path) -> None:
    m = load_spec(write(tmp_path, "launches: 12\n")).model
    orders = {tuple(r) for r in plan_rounds(m)}
    assert orders == {("baseline", "ngram"), ("ngram", "baseline")}  # both orders occur over 12 rounds


def test_round_order_is_drawn_afresh_per_run_and_recorded(tmp_path: Path) -> None:
    """The first round's order (whose first arm gets the cold launch) differs between runs of one spec, comes
    from a per-run seed recorded in the manifest, and replays from it; the prompts' seed is untouched."""
    from toolkit.bench.plan import run_manifest

    spec = load_spec(write(tmp_path, "launches: 2\n"))
    plans = [plan_run(spec) for _ in range(24)]
    assert len({p.round_seed for p in plans}) > 1
    assert {p.rounds[0][0] for p in plans} == {"baseline", "ngram"}  # the cold launch lands on either arm
    again = plan_run(spec, round_seed=plans[0].round_seed)
    assert again.rounds == plans[0].rounds
    assert plans[0].prompts(plans[0].todo["baseline"][0]) == plans[1].prompts(plans[1].todo["baseline"][0])
    manifest = run_manifest(plans[0], {})
    assert manifest.round_seed == plans[0].round_seed and manifest.rounds == plans[0].rounds


def test_resume_keeps_the_recorded_round_seed(tmp_path: Path) -> None:
    from toolkit.schema.manifest import Manifest

    spec = load_spec(write(tmp_path, "launches: 2\n"))
    first = plan_run(spec)
    resumed = Manifest(run_id="x", matrix={"hash": first.hashes["matrix"]}, rounds=first.rounds,
                       round_seed=first.round_seed)
    plan = plan_run(spec, resumed=resumed, done=set())
    assert plan.rounds == first.rounds and plan.round_seed == first.round_seed
    assert Manifest(run_id="old").round_seed is None  # older archives: no seed, stated as the Matrix's


def test_resume_plans_only_the_missing_launch_cells(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "launches: 2\n"))
    done = {c.key for c in plan_run(spec).todo["baseline"]} | {"ngram__coding__c1__r0"}
    plan = plan_run(spec, done=done)
    assert plan.todo["baseline"] == [] and [c.key for c in plan.todo["ngram"]] == [
        "ngram__coding__c4__r0", "ngram__coding__c1__r0__l1", "ngram__coding__c4__r0__l1"]
    assert [c.key for c in plan.launch_todo("ngram", 1)] == ["ngram__coding__c1__r0__l1", "ngram__coding__c4__r0__l1"]


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_value_is_refused_with_exit_2(tmp_path: Path, value: str) -> None:
    res = run_cli("validate", str(write(tmp_path, f"launches: {value}\n")))
    assert res.returncode == 2 and "launches" in res.stderr and "m.yaml:8" in res.stderr
    assert "Traceback" not in res.stderr


# -- the paired speed-up with the launch as the unit (toolkit/bench/derive.py)

def _recs(arm: str, rate: float, launch: int, seed: int, n: int = 40):
    import numpy as np

    from toolkit.schema.records import RequestRecord

    rng = np.random.default_rng(seed)
    return [RequestRecord(arm=arm, domain="coding", concurrency=1, prompt_id=f"p{i}", send_s=0.0, ttft_ms=10,
                          e2e_ms=64 / rate * 1000 * float(rng.uniform(0.95, 1.05)), output_tokens=64, launch=launch)
            for i in range(n)]


def _cells(arms=("spec", "base")):
    from toolkit.schema.records import CellSummary, Stat

    return [CellSummary(arm=a, domain="coding", concurrency=1, output_len=64, workload_hash="h",
                        metrics={"output_tok_s": Stat(mean=100.0, p50=100.0, n=40)}) for a in arms]


def test_one_round_speedup_is_widened_by_launch_noise_unless_one_server() -> None:
    from toolkit.bench import derive

    records = {("spec", "coding", 1): _recs("spec", 150, 0, 1), ("base", "coding", 1): _recs("base", 100, 0, 2)}
    boot = derive.paired_ratio(records[("spec", "coding", 1)], records[("base", "coding", 1)])
    (row,) = derive.speedups(_cells(), records, "base")
    assert row.rounds == 1 and row.paired_ratio == boot.ratio
    assert row.ci_low < boot.ci_low and row.ci_high > boot.ci_high  # two launches' noise added
    assert "default launch CV 10%" in row.ci_method
    (shared,) = derive.speedups(_cells(), records, "base", shared={"spec"})
    assert (shared.ci_low, shared.ci_high) == (boot.ci_low, boot.ci_high)
    assert "one shared server" in shared.ci_method


def test_speedup_over_rounds_is_a_t_interval_of_per_round_ratios() -> None:
    from toolkit.bench import derive

    rates = {0: (150, 100), 1: (140, 105), 2: (160, 98)}  # each round: its own launches of both arms
    records = {("spec", "coding", 1): [], ("base", "coding", 1): []}
    for la, (s, b) in rates.items():
        records[("spec", "coding", 1)] += _recs("spec", s, la, 10 + la)
        records[("base", "coding", 1)] += _recs("base", b, la, 20 + la)
    (row,) = derive.speedups(_cells(), records, "base")
    per_round = [derive.paired_ratio(_recs("spec", s, la, 10 + la), _recs("base", b, la, 20 + la)).ratio
                 for la, (s, b) in rates.items()]
    assert row.rounds == 3 and row.n_pairs == 120 and row.ci_method.startswith("t-interval over 3 rounds")
    assert abs(row.paired_ratio - float(np.exp(np.mean(np.log(per_round))))) < 1e-9  # their geometric mean
    assert row.ci_low < min(per_round) and row.ci_high > max(per_round)  # df 2: t_0.975 = 4.3
