"""The matrix runner end to end, through the real CLI, against real `transformers serve` engines."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.helpers import write_matrix
from toolkit.results import compact

pytestmark = pytest.mark.slow


def matrix(tmp: Path, arms: str, extra: str = "", concurrency: str = "[1, 2]") -> Path:
    return write_matrix(tmp, textwrap.dedent(f"""\
        arms: {arms}
        workloads: [coding, math]
        concurrency: {concurrency}
        output_len: 8
        requests: 3
        warmup: 1
        seed: 7
        """) + extra)


def tree_digest(run: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(run)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_ino)
            for p in sorted(run.rglob("*")) if p.is_file()}


def logical_digest(run: Path) -> dict[str, str]:
    """sha256 of each file as readers see it (NAME for a compacted NAME.gz, decompressed; a cell's records,
    either form, as cells/<key>.records: the JSON lines they give)."""
    from toolkit.results.records import cell_key_of, plain_lines, read_records

    out = {}
    for p in sorted(run.rglob("*")):
        if p.is_file() and p.parent.name == "cells" and cell_key_of(p):
            out[f"cells/{cell_key_of(p)}.records"] = hashlib.sha256(plain_lines(read_records(p))).hexdigest()
        elif p.is_file() and p.name not in ("SHA256SUMS", "SHA256SUMS.orig", "RECODED.json"):
            rel = str(p.relative_to(run))
            plain = rel.endswith(".gz") and not rel.endswith(".jsonl.gz")
            out[rel[:-3] if plain else rel] = hashlib.sha256(compact.read_bytes(run / rel[:-3]) if plain
                                                             else p.read_bytes()).hexdigest()
    return out


def only_run(results: Path) -> Path:
    runs = [p for p in (results / "t").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_matrix_parallel_slots_crashing_arm_and_untouched_archive(tmp_path: Path) -> None:
    m = matrix(tmp_path, "[baseline, ngram, broken]", "target: {kind: local, parallel: 2}\n")
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--json", timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]  # failed cells: partial, exit 1 without --allow-failed-cells
    out = json.loads(r.stdout)
    run = Path(out["run"])
    assert out["status"] == "partial" and not out["interrupted"] and out["why"] == "4 of 12 cells failed"
    assert (run / "summary.json.gz").is_file() and not (run / "summary.json").exists()  # compacted at finalize
    assert (run / "SHA256SUMS.orig").is_file() and any(run.glob("logs/*.log.gz"))
    if shutil.which("sha256sum"):
        assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=run).returncode == 0
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "partial" and summary["interrupted"] is False
    cells = summary["cells"]
    assert len(cells) == 3 * 2 * 2
    by_arm: dict[str, list] = {}
    for c in cells:
        by_arm.setdefault(c["arm"], []).append(c)
    # the broken arm failed at start with its log tail; the other arms ran every cell
    assert all(c["status"] == "failed" for c in by_arm["broken"])
    assert "exited" in by_arm["broken"][0]["reason"] and by_arm["broken"][0]["log_tail"]
    for arm in ("baseline", "ngram"):
        assert all(c["status"] == "ok" and c["n_requests"] == 3 and c["n_errors"] == 0 for c in by_arm[arm]), arm
    # two slots: baseline and broken share one engine slot, ngram has its own
    manifest = json.loads((run / "manifest.json").read_text())
    assert sorted(len(s["arms"]) for s in manifest["slots"]) == [1, 2]
    # paired: every arm saw the same prompts per cell
    d = summary["derived"]
    assert not [c for c in d["methodology"] if c["check"] == "arms-saw-different-prompts"]
    assert {(s["arm"], s["domain"], s["concurrency"]) for s in d["speedups"]} >= {
        ("ngram", "coding", 1), ("ngram", "math", 2)}
    assert any(c["check"] == "cell-failed" for c in d["methodology"])
    assert (run / "report.md").read_text().count("| ngram |") >= 4
    # the report stored at finalize says when the run finished, as summary.json does (it read "-" before)
    line = next(ln for ln in (run / "report.md").read_text().splitlines() if "started / finished" in ln)
    assert summary["finished_at"] and line.endswith(f"/ {summary['finished_at']}"), line
    # later commands read the archive and change nothing in it
    before = tree_digest(run)
    said = {}
    for args in (["results", "verify", str(run)], ["results", "show", str(run)],
                 ["results", "list", "--root", str(results)], ["results", "report", str(run), "-o",
                                                                str(tmp_path / "rep")]):
        rr = run_cli(*args, timeout=300)
        assert rr.returncode == 0, (args, rr.stderr[-2000:])
        said[args[1]] = rr.stdout
    assert tree_digest(run) == before
    # `partial` everywhere: the archive, the list, show, verify and the report
    assert "partial (4 failed)" in said["list"]
    assert "status                   partial (4 of 12 cells failed)" in said["show"]
    assert "archive intact; run partial (4 of 12 cells failed)" in said["verify"]
    assert "- **status**: partial (4 of 12 cells failed)" in (run / "report.md").read_text()
    # every cell ran: nothing to resume (and a finalized run is never rewritten)
    rr = run_cli("bench", "matrix", str(m), "--results", str(results), "--resume", str(run))
    assert rr.returncode == 2 and "was not interrupted" in rr.stderr
    assert tree_digest(run) == before


def test_killed_run_resumes_only_missing_cells(tmp_path: Path) -> None:
    m = matrix(tmp_path, "[baseline, ngram]", concurrency="[1, 2]")
    results = tmp_path / "results"
    env = dict(os.environ, NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "bench", "matrix", str(m), "--results",
                             str(results)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 300
    first: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        first = list(results.glob("t/*/cells/*.json"))
        if first:
            break
        time.sleep(0.2)
    assert first, "no cell finished before the deadline"
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output  # interrupted (README "Exit codes")
    run = only_run(results)
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "partial" and summary["interrupted"] is True, output[-2000:]
    assert "run partial (interrupted after" in output and "--resume completes it" in output
    done_before = {p.name for p in compact.glob(run / "cells", "*.json")}
    assert 0 < len(done_before) < 8
    # an interrupted run is left plain (resume reads and appends to it), then compacted once complete
    assert (run / "summary.json").is_file() and not list(run.rglob("*.json.gz")) and not (run / "SHA256SUMS.orig").exists()
    before = {k: v for k, v in logical_digest(run).items() if k.startswith("cells/")}
    # no engine outlives the killed run
    from toolkit.serve import model_dir_for
    from toolkit.specs import load_spec

    model_dir = str(model_dir_for(load_spec(tmp_path / "env.yaml")))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _serving(model_dir):
        time.sleep(0.2)
    assert not _serving(model_dir), "a transformers serve process outlived the killed run"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--resume", str(run), "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    after = logical_digest(run)
    for k, v in before.items():
        assert after[k] == v, f"{k} was rewritten by --resume"
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert summary["status"] == "complete" and len(summary["cells"]) == 8
    assert (run / "summary.json.gz").is_file() and not (run / "summary.json").exists()  # compacted once complete
    assert run_cli("results", "verify", str(run)).returncode == 0


def _serving(model_dir: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "serve" in cmd and model_dir in cmd:
                return True
    return False


def test_matrix_with_training_data_scores_workloads_and_strict_fails(tmp_path: Path) -> None:
    from tests.workloads.synth import write_training

    write_training(tmp_path / "train.jsonl")
    m = matrix(tmp_path, "[baseline, ngram]", "training_data: train.jsonl\n", concurrency="[1]")
    m.write_text(m.read_text().replace("workloads: [coding, math]", "workloads: [encyclopedic, match-training]")
                 .replace("requests: 3", "requests: 2"))
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--strict", timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]  # --strict: a workload far from the training data is an error
    run = only_run(results)
    assert f"run complete: {run}" in r.stdout
    # the runner's printed tables are `results show`'s, from the one report model
    show = run_cli("results", "show", str(run))
    assert show.returncode == 0 and "Cells\narm " in show.stdout and show.stdout in r.stdout
    summary = json.loads(compact.read_text(run / "summary.json"))
    d = summary["derived"]
    verdicts = {x["workload"]: x["verdict"] for x in d["representativeness"]}
    assert verdicts["encyclopedic"] == "far" and verdicts["match-training"] == "close"
    far = [c for c in d["methodology"] if c["check"] == "workload-far-from-training-data"]
    assert len(far) == 1 and "encyclopedic" in far[0]["message"]
    assert "methodology error: [workload-far-from-training-data]" in r.stderr
    assert {c["domain"] for c in summary["cells"]} == {"encyclopedic", "match-training"}
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["workloads"]) == {"encyclopedic", "match-training"}
    assert all(len(w["hash"]) == 64 for w in manifest["workloads"].values())
    # report.md (written by the runner at finalize) has the same cells table as `results report`
    cells_md = (run / "report.md").read_text().split("## Cells")[1].split("\n\n")[1]
    assert cells_md.count("\n| ngram |") == 2 and "| tok/s |" in cells_md
    # ... and is the report `results report` makes of the archive afterwards, whole: the runner renders it from
    # what it stored (its /server_info lines were in the order the arms finished before, sorted when read back)
    out = tmp_path / "again"
    assert run_cli("results", "report", str(run), "-o", str(out)).returncode == 0
    stored, again = (run / "report.md").read_text(), (out / "report.md").read_text()
    assert "\nPlots: `toolkit results report" in stored and "\n## Plots\n" in again  # drawn by report -o only
    assert again.split("\n## Plots\n")[0] == stored.split("\nPlots: `toolkit results report")[0]
