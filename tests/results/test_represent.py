"""Representativeness against acceptance (toolkit/results/represent.py): Spearman's rho on known data, the rows
only where both a distance and a real acceptance exist, and end to end on the committed GPU pair run with
`--training-data` (its manifest recorded no representativeness)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.results import represent as rp

RUN = "pair-h200/20261206T052112Z-7154eb"
SURFACE = "pair-h200-surface/20261206T052628Z-bbb492"
SAMPLE = "benchmarks/pair_gpu/draft-sample.jsonl"


def test_spearman_on_known_data() -> None:
    assert rp.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rp.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2, 3, 4) vs (3, 2, 4, 1): sum d^2 = 4 + 0 + 1 + 9 = 14, rho = 1 - 6 * 14 / (4 * 15) = -0.4
    assert rp.spearman([0.28, 0.31, 0.89, 0.91], [3.45, 2.03, 3.66, 1.16]) == pytest.approx(-0.4)
    assert rp.ranks([5, 1, 5, 2]) == [3.5, 1, 3.5, 2]  # ties: the average rank
    scipy = pytest.importorskip("scipy.stats")
    xs, ys = [1, 2, 2, 3, 5, 5, 7], [2, 1, 4, 4, 3, 6, 5]
    assert rp.spearman(xs, ys) == pytest.approx(scipy.spearmanr(xs, ys).statistic)
    assert rp.spearman([1, 2], [2, 1]) is None and rp.spearman([1, 1, 1], [1, 2, 3]) is None


def test_build_needs_a_distance_and_an_acceptance() -> None:
    reps = [{"workload": "coding", "divergence": 0.3, "verdict": "close"},
            {"workload": "math", "divergence": 0.9, "verdict": "far"},
            {"workload": "chat", "divergence": 0.5, "verdict": "moderate"}]  # no acceptance: no row
    acc = {("eagle3", "coding"): 3.0, ("eagle3", "math"): 1.5, ("eagle3", "encyclopedic"): 1.2}  # no distance
    out = rp.build(reps, acc, "recorded")
    assert [(r["domain"], r["distance"], r["accept_len"]) for r in out.rows] == [("coding", 0.3, 3.0),
                                                                                  ("math", 0.9, 1.5)]
    assert out.spearman == [{"arm": "eagle3", "n": 2, "rho": None}]  # two domains: no rho
    assert rp.build([], acc, "recorded") is None and rp.build(reps, {}, "recorded") is None


def test_from_training_keeps_only_the_runs_own_prompts(tmp_path) -> None:
    from toolkit.workloads.loader import load_workload

    coding = load_workload("coding", base_dir=tmp_path, seed=0)
    a = SimpleNamespace(path=tmp_path, manifest=SimpleNamespace(
        matrix=SimpleNamespace(resolved={"workloads": ["coding", "math"], "seed": 0}), inputs=None,
        workloads={"coding": {"hash": coding.hash}, "math": {"hash": "0" * 64}}))
    reps, notes = rp.from_training(a, ROOT / SAMPLE)
    assert [r["workload"] for r in reps] == ["coding"] and reps[0]["verdict"] == "close"
    assert len(notes) == 1 and notes[0].startswith("math: the prompts reloaded now differ")


def test_show_with_training_data_on_the_gpu_run() -> None:
    got = run_cli("results", "show", RUN, "--root", "results", "--training-data", SAMPLE, "--json")
    assert got.returncode == 0, got.stderr
    r = json.loads(got.stdout)["representativeness_vs_acceptance"]
    rows = {x["domain"]: x for x in r["rows"]}
    assert set(rows) == {"coding", "agentic", "encyclopedic", "math"}
    assert rows["encyclopedic"]["verdict"] == "far" and rows["coding"]["verdict"] == "close"
    assert rows["coding"]["accept_len"] == pytest.approx(3.45, abs=0.01)
    assert r["spearman"] == [{"arm": "eagle3", "n": 4, "rho": pytest.approx(-0.4)}]
    text = run_cli("results", "show", RUN, "--root", "results", "--training-data", SAMPLE).stdout
    assert "Representativeness against acceptance" in text and "rho = -0.40 (n = 4)" in text
    assert "no p-value is claimed" in text
    # the run recorded no representativeness, and the surface run has no real acceptance: no section
    assert "Representativeness against acceptance" not in run_cli("results", "show", RUN, "--root", "results").stdout
    assert "representativeness_vs_acceptance" not in json.loads(
        run_cli("results", "show", SURFACE, "--root", "results", "--training-data", SAMPLE, "--json").stdout)
    bad = run_cli("results", "show", RUN, "--root", "results", "--training-data", "no-such.jsonl")
    assert bad.returncode == 2 and "no such file" in bad.stderr and "Traceback" not in bad.stderr
