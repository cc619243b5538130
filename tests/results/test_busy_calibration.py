"""A noise calibration made on a busy host is refused (issue 42: one at ±2504 % was used silently by every
later diff): diff, reproduce, the single-launch gate and the run's own speed-ups never use it, say why (the
host-load record of its cells) and fall back to the default floor / default launch CV, or to an older clean
calibration. Busy-host runs are screened out of the between-machine variance too."""

from __future__ import annotations

import json
from pathlib import Path

from tests.results.test_machines import _run
from tests.synthetic import write_run
from toolkit.bench.derive import speedup_noise
from toolkit.results.archive import open_archive
from toolkit.results.diff import DEFAULT_FLOOR, diff_runs
from toolkit.results.machines import machine_variance
from toolkit.results.noise import busy_host, find_calibration

KW = {"launch_cv": 0.03, "n": 60, "env_hash": "f" * 64}
BUSY = {"check": "busy-host", "message": "other processes wanted 14.0 cores while this run used 1.0 of 16: the "
                                         "cell's figures include their load"}


def make_busy(run: Path) -> Path:
    """The run's cells as the runner archives them when hostload saw other work (CellSummary.checks)."""
    for f in sorted((run / "cells").glob("*.json")):
        cell = json.loads(f.read_text())
        cell["checks"] = [*cell.get("checks", []), BUSY]
        f.write_text(json.dumps(cell))
    return run


def test_busy_host_reads_the_cells_host_load_record(tmp_path: Path) -> None:
    run = write_run(tmp_path, seed=40, launches=2, purpose="noise-calibration", **KW)
    assert busy_host(open_archive(run)) is None
    why = busy_host(open_archive(make_busy(run)))
    assert why is not None and "busy in 16 of 16 cells" in why and "14.0 cores" in why


def test_a_busy_calibration_is_refused_by_diff_and_the_gate_with_the_reason(tmp_path: Path, cli) -> None:
    cal = make_busy(write_run(tmp_path, seed=41, launches=3, purpose="noise-calibration", **KW))
    a, b = write_run(tmp_path, seed=42, **KW), write_run(tmp_path, seed=43, **KW)
    refused: list[str] = []
    assert find_calibration(tmp_path, open_archive(a), refused) is None
    assert refused and refused[0].startswith(f"calibration {cal.name} refused: its host was busy")
    r = diff_runs(open_archive(a), open_archive(b))
    assert r.calibration is None and r.calibration_refused == refused
    assert all(x.source == DEFAULT_FLOOR for x in r.noise.values())  # the fallback: the default floor
    assert all(m.noise in (DEFAULT_FLOOR, "") for c in r.cells for m in c.metrics.values())
    # the same calibration given explicitly is refused too
    assert diff_runs(open_archive(a), open_archive(b), calibration=open_archive(cal)).calibration is None
    out = cli("results", "diff", str(a), str(b), "--fail-on-regression", "5")
    assert f"calibration {cal.name} refused: its host was busy" in out.stdout
    assert "the gate uses the default floor instead" in out.stderr
    assert "no usable calibration" in out.stdout


def test_an_older_clean_calibration_is_used_instead_and_the_refusal_said(tmp_path: Path) -> None:
    clean = write_run(tmp_path, seed=44, launches=3, purpose="noise-calibration", **KW)
    clean = clean.rename(clean.with_name("20000101T000000Z-000000"))  # older than any run written now
    busy = make_busy(write_run(tmp_path, seed=45, launches=3, purpose="noise-calibration", **KW))
    a, b = write_run(tmp_path, seed=46, **KW), write_run(tmp_path, seed=47, **KW)
    r = diff_runs(open_archive(a), open_archive(b))
    clean_id, busy_id = open_archive(clean).run_id, open_archive(busy).run_id
    assert r.calibration == clean_id
    assert len(r.calibration_refused) == 1 and busy_id in r.calibration_refused[0]
    assert f"calibration {clean_id} (older) used instead" in r.calibration_refused[0]


def test_a_single_launch_runs_speedups_refuse_a_busy_calibration(tmp_path: Path) -> None:
    cal = make_busy(write_run(tmp_path, seed=48, launches=3, purpose="noise-calibration", **KW))
    run = write_run(tmp_path, seed=49, **KW)
    noise, note = speedup_noise(run, 1)
    assert note["source"] == "default" and note["calibration_refused"][0].startswith(f"calibration {cal.name} refused")
    assert noise("eagle3").source == "default"


def test_reproduce_says_why_it_did_not_use_the_calibration(tmp_path: Path) -> None:
    from toolkit.bench.reproduce import compare_runs, reproduce_text

    cal = make_busy(write_run(tmp_path, seed=50, launches=3, purpose="noise-calibration", **KW))
    a, b = write_run(tmp_path, seed=51, **KW), write_run(tmp_path, seed=52, **KW)
    rep = compare_runs(open_archive(a), open_archive(b), "complete")
    assert rep.verdict != "reproduced" or rep.diff.calibration is None
    assert rep.to_dict()["calibration_refused"][0].startswith(f"calibration {cal.name} refused")
    assert f"calibration {cal.name} refused: its host was busy" in reproduce_text(rep)


def test_busy_host_pairs_are_screened_out_of_the_machine_variance(tmp_path: Path) -> None:
    root = tmp_path / "results"
    _run(root, 6, uuid="GPU-1", launches=2, launch_cv=0.05)
    busy = make_busy(_run(root, 7, uuid="GPU-2", launches=2, launch_cv=0.05, slowdown={"baseline": 1.6}))
    mv = machine_variance(root, ["tpot_ms"])["tpot_ms"]
    # the only cross-machine pair has a busy side: no pair left, the prior, and the source says what was left out
    assert mv.source.startswith("default prior") and f"busy host left out ({busy.name})" in mv.source
    _run(root, 8, uuid="GPU-3", launches=2, launch_cv=0.05, slowdown={"baseline": 1.05})
    mv = machine_variance(root, ["tpot_ms"])["tpot_ms"]
    assert "cross-machine A/A pair" in mv.source and mv.df == 1 and busy.name in mv.source


def test_bench_noise_says_at_once_that_its_calibration_will_be_refused(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    import toolkit.bench.matrix as bench_matrix
    from tests.conftest import ROOT
    from toolkit.bench.noise import calibrate
    from toolkit.specs import load_spec

    busy = make_busy(write_run(tmp_path / "results", seed=53, launches=3, purpose="noise-calibration", **KW))
    spec = tmp_path / "m.yaml"
    spec.write_text((ROOT / "envs/matrices/quickstart.yaml").read_text().replace(
        "environment: ../local-cpu-pair.yaml", f"environment: {ROOT / 'envs/local-cpu-pair.yaml'}"))
    monkeypatch.setattr(bench_matrix, "run_matrix", lambda *a, **k: SimpleNamespace(path=busy))
    said: list[str] = []
    calibrate(load_spec(spec, expect="Matrix"), results_root=tmp_path / "results", log=said.append)
    assert any("its host was busy" in line and "will refuse it" in line for line in said)
