"""A calibration older than the environment hash is refused (issue 42 item 2): one made by `toolkit bench noise`
for the same Environment (manifest `environment.name`) before its spec changed (another hash) measured the old
environment's launch noise. Every place that uses a calibration (diff, the gate, reproduce, the run's one-round
speed-ups, the plan's power line, the run report's minimum detectable effect) refuses it, naming both hashes and
the fix, and falls back to an older calibration of this hash or to the default. A calibration of another
Environment is simply not this one's (no refusal); one of the other judged run's hash is that run's."""

from __future__ import annotations

from pathlib import Path

from tests.synthetic import manifest_for, write_run
from toolkit.bench.derive import speedup_noise
from toolkit.bench.power import plan_power
from toolkit.results.archive import open_archive
from toolkit.results.diff import DEFAULT_FLOOR, diff_runs
from toolkit.results.noise import find_calibration

OLD, NEW = "0ld" + "a" * 61, "1ew" + "b" * 61
KW = {"launch_cv": 0.03, "n": 60}


def _cal(root: Path, seed: int, env_hash: str, name: str = "synthetic-env") -> Path:
    man = manifest_for({"baseline": ["python"], "eagle3": ["python", "--speculative-algorithm", "EAGLE3"]})
    man["environment"]["name"] = name
    return write_run(root, seed=seed, launches=3, purpose="noise-calibration", env_hash=env_hash, manifest=man,
                     arms={"baseline": ["python"], "eagle3": ["python", "--speculative-algorithm", "EAGLE3"]}, **KW)


def _runs(root: Path, seed: int, hash_b: str = NEW) -> tuple[Path, Path]:
    return write_run(root, seed=seed, env_hash=NEW, **KW), write_run(root, seed=seed + 1, env_hash=hash_b, **KW)


def test_a_calibration_of_an_older_hash_is_refused_naming_both_hashes_and_the_fix(tmp_path: Path, cli) -> None:
    cal = _cal(tmp_path, 1, OLD)
    a, b = _runs(tmp_path, 2)
    refused: list[str] = []
    assert find_calibration(tmp_path, open_archive(a), refused) is None
    why = refused[0]
    assert why.startswith(f"calibration {cal.name} refused: it was made for environment synthetic-env hash "
                          f"{OLD[:12]}, the runs judged are hash {NEW[:12]}")
    assert "re-run `toolkit bench noise MATRIX` for this environment" in why and "--tolerance" in why
    r = diff_runs(open_archive(a), open_archive(b))
    assert r.calibration is None and r.calibration_refused == [why]
    assert all(x.source == DEFAULT_FLOOR for x in r.noise.values())
    # given explicitly: refused too
    given = diff_runs(open_archive(a), open_archive(b), calibration=open_archive(cal))
    assert given.calibration is None and given.calibration_refused == [why]
    out = cli("results", "diff", str(a), str(b), "--fail-on-regression", "5")
    assert f"calibration {cal.name} refused: it was made for environment synthetic-env" in out.stdout
    assert "the gate uses the default floor instead" in out.stderr


def test_an_older_calibration_of_this_hash_is_used_and_the_newer_stale_one_named(tmp_path: Path) -> None:
    good = _cal(tmp_path, 3, NEW)
    good = good.rename(good.with_name("20000101T000000Z-000000"))  # older than any run written now
    stale = _cal(tmp_path, 4, OLD)
    a, b = _runs(tmp_path, 5)
    r = diff_runs(open_archive(a), open_archive(b))
    assert r.calibration == open_archive(good).run_id
    assert len(r.calibration_refused) == 1 and stale.name in r.calibration_refused[0]
    assert r.calibration_refused[0].endswith(f"calibration {r.calibration} (older) used instead")


def test_another_environments_calibration_is_not_this_ones_and_not_called_refused(tmp_path: Path) -> None:
    _cal(tmp_path, 6, OLD, name="another-env")
    a, b = _runs(tmp_path, 7)
    r = diff_runs(open_archive(a), open_archive(b))
    assert r.calibration is None and r.calibration_refused == []


def test_a_diff_of_two_hashes_uses_the_calibration_of_either_and_refuses_neither(tmp_path: Path) -> None:
    cal = _cal(tmp_path, 8, OLD)  # B's hash: the diff judges A (NEW) against B (OLD)
    a, b = _runs(tmp_path, 9, hash_b=OLD)
    r = diff_runs(open_archive(a), open_archive(b))
    assert r.calibration == open_archive(cal).run_id and r.calibration_refused == []
    given = diff_runs(open_archive(a), open_archive(b), calibration=open_archive(cal))
    assert given.calibration == open_archive(cal).run_id


def test_reproduce_speedups_power_and_the_report_refuse_it(tmp_path: Path) -> None:
    from toolkit.bench.reproduce import compare_runs, reproduce_text
    from toolkit.results.report.noise import power_data

    cal = _cal(tmp_path, 10, OLD)
    a, b = _runs(tmp_path, 11)
    rep = compare_runs(open_archive(a), open_archive(b), "complete")
    assert f"calibration {cal.name} refused: it was made for environment" in reproduce_text(rep)
    noise, note = speedup_noise(a, 1)
    assert note["source"] == "default" and OLD[:12] in note["calibration_refused"][0]
    line = plan_power(NEW, 1, 60, tmp_path, env_name="synthetic-env")
    assert "default launch CV" in line and f"calibration {cal.name} refused" in line
    assert f"calibration {cal.name}" in plan_power(OLD, 1, 60, tmp_path, env_name="synthetic-env")
    data = power_data(open_archive(a))
    assert data is not None and f"calibration {cal.name} refused" in data.source
