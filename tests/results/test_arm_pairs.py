"""Any two arms of one run compared (`results show/report --pair ARM/REF`, issue 45: engines as arms), made as
the runner makes the speed-ups over the baseline (toolkit.results.speedups), and how the arms' Environments
differ where they come from several. On seeded synthetic runs written through the real archive writer."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.synthetic import manifest_for, write_run

ARMS = {"baseline": ["python", "-m", "sglang.launch_server"],
        "eagle3": ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"],
        "other": ["python", "-m", "vllm.entrypoints.cli.main", "serve", "/m"]}


def _run(tmp: Path, launches: int = 2, manifest: dict | None = None) -> Path:
    return write_run(tmp / "results", seed=3, n=40, arms=ARMS, launches=launches, launch_cv=0.05,
                     slowdown={"other": 1.3}, manifest=manifest)


def _rows(a, arm: str, ref: str) -> dict:
    from toolkit.results.speedups import pair_speedups

    return {(r.domain, r.concurrency): r for r in pair_speedups(a, arm, ref)}


def test_a_pair_is_the_runners_speedup_with_another_reference(tmp_path: Path) -> None:
    from toolkit.results.archive import open_archive
    from toolkit.results.speedups import speedups

    a = open_archive(_run(tmp_path))
    records: dict = defaultdict(list)
    for c in a.cells:
        records[(c.arm, c.domain, c.level)].extend(a.iter_records(c.key))
    over_base = {(r.arm, r.domain, r.concurrency): r for r in speedups(a.cells, records, "baseline", seed=0)}
    mine = _rows(a, "eagle3", "baseline")
    assert len(mine) == 4 and all(r.baseline == "baseline" and r.rounds == 2 for r in mine.values())
    for (d, c), r in mine.items():  # over the baseline: exactly the runner's row
        assert r.model_dump() == over_base[("eagle3", d, c)].model_dump()
    ab, ba = _rows(a, "eagle3", "other"), _rows(a, "other", "eagle3")
    assert set(ab) == set(mine)
    for k, r in ab.items():
        assert r.arm == "eagle3" and r.baseline == "other" and "t-interval over 2 rounds" in r.ci_method
        # the throughput ratios compose through the baseline; a pair's paired ratio is its reverse's inverse
        assert r.throughput_ratio == pytest.approx(over_base[("eagle3", *k)].throughput_ratio
                                                   / over_base[("other", *k)].throughput_ratio, rel=1e-9)
        assert r.paired_ratio * ba[k].paired_ratio == pytest.approx(1.0, rel=1e-9)
        assert r.ci_low < r.paired_ratio < r.ci_high and r.paired_ratio > 1.1  # other is 1.3x slower


def test_a_pair_of_one_launch_is_widened_by_the_launch_noise(tmp_path: Path) -> None:
    from toolkit.results.archive import open_archive

    rows = _rows(open_archive(_run(tmp_path, launches=1)), "other", "eagle3")
    assert rows and all(r.rounds == 1 and "launch" in r.ci_method and "bootstrap" in r.ci_method
                        for r in rows.values()), [r.ci_method for r in rows.values()]


def test_show_and_report_take_pairs(tmp_path: Path) -> None:
    run = _run(tmp_path)
    r = run_cli("results", "show", str(run), "--pair", "eagle3/other", "--pair", "other/baseline", "--json")
    assert r.returncode == 0, r.stderr
    pairs = json.loads(r.stdout)["pairs"]
    assert [(p["arm"], p["ref"]) for p in pairs] == [("eagle3", "other"), ("other", "baseline")]
    assert all(len(p["speedups"]) == 4 and {s["baseline"] for s in p["speedups"]} == {p["ref"]} for p in pairs)
    text = run_cli("results", "show", str(run), "--pair", "eagle3/other")
    assert text.returncode == 0 and "Speed-up of eagle3 over other" in text.stdout, text.stdout[-3000:]
    out = tmp_path / "rep"
    rep = run_cli("results", "report", str(run), "--pair", "eagle3/other", "--no-html", "-o", str(out))
    assert rep.returncode == 0, rep.stderr
    assert "Speed-up of eagle3 over other" in (out / "report.md").read_text()


@pytest.mark.parametrize("pair,said", [("eagle3/nope", "the run has no arm 'nope'"), ("eagle3", "write ARM/REF"),
                                       ("eagle3/eagle3", "an arm over itself")])
def test_a_bad_pair_exits_2(tmp_path: Path, pair: str, said: str) -> None:
    r = run_cli("results", "show", str(_run(tmp_path, launches=1)), "--pair", pair)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_report_against_another_run_refuses_a_pair(tmp_path: Path) -> None:
    run = _run(tmp_path, launches=1)
    r = run_cli("results", "report", str(run), "--against", str(run), "--pair", "eagle3/other")
    assert r.returncode == 2 and "--pair compares two arms of one run" in r.stderr, r.stderr


VLLM_ENV = {"kind": "Environment", "name": "vllm-env", "engine": "vllm", "base_image": "nvidia/cuda:13.0.1-devel-ubuntu24.04",
            "packages": [{"name": "torch", "version": "2.11.0"}, {"name": "vllm", "version": "0.24.0"}],
            "env": {"VLLM_SERVER_DEV_MODE": "1"}, "servers": {"baseline": {"model": "/m"}}}


def test_show_says_how_the_arms_environments_differ(tmp_path: Path) -> None:
    man = manifest_for(ARMS)
    man["arms"]["other"]["environment"] = {"name": "vllm-env", "hash": "v" * 64, "engine": "vllm",
                                           "preset": "baseline", "resolved": VLLM_ENV}
    run = _run(tmp_path, launches=1, manifest=man)
    r = run_cli("results", "show", str(run), "--json")
    assert r.returncode == 0, r.stderr
    rows = {x["field"]: x for x in json.loads(r.stdout)["arm_environments"]}
    assert (rows["engine"]["own"], rows["engine"]["theirs"], rows["engine"]["arms"]) == ("sglang", "vllm", ["other"])
    assert rows["packages[torch]"]["theirs"] == "2.11.0" and rows["packages[torch]"]["own"] == "2.14.1"
    assert rows["packages[vllm]"]["own"] is None and rows["sglang.version"]["theirs"] is None
    assert "servers.baseline.model" not in rows and "name" in rows  # presets are the arms' commands
    text = run_cli("results", "show", str(run))
    assert "How the arms' Environments differ" in text.stdout and "vllm-env (arms other):" in text.stdout, text.stdout
    # an arm's Environment recorded without its spec (before the manifest held it): said, not guessed
    del man["arms"]["other"]["environment"]["resolved"]
    old = _run(tmp_path / "old", launches=1, manifest=man)
    got = json.loads(run_cli("results", "show", str(old), "--json").stdout)["arm_environments"]
    assert [x["field"] for x in got] == ["spec"] and "not recorded" in got[0]["theirs"]
