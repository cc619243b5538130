"""Diff: a known slowdown is found with the right sign, equal runs give `~`, gating exit codes,
refusals (too few samples, not comparable), unmatched cells, and the environment diff. The runs have
three server launches per arm (the launch is the unit: toolkit/stats/); single-launch
pairs and their default floor are tests/results/test_launch_noise.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolkit.results.archive import open_archive
from tests.synthetic import manifest_for, write_run
from toolkit.results.diff import diff_runs
from toolkit.schema.metrics import REQUEST_METRICS as SAMPLED
from toolkit.stats import holm, mwu_asymptotic

BASE = ["python", "-m", "sglang.launch_server", "--tp", "8"]
SPEC = BASE + ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    # +-30 %: each cell's test has its own launches' 4 df (launches.cell_noise), and a Holm family of ~90 tests
    # asks p < 0.0006 of each: at 3 launches a side +15 % (t ~ 6) is below that, +30 % is not
    kw = {"launches": 3, "launch_cv": 0.02, "n": 200}
    return {
        "a": write_run(root, seed=10, **kw),
        "same": write_run(root, seed=11, **kw),
        "slow": write_run(root, seed=12, slowdown={"eagle3": 1.3}, **kw),
        "fast": write_run(root, seed=13, slowdown={"eagle3": 0.77}, **kw),
    }


def _verdicts(result, arm=None):
    return {(c.label, m.metric): m for c in result.cells for m in c.metrics.values()
            if arm is None or c.arm == arm}


def test_injected_slowdown_is_significant_with_the_right_sign(runs):
    r = diff_runs(open_archive(runs["a"]), open_archive(runs["slow"]))
    slowed = _verdicts(r, "eagle3")
    assert len(r.cells) == 8 and not r.only_a and not r.only_b
    for metric in ("ttft_ms", "tpot_ms", "itl_req_mean_ms", "e2e_ms"):
        ms = [m for (_, name), m in slowed.items() if name == metric]
        assert len(ms) == 4 and all(m.verdict == "worse" and 15 < m.delta_pct < 45 and m.p_adj < 0.05 for m in ms), metric
    rates = [m for (_, name), m in slowed.items() if name == "req_output_tok_s"]
    assert all(m.verdict == "worse" and m.delta_pct < -5 for m in rates)  # higher is better: a drop is worse
    # with the launch as the unit, pooled chunks and cell figures are tested too (one figure per launch)
    for metric in ("itl_ms", "output_tok_s"):
        ms = [m for (_, name), m in slowed.items() if name == metric]
        assert len(ms) == 4 and all(m.verdict == "worse" and m.noise == "runs" for m in ms), metric
        assert all((m.delta_pct > 5) == (metric == "itl_ms") for m in ms), metric
    for m in slowed.values():  # every verdict came from the launches, with a CI of the change
        assert (m.launches_a, m.launches_b) == (3, 3) and m.low_pct < m.delta_pct < m.high_pct
    untouched = [m for m in _verdicts(r, "baseline").values() if m.metric in SAMPLED]
    assert untouched and all(m.verdict == "~" for m in untouched)
    assert r.geomean["ttft_ms"]["delta_pct"] > 0 and r.geomean["ttft_ms"]["low_pct"] > 0


def test_same_distribution_gives_tilde_everywhere(runs, cli):
    r = diff_runs(open_archive(runs["a"]), open_archive(runs["same"]))
    tested = [m for m in _verdicts(r).values() if m.metric in SAMPLED]
    assert len(tested) == 8 * 5 + 4  # accept_length only on the speculative arm
    assert all(m.verdict == "~" for m in tested)
    assert all(m.verdict == "~" for m in _verdicts(r).values())  # cell and chunk figures too
    res = cli("results", "diff", str(runs["a"]), str(runs["same"]))
    assert res.returncode == 0
    lines = [ln for ln in res.stdout.splitlines() if ln.strip().startswith(("baseline ", "eagle3 "))]
    assert lines and all(" ~ " in ln and "launches 3+3" in ln for ln in lines)
    assert not any(ln.endswith(("WORSE", "better")) for ln in lines)
    assert "baseline, eagle3: launches 3 (A) + 3 (B); launch noise measured in the runs" in res.stdout


def test_fail_on_regression_exit_codes(runs, cli):
    a, slow, fast, same = (str(runs[k]) for k in ("a", "slow", "fast", "same"))
    res = cli("results", "diff", a, slow, "--fail-on-regression", "5")
    assert res.returncode == 1 and "significant regression" in res.stderr and "eagle3" in res.stderr
    assert cli("results", "diff", a, slow, "--fail-on-regression", "50").returncode == 0  # beyond the change
    assert cli("results", "diff", a, same, "--fail-on-regression", "1").returncode == 0
    assert cli("results", "diff", a, fast, "--fail-on-regression", "5").returncode == 0  # faster is no regression
    res = cli("results", "diff", fast, a, "--fail-on-regression", "5", "--metric", "req_output_tok_s", "--json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["regressions"] and all(x["metric"] == "req_output_tok_s" and x["delta_pct"] < -5
                                      for x in doc["regressions"])
    res = cli("results", "diff", a, slow, "--metric", "no_such_metric")
    assert res.returncode == 2 and "unknown metric no_such_metric" in res.stderr and "itl_req_mean_ms" in res.stderr


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
    assert "Not comparable" in res.stdout and "only in A: baseline code c=1 out=32" in res.stdout


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
    assert "Environment diff\n3 differences" in out
    assert "threshold.patch" in out and "aaaaaaaaaaaa" in out and "bbbbbbbbbbbb" in out
    assert "eagle3 --speculative-num-steps  3" in out


def test_holm_matches_by_hand():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_fast_mann_whitney_equals_scipy_with_ties_and_signed_zeros():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(3)
    for n1, n2, shift in ((50, 60, 0.0), (400, 300, 0.05), (5000, 7000, 0.01)):
        a = (rng.lognormal(0, 0.3, n1) - 1).astype(np.float32).round(2)  # ties, and -0.0 next to 0.0
        b = (rng.lognormal(shift, 0.3, n2) - 1).astype(np.float32).round(2)
        assert mwu_asymptotic(a, b) == pytest.approx(mannwhitneyu(a, b, method="asymptotic").pvalue, rel=1e-4)


def test_an_inherited_engine_variable_shows_in_the_environment_diff(tmp_path, monkeypatch):
    """A replay whose servers inherited TOOLKIT_INJECT_FORWARD_SLEEP_MS (docs/lab/launch-noise.md, the slowed replay)
    differs from its reference there; a token in the same environment is masked, a path kept as it is."""
    from toolkit.bench.hostinfo import host_fingerprint

    def fp_with(**env):
        for k in ("TOOLKIT_INJECT_FORWARD_SLEEP_MS", "HF_TOKEN", "HF_HOME", "SGLANG_X"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return host_fingerprint([]).model_dump(mode="json", exclude_unset=True)

    secret = "hf_" + "q" * 30
    fa = fp_with(HF_HOME="/data/hf", HF_TOKEN=secret)
    fb = fp_with(HF_HOME="/data/hf", HF_TOKEN=secret, TOOLKIT_INJECT_FORWARD_SLEEP_MS="2")
    assert secret not in json.dumps(fb) and fb["controller"]["env"]["HF_HOME"] == "/data/hf"
    assert "PATH" not in fb["controller"]["env"]  # only the engine prefixes
    runs = []
    for i, fp in enumerate((fa, fb)):
        m = manifest_for({"baseline": BASE, "eagle3": SPEC})
        m["host"] = fp
        runs.append(write_run(tmp_path, seed=i + 1, n=12, domains=("chat",), concurrency=(1,),
                              arms={"baseline": BASE, "eagle3": SPEC}, manifest=m))
    env = {(e["section"], e["field"]): (e["a"], e["b"]) for e in diff_runs(*map(open_archive, runs)).env}
    assert env[("host", "env.TOOLKIT_INJECT_FORWARD_SLEEP_MS")] == (None, "2")
    assert not any("HF_" in k[1] for k in env)  # the same on both sides: no row


def test_how_python_starts_the_servers_is_recorded():
    """A warm SGLang start is mostly imports: whether its processes may write bytecode is recorded (docs/lab/starts.md);
    the search path and the shell's own variables are not."""
    from toolkit.bench.hostinfo import engine_env

    assert engine_env({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": "/tmp/site", "PATH": "/bin",
                       "SGLANG_X": "1"}) == {"PYTHONDONTWRITEBYTECODE": "1", "SGLANG_X": "1"}


def test_no_difference_from_a_field_added_at_its_default_or_a_port_picked_at_start(tmp_path):
    """Two archives of the same Matrix (equal hashes), the newer one holding a field the older one's schema did
    not have, at the default the hash omits: no row. Each launch's free port: no row. With the hashes apart the
    same field is a row, as is a flag that really changed."""
    def run(seed, port, extra=None, mhash="m" * 64, steps="3"):
        arms = {"baseline": BASE + ["--port", port], "eagle3": SPEC[:-1] + [steps, "--port", port]}
        m = manifest_for(arms)
        m["matrix"]["hash"] = mhash
        m["matrix"]["resolved"].update(extra or {})
        return open_archive(write_run(tmp_path, seed=seed, n=12, domains=("chat",), concurrency=(1,), arms=arms,
                                      manifest=m))

    old, new = run(1, "42889"), run(2, "54167", {"warmup_launch": False, "arrival": {"process": "poisson"}})
    assert diff_runs(old, new).env == []
    moved = {(e["section"], e["field"]): (e["a"], e["b"])
             for e in diff_runs(old, run(3, "51295", {"warmup_launch": True}, mhash="n" * 64, steps="5")).env}
    assert moved[("spec", "matrix.warmup_launch")] == (None, "true")
    assert moved[("server args", "eagle3 --speculative-num-steps")] == ("3", "5")
    assert not any("--port" in k[1] for k in moved)
