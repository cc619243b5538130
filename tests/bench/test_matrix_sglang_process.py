"""SGLang arms as local processes (`target: {kind: local, launcher: process}`) and external SGLang URLs,
through the real CLI, against the fake launch_server of tests/data/fake_sglang (SGLang's flags parsed by
argparse, its /server_info, /flush_cache and streamed /generate in the shape recorded from 0.5.17).

What the runner must do with them: arms on one GPU set one after another, never measured at once;
/server_info read for every arm (launched or external), archived, compared with the preset; the
48-request cap read from the server; per-request acceptance fields archived; a misspelt flag fails
the arm within seconds with SGLang's own error."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import FAKE_SGLANG, record_dicts
from toolkit.results import compact

pytestmark = pytest.mark.slow


ENV = textwrap.dedent("""\
    kind: Environment
    name: sg-fake
    engine: sglang
    base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
    sglang: {version: 0.5.17}
    servers:
      baseline: &b
        model-path: /models/target
        served-model-name: target
        load-format: dummy
        mem-fraction-static: 0.8
      eagle3: &e
        <<: *b
        speculative-algorithm: EAGLE3
        speculative-draft-model-path: /models/draft
        speculative-num-steps: 3
        speculative-eagle-topk: 1
        speculative-num-draft-tokens: 4
        max-running-requests: 64
      eagle3-metrics:
        <<: *e
        enable-metrics: true
      ngram:
        <<: *b
        speculative-algorithm: NGRAM
      typo:
        <<: *b
        speculative-algoritm: EAGLE3
    """)


def write_specs(tmp: Path, arms: str, target: str, concurrency: str = "[1, 64]", api: str = "generate") -> Path:
    (tmp / "env.yaml").write_text(ENV)
    m = tmp / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: sg
        environment: env.yaml
        arms: {arms}
        target: {target}
        workloads: [coding]
        api: {api}
        concurrency: {concurrency}
        output_len: 12
        requests: 64
        warmup: 2
        """))
    return m


def process_target() -> str:
    return json.dumps({"kind": "local", "launcher": "process", "python": sys.executable,
                       "env": {"PYTHONPATH": str(FAKE_SGLANG)}})


def run_matrix(m: Path, results: Path, code: int = 0, env: dict | None = None) -> tuple[Path, dict, dict]:
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--json", timeout=600, env=env)
    assert r.returncode == code, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    return run, json.loads(compact.read_text(run / "summary.json")), json.loads((run / "manifest.json").read_text())


def checks(summary: dict, name: str) -> list[dict]:
    return [c for c in summary["derived"]["methodology"] if c["check"] == name]


def test_process_arms_one_after_another_with_server_state(tmp_path: Path) -> None:
    m = write_specs(tmp_path, "[baseline, eagle3, ngram]", process_target())
    run, summary, manifest = run_matrix(m, tmp_path / "results", env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")})
    assert summary["status"] == "complete" and len(summary["cells"]) == 6
    assert all(c["status"] == "ok" and c["n_errors"] == 0 for c in summary["cells"])
    # one slot: the arms ran one after another, and the measured windows do not overlap
    assert [s["arms"] for s in manifest["slots"]] == [["baseline", "eagle3", "ngram"]]
    assert manifest["arms"]["eagle3"]["command"].startswith(f"{sys.executable} -m sglang.launch_server --model-path")
    windows = summary["derived"]["timing"]["arms"]
    order = sorted(windows, key=lambda a: windows[a]["start"])
    assert order == ["baseline", "eagle3", "ngram"]
    for a, b in zip(order, order[1:]):
        assert windows[a]["end"] <= windows[b]["start"]
    assert not checks(summary, "arms-overlapped-on-shared-hardware")
    # what the server said, per arm: archived, and the cap read from it (not assumed)
    info = summary["derived"]["arm_info"]
    for arm in ("baseline", "eagle3", "ngram"):
        assert info[arm]["server_info_read"] and info[arm]["engine_version"] == "0.5.17-fake"
        saved = json.loads((run / info[arm]["server_info_file"]).read_text())
        assert saved["served_model_name"] == "target"
        assert info[arm]["preset_mismatches"] == []
    assert info["ngram"]["max_running_requests"] == 48 and info["ngram"]["max_running_requests_implicit"]
    assert info["ngram"]["max_running_requests_source"] == "server_info"
    assert info["eagle3"]["max_running_requests"] == 64 and not info["eagle3"]["max_running_requests_implicit"]
    cap = checks(summary, "concurrency-above-max-running-requests")
    assert len(cap) == 1 and cap[0]["severity"] == "error" and "arm ngram" in cap[0]["message"]
    assert "server_info" in cap[0]["message"]
    # SGLang's own line, quoted from the start-up part of its log
    assert 'its log: "[' in cap[0]["message"] and "Max running requests is reset to 48" in cap[0]["message"]
    assert info["eagle3"]["max_running_requests_log_line"] is None  # the preset sets the flag: no such line
    # one kept cache folder for the environment: the first start compiles into it, the later ones are warm
    launches = {arm: runs[0] for arm, runs in summary["derived"]["launches"].items()}
    assert [launches[a]["warm_start"] for a in ("baseline", "eagle3", "ngram")] == [False, True, True]
    # what each start compiled into it: the target's kernels first, then EAGLE-3's draft's (a warm folder, yet
    # not a warm start), nothing for NGRAM
    assert [launches[a]["compiled_files"] for a in ("baseline", "eagle3", "ngram")] == [1, 1, 0]
    assert len({x["jit_cache"] for x in launches.values()}) == 1
    assert launches["baseline"]["jit_cache"].startswith(str(tmp_path / "cache" / "jit" / "no-gpu"))
    assert info["ngram"]["jit_cache"]["warm"] is True
    # clean stops: SIGINT to the main process only (again when uvicorn offers its force quit), which ends its
    # children; no escalation; the main process's exit and the group's, timed
    for x in launches.values():
        stop = x["stop"]
        assert stop["signals"] == ["SIGINT to the leader", "SIGINT to the leader again (uvicorn's force quit)"]
        assert stop["warnings"] == [] and stop["exit_code"] == 0
        assert 0 < stop["leader_exit_s"] <= stop["group_empty_s"] <= x["stop_s"]
    assert not checks(summary, "server-stop-escalated")
    # where each start-up went, from the server's own log marks
    for x in launches.values():
        p = x["startup_phases"]
        assert set(p) == {"first_line", "server_args", "scheduler", "memory_pool", "ready"}
        assert 0 <= p["first_line"] <= p["server_args"] <= p["scheduler"] <= p["ready"] <= x["startup_s"] + 2
    report = (run / "report.md").read_text()
    assert "baseline launch 0 (cold: no kept cache yet): started " in report and "group " in report
    assert "eagle3 launch 0 (kept cache, yet the start compiled 1 kernel file): started " in report
    assert "ngram launch 0 (warm): started " in report and "ready" in report
    warm = launches["ngram"]["startup_s"]
    assert f"warm starts (the kept cache held files and the start compiled none): 1, {warm:.2f}-{warm:.2f} s;" in report
    assert "stops (until the group was empty): 3, " in report
    # the archived log: the start-up (argv, the cap line, the first health check) and the end
    log = compact.read_text(run / launches["ngram"]["log_file"])
    assert log.startswith("FAKE-SGLANG-ARGV") and "Max running requests is reset to 48" in log
    assert "include_parent=False, pid=" in log.rstrip().splitlines()[-1]  # the end of its own shutdown
    # per-request acceptance, with the server's own spec_* fields, for the speculative arms only
    for arm in ("eagle3", "ngram"):
        key = f"{arm}__coding__c1__r0"
        recs = record_dicts(run, key)
        measured = [r for r in recs if not r.get("warmup")]
        assert len(measured) == 64 and all(r["accept_length"] >= 1 for r in measured)
        assert all(r["spec_meta"]["spec_accept_length"] == r["accept_length"] for r in measured)
        assert {"spec_accept_rate", "spec_num_correct_drafts", "spec_num_proposed_drafts"} <= set(measured[0]["spec_meta"])
        # the server's cumulative acceptance after the cell, flushed before it
        assert info[arm]["cells"][key]["avg_spec_accept_length"] == pytest.approx(measured[0]["accept_length"], rel=0.2)
    assert not any("accept_length" in r for r in record_dicts(run, "baseline__coding__c1__r0"))
    # one slot: wall time is the sum of its parts
    assert 0.9 < summary["derived"]["timing"]["overhead_ratio"] < 1.5
    assert run_cli("results", "verify", str(run)).returncode == 0
    # the stored report is `results report`'s of the archive (the /server_info lines came in the order the arms
    # finished, sorted when read back, before the runner rendered it from what it stored)
    assert run_cli("results", "report", str(run), "-o", str(tmp_path / "again")).returncode == 0
    again = (tmp_path / "again" / "report.md").read_text().split("\n## Plots\n")[0]
    assert again == report.split("\nPlots: `toolkit results report")[0]


def test_chat_api_takes_acceptance_from_the_server(tmp_path: Path) -> None:
    """Over chat no steps reach the client: with --enable-metrics the cell's figure comes from the /metrics
    counters over the measured requests; without, from /server_info's average since the flush before the
    cell. The fake drafts 1, 2, 3 tokens per step in turn: 12 tokens in 6 steps, 2.0 for every request."""
    m = write_specs(tmp_path, "[eagle3, eagle3-metrics]", process_target(), concurrency="[1, 4]", api="chat")
    run, summary, _ = run_matrix(m, tmp_path / "results")
    by = {(c["arm"], c["concurrency"]): c for c in summary["cells"]}
    assert len(by) == 4 and all(c["status"] == "ok" for c in by.values())
    for c in (1, 4):
        srv = by[("eagle3-metrics", c)]
        assert srv["accept_source"] == "server-metrics"
        assert srv["accept_counts"] == {"tokens": 64 * 12.0, "steps": 64 * 6.0, "requests": 64.0}
        info = by[("eagle3", c)]
        assert info["accept_source"] == "server-info" and info["accept_counts"] is None
        for cell in (srv, info):
            assert cell["metrics"]["accept_length"]["p50"] == 2.0
    assert not [c for c in summary["derived"]["methodology"] if c["check"].startswith("acceptance-")]
    assert run_cli("results", "verify", str(run)).returncode == 0


def test_misspelt_flag_fails_the_arm_in_seconds_with_sglangs_error(tmp_path: Path) -> None:
    m = write_specs(tmp_path, "[baseline, typo]", process_target(), concurrency="[1]")
    t = time.monotonic()
    run, summary, _ = run_matrix(m, tmp_path / "results", code=1)  # a failed arm: partial, exit 1
    assert time.monotonic() - t < 120
    assert summary["status"] == "partial" and summary["interrupted"] is False
    typo = [c for c in summary["cells"] if c["arm"] == "typo"]
    assert typo and typo[0]["status"] == "failed"
    assert "exited with code 2 during start-up: launch_server.py: error: unrecognized arguments: --speculative-algoritm EAGLE3" in typo[0]["reason"]
    assert "unrecognized arguments: --speculative-algoritm EAGLE3" in typo[0]["log_tail"]
    assert "unrecognized arguments" in compact.read_text(run / "logs" / "typo.log")


@pytest.fixture()
def two_servers(tmp_path: Path):
    """Two fake SGLang servers already running (as a user's own): one as the preset says, one started with
    another max-running-requests than its preset."""
    from toolkit.serve import SGLangProcessLauncher

    env = {"PYTHONPATH": str(FAKE_SGLANG)}
    base = SGLangProcessLauncher({"model-path": "/models/target", "served-model-name": "target",
                                  "load-format": "dummy", "mem-fraction-static": 0.8},
                                 log_path=tmp_path / "a.log", env=env)
    spec = SGLangProcessLauncher({"model-path": "/models/target", "served-model-name": "target",
                                  "load-format": "dummy", "mem-fraction-static": 0.8,
                                  "speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/models/draft",
                                  "speculative-num-steps": 3, "speculative-eagle-topk": 1,
                                  "speculative-num-draft-tokens": 4, "max-running-requests": 32},
                                 log_path=tmp_path / "b.log", env=env)
    for s in (base, spec):
        s.wait_healthy(60)
    yield base, spec
    for s in (base, spec):
        s.stop()


def test_external_urls_on_one_host_run_in_turn_and_server_state_is_checked(tmp_path: Path, two_servers) -> None:
    base, spec = two_servers
    urls = {"baseline": base.base_url, "eagle3": spec.base_url}
    m = write_specs(tmp_path, "[baseline, eagle3]", json.dumps({"kind": "external", "urls": urls}),
                    concurrency="[1]")
    run, summary, manifest = run_matrix(m, tmp_path / "results")
    # both URLs are on 127.0.0.1: one slot, one after another
    assert [s["arms"] for s in manifest["slots"]] == [["baseline", "eagle3"]]
    assert not checks(summary, "arms-overlapped-on-shared-hardware")
    info = summary["derived"]["arm_info"]
    assert info["eagle3"]["server_info_read"] and info["eagle3"]["max_running_requests"] == 32
    mm = checks(summary, "server-differs-from-preset")
    assert len(mm) == 1 and mm[0]["severity"] == "error"
    assert "max_running_requests=32" in mm[0]["message"] and "max-running-requests: 64" in mm[0]["message"]
    assert info["eagle3"]["preset_mismatches"] == [{"flag": "max-running-requests", "preset": 64, "server": 32}]

    # declared independent, they run side by side: allowed, and the overlap is then no error
    m2 = write_specs(tmp_path, "[baseline, eagle3]",
                     json.dumps({"kind": "external", "urls": urls, "independent": True}), concurrency="[1]")
    run2, summary2, manifest2 = run_matrix(m2, tmp_path / "results2")
    assert sorted(s["arms"] for s in manifest2["slots"]) == [["baseline"], ["eagle3"]]
    assert not checks(summary2, "arms-overlapped-on-shared-hardware")


def test_sglang_arms_sharing_gpus_in_parallel_is_refused(tmp_path: Path) -> None:
    m = write_specs(tmp_path, "[baseline, eagle3]", json.dumps({"kind": "local", "parallel": 2}))
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "r"))
    assert r.returncode == 2 and "m.yaml:" in r.stderr and "gpus:" in r.stderr
    assert "Traceback" not in r.stderr


def test_gpu_sets_make_one_slot_each(tmp_path: Path) -> None:
    target = json.loads(process_target())
    target["gpus"] = ["0", "1"]
    m = write_specs(tmp_path, "[baseline, eagle3, ngram]", json.dumps(target), concurrency="[1]")
    run, summary, manifest = run_matrix(m, tmp_path / "results")
    assert [(s["name"], s["arms"]) for s in manifest["slots"]] == [("gpus-0", ["baseline", "ngram"]),
                                                                   ("gpus-1", ["eagle3"])]
    assert "CUDA_VISIBLE_DEVICES" not in manifest["arms"]["eagle3"]["command"]
    logs = {a: compact.read_text(run / "logs" / f"{a}.log") for a in ("baseline", "eagle3")}
    assert "CUDA_VISIBLE_DEVICES=0\n" in logs["baseline"] and "CUDA_VISIBLE_DEVICES=1\n" in logs["eagle3"]
    windows = summary["derived"]["timing"]["arms"]
    assert windows["eagle3"]["hardware"] == {"host": "localhost", "gpus": "1"}
    assert not checks(summary, "arms-overlapped-on-shared-hardware")
