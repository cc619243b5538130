"""Derived results: paired speedups, sustained/significant crossovers, methodology checks."""

from __future__ import annotations

import numpy as np

from toolkit.bench import derive
from toolkit.schema.records import CellSummary, RequestRecord, Stat
from toolkit.spec.environment import Environment
from toolkit.spec.matrix import Matrix


def recs(arm: str, conc: int, rate: float, n: int = 40, seed: int = 0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        tokens = 64
        e2e = tokens / rate * 1000 * float(rng.uniform(0.95, 1.05))
        out.append(RequestRecord(arm=arm, domain="coding", concurrency=conc, prompt_id=f"p{i}", send_s=0.0,
                                 ttft_ms=10, e2e_ms=e2e, output_tokens=tokens))
    return out


def cell(arm: str, conc: int, tput: float) -> CellSummary:
    return CellSummary(arm=arm, domain="coding", concurrency=conc, output_len=64, workload_hash="h",
                       metrics={"output_tok_s": Stat(mean=tput, p50=tput, n=40)})


def test_paired_ratio_recovers_a_known_speedup() -> None:
    pr = derive.paired_ratio(recs("spec", 1, 150, seed=1), recs("base", 1, 100, seed=2))
    assert 1.45 < pr["ratio"] < 1.55 and pr["ci_low"] < pr["ratio"] < pr["ci_high"] and pr["n_pairs"] == 40


def test_crossover_is_the_start_of_a_sustained_significant_slowdown() -> None:
    rates = {1: (150, 100), 4: (90, 100), 16: (110, 100), 32: (70, 100), 64: (60, 100)}
    cells, records = [], {}
    for c, (s, b) in rates.items():
        cells += [cell("spec", c, s), cell("base", c, b)]
        records[("spec", "coding", c)] = recs("spec", c, s, seed=c)
        records[("base", "coding", c)] = recs("base", c, b, seed=c + 100)
    rows = derive.speedups(cells, records, "base")
    cross = derive.crossovers(rows, {"spec"})
    # the dip at 4 recovers at 16, so the crossover is 32, not 4
    assert cross[0]["crossover_concurrency"] == 32
    assert "4" in cross[0]["note"]
    assert derive.recommended_threshold(cross, "spec") == 32


def test_no_crossover_when_never_slower() -> None:
    cells = [cell("spec", 1, 150), cell("base", 1, 100)]
    records = {("spec", "coding", 1): recs("spec", 1, 150), ("base", "coding", 1): recs("base", 1, 100)}
    cross = derive.crossovers(derive.speedups(cells, records, "base"), {"spec"})
    assert cross[0]["crossover_concurrency"] is None and "no threshold" in cross[0]["note"]


def test_speculative_arms_are_recognised() -> None:
    env = Environment(kind="Environment", name="e", engine="transformers", model={"dummy": {}},
                      servers={"baseline": {}, "ngram": {}, "cb": {"continuous-batching": True}},
                      request_params={"ngram": {"generation_config": {"prompt_lookup_num_tokens": 4}}})
    assert [a for a in env.servers if derive.is_speculative(env, a)] == ["ngram"]
    sg = Environment(kind="Environment", name="s", base_image="x:1", sglang={"version": "0.5.23"},
                     servers={"baseline": {"tp-size": 8}, "eagle3": {"speculative-algorithm": "EAGLE3"}})
    assert derive.is_speculative(sg, "eagle3") and not derive.is_speculative(sg, "baseline")


def test_methodology_checks() -> None:
    m = Matrix(kind="Matrix", name="m", environment="e.yaml", arms=["base", "spec"], workloads=["coding"],
               concurrency=[1, 64], requests=10, warmup=0)
    cells = [cell("base", 1, 100), cell("spec", 1, 120)]
    cells[0].metrics["e2e_ms"] = Stat(p50=1, p99=2, n=10, unreliable=["p99"])
    records = {("base", "coding", 1): recs("base", 1, 100, n=3), ("spec", "coding", 1): recs("spec", 1, 120, n=2)}
    checks = derive.methodology_checks(
        matrix=m, cells=cells, records=records,
        arm_info={"spec": {"max_running_requests": 48, "max_running_requests_implicit": True},
                  "base": {"max_running_requests": 128}},
        flushed={"spec": False},
        representativeness=[{"workload": "encyclopedic", "verdict": "far", "divergence": 0.9, "reason": "r"}])
    by = {c["check"]: c for c in checks}
    assert by["concurrency-above-max-running-requests"]["severity"] == "error"
    assert "48" in by["concurrency-above-max-running-requests"]["message"]
    assert {"no-warmup", "percentile-from-few-samples", "arms-saw-different-prompts",
            "acceptance-counters-not-reset", "workload-far-from-training-data"} <= set(by)
