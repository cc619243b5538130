"""`toolkit bench tune` end to end on the embedded engine, through the real CLI: the quickstart's space (a
lighter load per cell), the acceptance JSON, every run a normal archive, the tuned environment valid and
usable by `bench matrix`; Ctrl-C leaves valid archives and `--resume` finishes the session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.specs import load_spec
from toolkit.results import compact

pytestmark = pytest.mark.slow


def light_quickstart(tmp: Path, budget: int = 4) -> Path:
    """envs/matrices/quickstart.yaml (its environment and tune space) with fewer, shorter requests."""
    m = tmp / "quick.yaml"
    m.write_text(textwrap.dedent(f"""\
        extends: {ROOT / "envs" / "matrices" / "quickstart.yaml"}
        name: quick
        output_len: 16
        requests: 4
        warmup: 1
        tune:
          budget: {budget}
          first_requests: 2
          confirm_requests: 6
        """))
    return m


# the quickstart's cells (one level: the embedded engine serves one request at a time)
_Q = load_spec(ROOT / "envs" / "matrices" / "quickstart.yaml").model
CELLS = {(w, c) for w in _Q.workloads for c in _Q.concurrency}


def interrupt_tune(m: Path, tmp: Path, runs: str, count: int) -> tuple[str, str]:
    """`bench tune M --arm ngram` under tmp/results, Ctrl-C once `count` runs matching `runs` (under
    results/quick-tune) are complete (a summary, plain or compacted); its stdout and stderr, exit 130."""
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "bench", "tune", str(m), "--arm", "ngram",
                             "--results", str(tmp / "results"), "--json"], cwd=ROOT,
                            env=dict(os.environ, NO_COLOR="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    parent = tmp / "results" / "quick-tune"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        done = {p.parent for p in parent.glob(f"{runs}/*/summary.json*")} if parent.is_dir() else set()
        if len(done) >= count or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-2000:]
    return stdout, stderr


def test_tune_acceptance_json_archives_and_the_tuned_environment(tmp_path):
    m = light_quickstart(tmp_path)
    out = tmp_path / "OUT.yaml"
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--budget", "4", "--out", str(out), "--json",
                "--write-anyway", "--results", str(tmp_path / "results"), timeout=900)
    res = json.loads(r.stdout)
    # adopt the winner (exit 0) only when it beat the preset; else keep the preset (exit 3), and --write-anyway
    # writes it all the same for the rest of this test
    decision = res["confirmation"]["decision"]
    assert r.returncode == (0 if decision["adopt"] else 3), r.stderr[-3000:]
    assert res["decision"] == decision["says"] and out.is_file()
    for k in ("vs_preset", "vs_baseline", "preset_vs_baseline"):  # over the cells a verdict may use (no DRIFT)
        if decision["cells"]:
            assert decision[k]["ci_low"] <= decision[k]["speedup"] <= decision[k]["ci_high"]
        else:  # on a loaded machine every cell may drift: no ratio, and the preset is kept
            assert decision[k].get("speedup") is None and not decision["adopt"]
    assert res["status"] == "complete" and res["level"] == "request"
    assert len(res["trials"]) >= 2
    for t in res["trials"]:
        assert t["params"] and set(t["params"]) <= {"prompt_lookup_num_tokens", "max_matching_ngram_size"}
        assert len(t["cells"]) == len(CELLS) and all(c["speedup"] and c["ci_low"] <= c["speedup"] <= c["ci_high"]
                                            for c in t["cells"])
    assert res["best"]["params"] == next(t["params"] for t in res["trials"] if t["name"] == res["best"]["trial"])
    conf = res["confirmation"]
    assert {(c["domain"], c["concurrency"]) for c in conf["cells"]} == CELLS
    for c in conf["cells"]:
        assert c["ci_low"] <= c["speedup"] <= c["ci_high"] and c["n_pairs"] == 6
    assert conf["held_out"] == {"coding": 50, "encyclopedic": 50}

    # held out: no prompt of the confirmation was in the tune sample
    session = Path(res["session"])
    tune_ids = {json.loads(ln)["id"] for w in ("coding", "encyclopedic")
                for ln in compact.read_text(session / "prompts" / f"{w}.tune.jsonl").splitlines()}
    # a complete session is compacted: its prompt split and its input store's blobs (1 KiB or more) as .gz
    assert not list(session.glob("prompts/*.jsonl")) and len(list(session.glob("prompts/*.jsonl.gz"))) == 4
    assert not [b for b in (session / "inputs" / "sha256").iterdir() if b.stat().st_size >= 1024 and b.suffix != ".gz"]
    from toolkit.results.archive import open_archive

    for run in conf["runs"]:
        a = open_archive(run)
        assert a.status == "complete"
        for c in a.cells:
            from toolkit.schema.keys import cell_key

            sent = {rec.prompt_id for rec in a.iter_records(cell_key(c.arm, c.domain, c.concurrency, c.repeat))}
            assert sent and not (sent & tune_ids)

    # every run is a normal archive the results commands read
    # the rungs' runs, then one confirmation run per cell
    assert len(conf["runs"]) == len(CELLS) and set(conf["runs"]) < set(res["runs"])
    for run in res["runs"]:
        assert run_cli("results", "verify", run).returncode == 0
    # the session keeps SHA256SUMS over its own files; plain verify checks it and every run nested in it
    assert (session / "SHA256SUMS").is_file()
    v = run_cli("results", "verify", "--root", str(session.parent.parent), "--json")
    assert v.returncode == 0, v.stdout[-3000:]
    checked = {Path(x["run"]): x for x in json.loads(v.stdout)}
    assert checked[session]["kind"] == "session" and checked[session]["problems"] == []
    assert {Path(r) for r in res["runs"]} <= set(checked)
    shown = run_cli("results", "show", res["runs"][0])
    assert shown.returncode == 0 and "baseline-again" in shown.stdout
    assert (session / "report.md").is_file() and (session / "plots" / "tune-heatmap.png").is_file()
    assert "Confirmation on held-out prompts" in (session / "report.md").read_text()

    # the tuned environment: valid, the ngram preset changed and commented, the rest as it was
    src = ROOT / "envs" / "matrices" / _Q.environment  # the quickstart's environment
    assert run_cli("validate", str(out)).returncode == 0
    tuned, before = load_spec(out).model, load_spec(src).model
    gen = tuned.request_params["ngram"]["generation_config"]
    assert gen == {**before.request_params["ngram"]["generation_config"], **res["best"]["params"]}
    assert gen != before.request_params["ngram"]["generation_config"]
    assert tuned.servers == before.servers and tuned.request_params["baseline"] == before.request_params["baseline"]
    text = out.read_text()
    assert f"# tuned: bench tune quick-tune/{session.name} (trial {res['best']['trial']}" in text
    assert text.startswith(src.read_text().splitlines()[0])  # the original's comments, in place

    # `bench matrix` on a matrix that uses the tuned preset
    mx = tmp_path / "tuned-matrix.yaml"
    mx.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: tuned
        environment: {out}
        arms: [baseline, ngram]
        workloads: [coding]
        concurrency: [1]
        output_len: 8
        requests: 2
        warmup: 1
        """))
    r = run_cli("bench", "matrix", str(mx), "--results", str(tmp_path / "results"), "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads(r.stdout)
    manifest = json.loads((Path(run["run"]) / "manifest.json").read_text())
    assert manifest["arms"]["ngram"]["request_params"]["generation_config"] == gen


def test_ctrl_c_leaves_valid_archives_and_resume_finishes(tmp_path):
    m = light_quickstart(tmp_path, budget=3)
    parent = tmp_path / "results" / "quick-tune"
    stdout, stderr = interrupt_tune(m, tmp_path, "*/quick-tune-*", 2)  # mid-search, after two complete runs
    assert "--resume" in stderr
    session = next(parent.iterdir())
    state = json.loads((session / "tune.json").read_text())
    assert state["status"] == "partial"
    runs_before = sorted(p.parent for p in session.glob("quick-tune-*/*/manifest.json"))
    for run in runs_before:
        assert run_cli("results", "verify", str(run)).returncode == 0, run
    complete_before = {p for p in runs_before if json.loads(compact.read_text(p / "summary.json"))["status"] == "complete"}

    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "results"), "--resume",
                str(session), "--json", timeout=900)
    res = json.loads(r.stdout)
    assert r.returncode == (0 if res["decision"] == "adopt the winner" else 3), r.stderr[-3000:]
    assert res["status"] == "complete" and res["confirmation"]["cells"]
    assert complete_before <= {Path(p) for p in res["runs"]}  # finished runs were reused, not run again
    # a complete session given to --resume again is judged again from its archives: nothing runs
    again = run_cli("bench", "tune", str(m), "--arm", "ngram", "--resume", str(session), "--json")
    assert again.returncode == r.returncode and "judged again from its archives: nothing run" in again.stderr
    assert json.loads(again.stdout)["decision"] == res["decision"]
    # a complete session whose write-back did not happen (on the H200: ruamel.yaml was missing there) is
    # written back from its tune.json, nothing run again
    runs = sorted(session.glob("quick-tune-*/*/manifest.json"))
    out = tmp_path / "tuned.yaml"
    wb = run_cli("bench", "tune", str(m), "--arm", "ngram", "--resume", str(session), "--out", str(out), "--json",
                 "--write-anyway")
    assert wb.returncode == r.returncode, wb.stderr[-2000:]
    assert "its result written back, nothing run" in wb.stderr and json.loads(wb.stdout)["out"] == str(out)
    assert sorted(session.glob("quick-tune-*/*/manifest.json")) == runs
    assert run_cli("validate", str(out)).returncode == 0 and "tuned" in out.read_text()


def test_an_interrupted_confirmation_runs_every_arm_again(tmp_path):
    """Ctrl-C once a confirmation run (one per cell on the shared server) is complete, then --resume: the
    confirmation runs every arm again in one sitting; the runs of the interrupted sitting are kept, not read.
    Without a winner that beats the preset, --out is not written."""
    m = light_quickstart(tmp_path, budget=2)
    parent = tmp_path / "results" / "quick-tune"
    interrupt_tune(m, tmp_path, "*/quick-tune-confirm-*", 1)  # once one confirmation run is complete
    session = next(parent.iterdir())
    state = json.loads((session / "tune.json").read_text())
    assert state["confirmation"]["status"] == "partial"
    first = {p.parent.relative_to(session).as_posix() for p in session.glob("quick-tune-confirm-*/*/manifest.json")}
    assert first

    out = tmp_path / "tuned.yaml"
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "results"), "--resume",
                str(session), "--out", str(out), "--json", timeout=900)
    res = json.loads(r.stdout)
    assert "runs again in this sitting" in r.stderr
    state = json.loads((session / "tune.json").read_text())
    plan = state["confirmation"]
    assert plan["status"] == "complete" and plan["sitting"] == 1 and set(plan["abandoned"]) == first
    for run in first:  # the interrupted sitting's runs stay as they were: valid archives
        assert run_cli("results", "verify", str(session / run)).returncode == 0, run
    assert not set(plan["runs"]) & first and len(plan["runs"]) == len(CELLS)  # every cell, every arm, afresh
    assert {Path(p).relative_to(session).as_posix() for p in res["confirmation"]["runs"]} == set(plan["runs"])
    assert set(plan["machines"]) == {"baseline", "baseline-again", "ngram", res["best"]["trial"]}
    assert len({m for ms in plan["machines"].values() for m in ms}) == 1
    adopt = res["confirmation"]["decision"]["adopt"]
    assert r.returncode == (0 if adopt else 3) and out.is_file() is adopt


def test_out_is_checked_before_any_trial(tmp_path):
    m = light_quickstart(tmp_path, budget=3)
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "results"),
                "--out", str(tmp_path / "no-such-folder" / "tuned.yaml"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()  # nothing ran, nothing was written


def _sglang_tune_matrix(tmp_path: Path, tune: str) -> Path:
    """The fake SGLang's Environment and a Matrix over it (coding, c=1 and 4, 12 tokens, 8 requests) whose
    `tune:` block holds `tune` (its lines indented as in the callers): the Matrix's path."""
    from tests.bench.test_matrix_sglang_process import ENV, process_target

    (tmp_path / "env.yaml").write_text(ENV)
    m = tmp_path / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: sg
        environment: env.yaml
        arms: [baseline, eagle3]
        target: {process_target()}
        workloads: [coding]
        api: generate
        concurrency: [1, 4]
        output_len: 12
        requests: 8
        warmup: 1
        tune:
""" + tune))
    return m


def test_server_flags_launch_one_server_per_trial_and_are_written_back(tmp_path):
    """SGLang's speculative flags against the fake launch_server of tests/data/fake_sglang (SGLang's flag
    parser, /server_info, streamed /generate): the flags are checked against 0.5.17's source first (preflight,
    static), every trial is a launch with its own flags, and --out puts the winner in servers.eagle3."""
    m = _sglang_tune_matrix(tmp_path, """\
          space:
            eagle3:
              speculative-num-steps: [1, 2, 5]
              speculative-eagle-topk: [1]
              speculative-num-draft-tokens: [2, 3, 6]
          budget: 3
          first_requests: 4
          confirm_requests: 8
        """)
    out = tmp_path / "tuned.yaml"
    r = run_cli("bench", "tune", str(m), "--arm", "eagle3", "--out", str(out), "--json", "--write-anyway",
                "--results", str(tmp_path / "results"), timeout=900)
    res = json.loads(r.stdout)
    assert r.returncode == (0 if res["decision"] == "adopt the winner" else 3), r.stderr[-3000:]
    assert res["level"] == "server" and res["engine"] == "sglang" and res["noise"] is None
    # topk 1: SGLang sets draft tokens = steps + 1, so 9 combinations are 3 settings
    assert sorted(tuple(t["params"].values()) for t in res["trials"]) == [(1, 1, 2), (2, 1, 3), (5, 1, 6)]
    assert any("topk 1 sets draft tokens" in n for n in res["notes"])
    # one run per rung, every trial launched with its own flags
    from toolkit.results.archive import open_archive

    first = open_archive(res["runs"][0])
    assert sorted(first.manifest.arms) == ["baseline", "t00", "t01", "t02"]
    for t in res["trials"]:
        cmd = first.manifest.arms[t["name"]].command
        assert f"--speculative-num-steps {t['params']['speculative-num-steps']}" in cmd
        preset = first.manifest.arms[t["name"]].preset
        assert {k: preset[k] for k in t["params"]} == t["params"]
    conf = open_archive(res["confirmation"]["runs"][0])
    assert sorted(conf.manifest.arms) == sorted(["baseline", "eagle3", res["best"]["trial"]])
    assert all(c["speedup"] for c in res["confirmation"]["cells"])
    tuned = load_spec(out).model.servers["eagle3"]
    assert {k: tuned[k] for k in res["best"]["params"]} == res["best"]["params"]
    assert "speculative-num-steps: {}  # tuned: bench tune".format(res["best"]["params"]["speculative-num-steps"]) \
        in out.read_text()


def test_server_flags_confirm_with_several_launches_the_launch_as_the_unit(tmp_path):
    """`confirm_launches: 2` on the fake SGLang: the confirmation is one run with `launches: 2` (every arm
    launched twice, rounds interleaved), and the decision's interval is the t-interval over the two rounds'
    geometric means of winner / preset: recomputed here from the archive's records by hand, so a decision that
    fell back to the default launch CV (or to no launch noise at all) would fail."""
    import math

    import numpy as np

    from toolkit.results.archive import open_archive
    from toolkit.stats import quantile

    m = _sglang_tune_matrix(tmp_path, """\
          space:
            eagle3:
              speculative-num-steps: [1, 2]
              speculative-eagle-topk: [1]
              speculative-num-draft-tokens: [2, 3]
          budget: 2
          first_requests: 4
          confirm_requests: 12
          confirm_launches: 2
        """)
    r = run_cli("bench", "tune", str(m), "--arm", "eagle3", "--json", "--results", str(tmp_path / "results"),
                timeout=900)
    res = json.loads(r.stdout)
    assert r.returncode == (0 if res["decision"] == "adopt the winner" else 3), r.stderr[-3000:]
    conf, best = res["confirmation"], res["best"]["trial"]
    [run] = conf["runs"]
    arch = open_archive(run)
    assert arch.manifest.launches == 2 and "launches: 2" in (Path(run).parents[1] / "specs" / "sg-tune-confirm.yaml").read_text()
    session = Path(res["session"])
    assert json.loads((session / "tune.json").read_text())["tune"]["confirm_launches"] == 2
    assert conf["launches"] == 2 and "in each of 2 launches per arm" in (session / "report.md").read_text()
    for c in conf["cells"]:
        assert "t-interval over 2 rounds" in c["ci_method"], c
    d = conf["decision"]
    assert "2 launches per arm, the launch as the unit" in d["interval"] and "default launch CV" not in d["interval"]

    # by hand: per round, the paired rate ratio of the winner over the preset in each usable cell; their
    # geometric mean per round; a t-interval (df 1) over the two rounds
    usable = {(c["domain"], c["concurrency"]) for c in conf["cells"] if not c["excluded"]}
    recs: dict = {}
    for c in arch.cells:
        for x in arch.iter_records(c.key):
            if x.ok and not x.warmup and x.e2e_ms and x.output_tokens > 0:
                recs.setdefault((c.arm, c.domain, c.concurrency, x.launch), {})[(x.repeat, x.prompt_id)] = x

    def rate(arm, cell, k, keys):
        rs = [recs[(arm, *cell, k)][q] for q in keys]
        return sum(x.output_tokens for x in rs) / sum(x.e2e_ms for x in rs)

    rounds = []
    for k in (0, 1):
        logs = []
        for cell in sorted(usable):
            keys = sorted(set(recs[(best, *cell, k)]) & set(recs[("eagle3", *cell, k)]))
            logs.append(math.log(rate(best, cell, k, keys) / rate("eagle3", cell, k, keys)))
        rounds.append(sum(logs) / len(logs))
    mean = sum(rounds) / 2
    h = quantile(0.975, 1) * math.sqrt(np.var(rounds, ddof=1) / 2)
    got = d["vs_preset"]
    assert d["cells"] == len(usable) >= 1
    assert (got["speedup"], got["ci_low"], got["ci_high"]) == pytest.approx(
        (math.exp(mean), math.exp(mean - h), math.exp(mean + h)), rel=1e-9)
