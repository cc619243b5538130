"""Diff: a known slowdown is found with the right sign, equal runs give `~`, gating exit codes,
refusals (too few samples, not comparable), unmatched cells, and the environment diff."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolkit.results.archive import open_archive
from toolkit.results.diff import SAMPLED, diff_runs, holm
from toolkit.results.stats import median_ci, mwu_asymptotic
from tests.synthetic import manifest_for, write_run

BASE = ["python", "-m", "sglang.launch_server", "--tp", "8"]
SPEC = BASE + ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "a": write_run(root, seed=10),
        "same": write_run(root, seed=11),
        "slow": write_run(root, seed=12, slowdown={"eagle3": 1.15}),
        "fast": write_run(root, seed=13, slowdown={"eagle3": 0.85}),
    }


def _verdicts(result, arm=None):
    return {(c.label, m.metric): m for c in result.cells for m in c.metrics.values()
            if arm is None or c.arm == arm}


def test_injected_slowdown_is_significant_with_the_right_sign(runs):
    r = diff_runs(open_archive(runs["a"]), open_archive(runs["slow"]))
    slowed = _verdicts(r, "eagle3")
    assert len(r.cells) == 8 and not r.only_a and not r.only_b
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        ms = [m for (_, name), m in slowed.items() if name == metric]
        assert len(ms) == 4 and all(m.verdict == "worse" and 5 < m.delta_pct < 30 and m.p_adj < 0.05 for m in ms), metric
    rates = [m for (_, name), m in slowed.items() if name == "output_tok_s"]
    assert all(m.verdict == "worse" and m.delta_pct < -5 for m in rates)  # higher is better: a drop is worse
    untouched = [m for m in _verdicts(r, "baseline").values() if m.metric in SAMPLED]
    assert untouched and all(m.verdict == "~" for m in untouched)
    assert r.geomean["ttft_ms"]["delta_pct"] > 0


def test_same_distribution_gives_tilde_everywhere(runs, cli):
    r = diff_runs(open_archive(runs["a"]), open_archive(runs["same"]))
    tested = [m for m in _verdicts(r).values() if m.metric in SAMPLED]
    assert len(tested) == 8 * 5 + 4  # accept_length only on the speculative arm
    assert all(m.verdict == "~" for m in tested)
    res = cli("results", "diff", str(runs["a"]), str(runs["same"]))
    assert res.returncode == 0
    lines = [ln for ln in res.stdout.splitlines() if ln.strip().startswith(("baseline ", "eagle3 "))]
    assert lines and all(" ~ " in ln or "not tested" in ln for ln in lines)
    assert not any(ln.endswith(("WORSE", "better")) for ln in lines)


def test_fail_on_regression_exit_codes(runs, cli):
    a, slow, fast, same = (str(runs[k]) for k in ("a", "slow", "fast", "same"))
    res = cli("results", "diff", a, slow, "--fail-on-regression", "5")
    assert res.returncode == 1 and "significant regression" in res.stderr and "eagle3" in res.stderr
    assert cli("results", "diff", a, slow, "--fail-on-regression", "50").returncode == 0  # beyond the change
    assert cli("results", "diff", a, same, "--fail-on-regression", "1").returncode == 0
    assert cli("results", "diff", a, fast, "--fail-on-regression", "5").returncode == 0  # faster is no regression
    res = cli("results", "diff", fast, a, "--fail-on-regression", "5", "--metric", "output_tok_s", "--json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["regressions"] and all(x["metric"] == "output_tok_s" and x["delta_pct"] < -5 for x in doc["regressions"])


def test_too_few_samples_refuses_to_call_significance(tmp_path):
    a = write_run(tmp_path, seed=1, n=6, domains=("chat",), concurrency=(1,))
    b = write_run(tmp_path, seed=2, n=6, domains=("chat",), concurrency=(1,), slowdown={"eagle3": 2.0})
    r = diff_runs(open_archive(a), open_archive(b))
    ms = [m for m in _verdicts(r).values() if m.metric in SAMPLED]
    assert ms and all(m.verdict == "too-few" and m.p is None for m in ms)
    assert r.regressions(1.0) == []


def test_not_comparable_and_unmatched_cells(tmp_path, cli):
    a = write_run(tmp_path, seed=1, n=20, domains=("chat", "code"), concurrency=(1, 4))
    b = write_run(tmp_path, seed=2, n=20, domains=("chat", "math"), concurrency=(1, 4), temperature=0.7)
    r = diff_runs(open_archive(a), open_archive(b))
    assert {c.label for c in r.cells} == {f"{arm} chat c={c} out=32" for arm in ("baseline", "eagle3") for c in (1, 4)}
    assert all(not c.comparable and "temperature" in c.reason and not c.metrics for c in r.cells)
    assert len(r.only_a) == 4 and all(" code " in x for x in r.only_a)
    assert len(r.only_b) == 4 and all(" math " in x for x in r.only_b)
    res = cli("results", "diff", str(a), str(b))
    assert "not comparable:" in res.stdout and "only in A: baseline code c=1 out=32" in res.stdout


def test_environment_diff_shows_a_changed_patch_and_server_argument(tmp_path, cli):
    a = write_run(tmp_path, seed=1, n=12, domains=("chat",), concurrency=(1,),
                  arms={"baseline": BASE, "eagle3": SPEC},
                  manifest=manifest_for({"baseline": BASE, "eagle3": SPEC}, patch_sha="a" * 64))
    spec_b = SPEC[:-1] + ["5"]
    b = write_run(tmp_path, seed=2, n=12, domains=("chat",), concurrency=(1,),
                  arms={"baseline": BASE, "eagle3": spec_b},
                  manifest=manifest_for({"baseline": BASE, "eagle3": spec_b}, patch_sha="b" * 64, driver="590.10"))
    env = {(e["section"], e["field"]): (e["a"], e["b"]) for e in diff_runs(open_archive(a), open_archive(b)).env}
    assert env[("patches (sha256)", "threshold.patch")] == ("a" * 64, "b" * 64)
    assert env[("server args", "eagle3 --speculative-num-steps")] == ("3", "5")
    assert env[("host", "driver")] == ("580.82.07", "590.10")
    assert not any(k[1].startswith("baseline") for k in env)  # unchanged arm: no rows
    out = cli("results", "diff", str(a), str(b)).stdout
    assert "environment: 3 differences" in out
    assert "threshold.patch" in out and "aaaaaaaaaaaa" in out and "bbbbbbbbbbbb" in out
    assert "eagle3 --speculative-num-steps  3" in out


def test_median_ci_covers_the_true_median_and_holm_matches_by_hand():
    rng = np.random.default_rng(0)
    hits = sum(lo <= 0.0 <= hi for lo, hi in
               ((c.ci_low, c.ci_high) for c in (median_ci(rng.normal(size=200)) for _ in range(400))))
    assert 0.92 <= hits / 400 <= 0.99  # a 95% interval
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_fast_mann_whitney_equals_scipy_with_ties_and_signed_zeros():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(3)
    for n1, n2, shift in ((50, 60, 0.0), (400, 300, 0.05), (5000, 7000, 0.01)):
        a = (rng.lognormal(0, 0.3, n1) - 1).astype(np.float32).round(2)  # ties, and -0.0 next to 0.0
        b = (rng.lognormal(shift, 0.3, n2) - 1).astype(np.float32).round(2)
        assert mwu_asymptotic(a, b) == pytest.approx(mannwhitneyu(a, b, method="asymptotic").pvalue, rel=1e-4)
