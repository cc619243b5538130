"""The machine as a level (toolkit/results/machines.py, docs/results.md#the-machine-level): each launch's
machine, a run whose launches span machines, a comparison across machines saying so and adding the
between-machine variance, older archives read as the host fingerprint or an unknown machine."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.synthetic import manifest_for, write_run
from toolkit.bench.hostinfo import launch_machine
from toolkit.schema.manifest import Hardware
from toolkit.results.archive import open_archive
from toolkit.results.diff import diff_runs
from toolkit.stats import machine_prior
from toolkit.results.machines import (Machine, cross_machines, machine_of, machine_variance, pair_figure,
                                      run_machines)

ARMS = {"baseline": ["python", "-m", "sglang.launch_server"]}


def _manifest(host: str, uuid: str) -> dict:
    man = manifest_for(ARMS)
    gpu = {**man["host"]["controller"]["gpu"], "gpus": [{"index": 0, "name": "H200", "uuid": uuid}]}
    return {**man, "host": {"controller": {**man["host"]["controller"], "hostname": host, "gpu": gpu}, "hosts": {}}}


def _run(root: Path, seed: int, host: str = "vm", uuid: str = "GPU-aaaa", **kw) -> Path:
    return write_run(root, seed=seed, arms=ARMS, manifest=_manifest(host, uuid), n=60, **kw)


def test_launch_machine_names_the_host_and_the_gpus_used() -> None:
    gpus = lambda: ((0, "GPU-a"), (1, "GPU-b"))  # noqa: E731
    rec = launch_machine(Hardware(host="localhost", gpus="1"), local_gpus=gpus)
    assert rec.gpus == ["GPU-b"] and rec.host and rec.host != "localhost"
    assert launch_machine(Hardware(host="localhost", gpus="all"), local_gpus=gpus).gpus == ["GPU-a", "GPU-b"]
    remote = launch_machine(Hardware(host="10.0.0.2", gpus="all"), "h1",
                            host_gpus=lambda h: gpus() if h == "h1" else ())
    assert remote.model_dump(exclude_unset=True) == {"host": "10.0.0.2", "gpus": ["GPU-a", "GPU-b"], "gpu_ids": "all"}
    assert launch_machine(Hardware(host="node7", gpus="0"), host_gpus=lambda h: ()).gpus is None
    assert machine_of(rec) == Machine(rec.host, ("GPU-b",))


def test_old_archive_reads_the_manifest_fingerprint_or_unknown(tmp_path: Path) -> None:
    rm = run_machines(open_archive(_run(tmp_path, 1, uuid="GPU-1")))
    assert rm.source == "manifest" and rm.known and not rm.spans and "host fingerprint" in rm.text()
    bare = manifest_for(ARMS)
    bare["host"] = {"controller": {"hostname": None}, "hosts": {}}
    unknown = run_machines(open_archive(write_run(tmp_path, seed=2, arms=ARMS, manifest=bare, n=60)))
    assert not unknown.known and "unknown machine" in unknown.text()


def _set_launch_machines(run: Path, machines: list[dict]) -> None:
    """Give the run's launches recorded machines (as the runner writes them: derived.launches[arm][i].machine)."""
    summary = json.loads((run / "summary.json").read_text())
    summary["derived"]["launches"] = {"baseline": [{"arm": "baseline", "launch": i, "machine": m}
                                                   for i, m in enumerate(machines)]}
    (run / "summary.json").write_text(json.dumps(summary))


def test_a_run_whose_launches_span_machines_is_flagged(tmp_path: Path) -> None:
    run = _run(tmp_path, 3, launches=2, launch_cv=0.05)
    _set_launch_machines(run, [{"host": "vm", "gpus": ["GPU-1"]}, {"host": "vm", "gpus": ["GPU-2"]}])
    rm = run_machines(open_archive(run))
    assert rm.source == "launches" and rm.spans and "2 machines" in rm.text()


def test_cross_machine_diff_says_so_and_widens_its_intervals(tmp_path: Path) -> None:
    a = open_archive(_run(tmp_path / "r", 4, uuid="GPU-1", launches=3, launch_cv=0.05))
    same = open_archive(_run(tmp_path / "r", 5, uuid="GPU-1", launches=3, launch_cv=0.05))
    other = open_archive(_run(tmp_path / "other", 5, uuid="GPU-2", launches=3, launch_cv=0.05))
    assert cross_machines(a, same).status == "same" and cross_machines(a, other).different
    d_same, d_other = diff_runs(a, same, metrics=["tpot_ms"]), diff_runs(a, other, metrics=["tpot_ms"])
    assert not d_same.cross_machine and d_other.cross_machine
    assert d_other.machines.variance["tpot_ms"].source.startswith("default prior")
    ms, mo = d_same.cells[0].metrics["tpot_ms"], d_other.cells[0].metrics["tpot_ms"]
    assert mo.se > ms.se and "machine level" in mo.noise  # same requests, same launches: only the level differs
    from toolkit.results.report import build_diff_report, render_text

    text = render_text(build_diff_report(a, other, d_other))
    assert "different machines" in text and "between-machine variance from: default prior" in text


def test_machine_variance_from_committed_cross_machine_pairs(tmp_path: Path) -> None:
    root = tmp_path / "results"
    _run(root, 6, uuid="GPU-1", launches=2, launch_cv=0.05)
    _run(root, 7, uuid="GPU-2", launches=2, launch_cv=0.05, slowdown={"baseline": 1.2})
    mv = machine_variance(root, ["tpot_ms", "ttft_ms"])
    assert "cross-machine A/A pair" in mv["tpot_ms"].source and mv["tpot_ms"].df == 1
    d, _ = pair_figure(*[open_archive(p.parent) for p in sorted(root.glob("*/*/manifest.json"))], "tpot_ms")
    assert abs(abs(d) - math.log(1.2)) < 0.08
    assert mv["tpot_ms"].var > 0
    assert machine_variance(tmp_path / "none", ["ttft_ms"])["ttft_ms"] == machine_prior("ttft_ms")


def test_show_flags_a_run_spanning_machines_and_gives_a_one_launch_runs_mde(tmp_path: Path) -> None:
    from toolkit.results.report import build_run_report, render_text

    spans = _run(tmp_path, 8, launches=2, launch_cv=0.05)
    _set_launch_machines(spans, [{"host": "vm", "gpus": ["GPU-1"]}, {"host": "vm", "gpus": ["GPU-2"]}])
    rep = build_run_report(open_archive(spans))
    assert "SPANS MACHINES" in render_text(rep) and rep.data["machines"]["spans"]
    assert rep.data["noise"]["arms"]["baseline"]["tpot_ms"]["launches_for"]["10"] >= 2
    one = build_run_report(open_archive(_run(tmp_path, 9)))
    text = render_text(one)
    assert "SPANS MACHINES" not in text and "Minimum detectable effect" in text
    x = one.data["power"]["arms"]["baseline"]["tpot_ms"]
    assert 45 < x["mde_pct"] < 52 and x["mde_across_machines_pct"] > x["mde_pct"]  # the default 10 % launch CV
    assert "default launch CV" in one.data["power"]["source"]


def test_plan_power_line_names_launches_and_its_source(tmp_path: Path) -> None:
    from toolkit.bench.power import plan_power

    line = plan_power("e" * 64, 3, 200, tmp_path)
    assert line.startswith("power: to find a 10% change with 80% power")
    assert "ttft_ms (launch CV 10%): 19 launches per arm" in line and "default launch CV" in line
    root = tmp_path / "results"
    write_run(root, seed=10, arms=ARMS, n=60, launches=3, launch_cv=0.2, purpose="noise-calibration")
    cal = plan_power("e" * 64, 3, 200, root)
    assert "calibration" in cal and "requests per cell-launch" in cal


def test_single_launch_cross_machine_diff_widens_the_default_floor(tmp_path: Path) -> None:
    from toolkit.stats import DEFAULT_FLOOR_PCT

    a = open_archive(_run(tmp_path / "r", 11, uuid="GPU-1"))
    same = diff_runs(a, open_archive(_run(tmp_path / "r", 12, uuid="GPU-1")), metrics=["tpot_ms"])
    other = diff_runs(a, open_archive(_run(tmp_path / "x", 12, uuid="GPU-2")), metrics=["tpot_ms"])
    assert same.floor_pct == DEFAULT_FLOOR_PCT and other.floor_pct > DEFAULT_FLOOR_PCT


def test_reproduce_verdict_across_machines_says_so(tmp_path: Path) -> None:
    from toolkit.bench.reproduce import compare_runs, reproduce_text

    a = open_archive(_run(tmp_path / "r", 13, uuid="GPU-1", launches=3, launch_cv=0.05))
    b = open_archive(_run(tmp_path / "x", 14, uuid="GPU-2", launches=3, launch_cv=0.05))
    text = reproduce_text(compare_runs(a, b))
    assert "across machines, the machine level included" in text and "machines: the runs ran on different" in text
    same = reproduce_text(compare_runs(a, open_archive(_run(tmp_path / "r", 15, uuid="GPU-1", launches=3,
                                                             launch_cv=0.05))))
    assert "across machines" not in same


def test_the_judged_pair_never_estimates_its_own_machine_level(tmp_path: Path) -> None:
    """An A/A replay on another machine, under the same results root as its reference, is itself a cross-machine
    pair: judging it with a machine variance estimated from itself would set the margin from the judged data."""
    root = tmp_path / "results"
    a = open_archive(_run(root, 6, uuid="GPU-1", launches=2, launch_cv=0.05))
    b = open_archive(_run(root, 7, uuid="GPU-2", launches=2, launch_cv=0.05, slowdown={"baseline": 1.2}))
    assert "cross-machine A/A pair" in machine_variance(root, ["tpot_ms"])["tpot_ms"].source
    own = machine_variance(root, ["tpot_ms"], judged=(a.run_id, b.run_id))["tpot_ms"]
    assert own.var == machine_prior("tpot_ms").var and "judged run left out" in own.source
    d = diff_runs(a, b, metrics=["tpot_ms"])
    assert d.cross_machine and d.machines.variance["tpot_ms"].source.startswith("default prior")
