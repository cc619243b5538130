"""`sweep: {points: N, spacing}` in a Matrix: the rates it derives from the two probes (linear or geometric),
the plan before and after they are known (and on resume, the recorded ones), and each mistake exits 2 through
the real CLI at its file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.specs.test_bad_input_battery import MATRIX, bad, write
from toolkit.errors import ToolkitError
from toolkit.schema.manifest import Manifest
from toolkit.schema.sweep import SweepRecord, sweep_rates
from toolkit.specs import load_spec

SWEEP = MATRIX.replace("concurrency: [1, 2]", "sweep: {points: 3}\narrival: {process: gamma, burstiness: 0.5}\n"
                                              "max_concurrency: 16")


def test_rates_are_spread_evenly_strictly_between_sync_and_saturation() -> None:
    assert sweep_rates(1.2, 5.0, 3) == [2.15, 3.1, 4.05]
    assert sweep_rates(1.2, 5.0, 1) == [3.1]
    assert sweep_rates(0.25, 0.5, 4) == [0.3, 0.35, 0.4, 0.45]
    assert sweep_rates(10, 110, 4) == [30, 50, 70, 90]
    assert sweep_rates(0.123456, 0.2, 1) == [0.162]  # 3 significant digits
    # a server slower with many in flight than with one: the rates between the two, from the lower
    assert sweep_rates(5.0, 1.2, 3) == [2.15, 3.1, 4.05]
    # no range to spread over, or rounding merges points: each rate once
    assert sweep_rates(2.0, 2.0, 3) == [2.0] and sweep_rates(1.0, 1.001, 3) == [1.0]
    with pytest.raises(ValueError, match="rates > 0"):
        sweep_rates(0, 5, 3)


def test_geometric_rates_keep_a_constant_ratio_strictly_between_sync_and_saturation() -> None:
    # by hand: 1.2 * (5 / 1.2) ** (i / 4) = 1.2 * 4.1667 ** 0.25, 0.5, 0.75 = 1.714, 2.449, 3.500
    assert sweep_rates(1.2, 5.0, 3, "geometric") == [1.71, 2.45, 3.5]
    # the pair's probes on the H100 (3.36 and 61.2 req/s): linear put every point above 14 req/s, past where
    # speculation pays; geometric puts two of four below 11 (3.36 * 18.214 ** 0.2 = 6.004, ** 0.4 = 10.73, ...)
    assert sweep_rates(3.36, 61.2, 4) == [14.9, 26.5, 38.1, 49.6]
    assert sweep_rates(3.36, 61.2, 4, "geometric") == [6.0, 10.7, 19.2, 34.3]
    assert sweep_rates(1, 100, 1, "geometric") == [10] and sweep_rates(1, 16, 3, "geometric") == [2, 4, 8]
    assert sweep_rates(0.123456, 0.2, 1, "geometric") == [0.157]  # sqrt(0.0246912) = 0.15713: 3 significant digits
    # saturation below synchronous: the same rates, from the lower; equal rates or rounding merge points
    assert sweep_rates(61.2, 3.36, 4, "geometric") == sweep_rates(3.36, 61.2, 4, "geometric")
    assert sweep_rates(2.0, 2.0, 3, "geometric") == [2.0] and sweep_rates(1.0, 1.001, 3, "geometric") == [1.0]
    # every rate strictly inside, increasing, each ratio to the next the same (before rounding)
    rates = sweep_rates(0.5, 500, 8, "geometric")
    assert rates == sorted(rates) and 0.5 < rates[0] and rates[-1] < 500 and len(rates) == 8
    assert all(b / a == pytest.approx(10 ** (3 / 9), rel=0.01) for a, b in zip(rates, rates[1:]))
    with pytest.raises(ValueError, match="rates > 0"):
        sweep_rates(0, 5, 3, "geometric")
    with pytest.raises(ValueError, match="linear or geometric, not 'log'"):
        sweep_rates(1, 5, 3, "log")  # type: ignore[arg-type]


def test_the_note_says_what_the_probes_imply_about_the_rates() -> None:
    from toolkit.schema.sweep import rates_note

    assert rates_note(1.2, 5.0, 16, 3, sweep_rates(1.2, 5.0, 3), 12, 2.5) is None  # a real range: nothing to say
    below = rates_note(5.0, 1.2, 16, 3, sweep_rates(5.0, 1.2, 3), 12, 2.5)
    assert "below the synchronous rate" in below and "only" not in below
    # the embedded CPU engine in a fresh clone: 17.3 req/s with one in flight, 17.5 with 12 (it does not batch)
    flat = rates_note(17.3, 17.5, 12, 3, sweep_rates(17.3, 17.5, 3), 12, 0.69)
    assert "only 1% more requests per second with 12 in flight" in flat and "12 requests in 0.69 s" in flat
    assert "3 points rounded to 1 distinct rate (" in flat
    assert "rounded to 2 distinct rates" in rates_note(17.3, 17.55, 12, 3, sweep_rates(17.3, 17.55, 3), 12, 0.69)
    assert rates_note(2.0, 2.39, 8, 3, sweep_rates(2.0, 2.39, 3), 12, 5.0).startswith("the throughput probe")
    assert rates_note(2.0, 2.4, 8, 3, sweep_rates(2.0, 2.4, 3), 12, 5.0) is None  # 1.2x: a range


def _record(rates: list[float]) -> SweepRecord:
    return SweepRecord(arm="baseline", points=3, sync_rate=1.2, saturation_rate=5.0, probe_concurrency=16,
                       rates=rates, probes={"sync": "probes/sync.json", "throughput": "probes/throughput.json"})


def test_a_sweep_plans_no_cell_before_its_probes_then_every_arm_at_the_same_rates(tmp_path: Path) -> None:
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.bench.plan import probe_concurrency

    _, m = write(tmp_path, matrix=SWEEP)
    assert run_cli("validate", str(m)).returncode == 0
    plan = plan_run(load_spec(m))
    assert plan.todo == {"baseline": [], "ngram": []} and plan.cells_planned == 0 and plan.sweep is None
    assert probe_concurrency(plan.m) == 16  # max_concurrency
    plan.set_sweep(_record([2.15, 3.1, 4.05]))
    for arm in ("baseline", "ngram"):
        assert [(c.domain, c.rate, c.concurrency) for c in plan.todo[arm]] == [
            (d, r, 16) for d in ("coding", "math") for r in (2.15, 3.1, 4.05)]
    assert plan.todo["ngram"][0].key == "ngram__coding__q2p15__r0" and plan.cells_planned == 12
    load = plan.load(plan.todo["ngram"][1])
    assert (load.rate, load.arrival, load.burstiness, load.concurrency) == (3.1, "gamma", 0.5, 16)
    manifest = run_manifest(plan, {})
    assert manifest.sweep.rates == [2.15, 3.1, 4.05] and manifest.sweep.sync_rate == 1.2
    # the manifest as written reads back with its sweep (an archive's record is the one resume uses)
    assert Manifest.model_validate(manifest.written()).sweep.probes["sync"] == "probes/sync.json"


def test_resume_runs_the_recorded_rates_not_new_probes(tmp_path: Path) -> None:
    from toolkit.bench.plan import plan_run

    _, m = write(tmp_path, matrix=SWEEP)
    spec = load_spec(m)
    fresh = plan_run(spec)
    resumed = Manifest(run_id="x", matrix={"hash": fresh.hashes["matrix"]}, sweep=_record([1.5, 2.5]))
    plan = plan_run(spec, resumed=resumed, done={"baseline__coding__q1p5__r0"})
    assert plan.sweep.rates == [1.5, 2.5]
    assert [c.key for c in plan.todo["baseline"]] == [
        "baseline__coding__q2p5__r0", "baseline__math__q1p5__r0", "baseline__math__q2p5__r0"]
    assert plan.cells_planned == 8
    with pytest.raises(ToolkitError, match="without recorded rates"):
        plan_run(spec, resumed=Manifest(run_id="y", matrix={"hash": fresh.hashes["matrix"]}))


def test_spacing_linear_is_the_default_the_hash_omits_and_geometric_is_recorded(tmp_path: Path) -> None:
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.results.report.run import _sweep
    from toolkit.specs import spec_hash

    hashes = {}
    for spacing in ("", ", spacing: linear", ", spacing: geometric"):
        d = tmp_path / (spacing.split(": ")[-1] or "unset")
        d.mkdir()
        _, m = write(d, matrix=SWEEP.replace("points: 3", "points: 3" + spacing))
        hashes[spacing] = spec_hash(load_spec(m))
    # a matrix written before `spacing` (or saying linear) keeps its hash; geometric is another matrix
    assert hashes[""] == hashes[", spacing: linear"] != hashes[", spacing: geometric"]

    plan = plan_run(load_spec(m))  # the geometric one
    assert plan.m.sweep.spacing == "geometric"
    record = _record([1.71, 2.45, 3.5]).model_copy(update={"spacing": "geometric"})
    plan.set_sweep(record)
    written = run_manifest(plan, {}).written()["sweep"]
    assert written["spacing"] == "geometric" and written["rates"] == [1.71, 2.45, 3.5]
    assert Manifest.model_validate({"run_id": "x", "sweep": written}).sweep.spacing == "geometric"
    # a linear record is written as every one before `spacing` was (no key), and such a record reads as linear
    assert "spacing" not in _record([2.15, 3.1, 4.05]).written()
    assert Manifest.model_validate({"run_id": "y", "sweep": _record([2.15]).written()}).sweep.spacing == "linear"
    # `results show`: how the rates were chosen, before and after the probes
    spec = {"sweep": {"points": 3, "spacing": "geometric"}}
    assert _sweep(spec, None).startswith("3 points geometrically, rates not chosen yet")
    assert "1.71, 2.45, 3.5: 3 points geometrically between synchronous 1.2 and saturation 5" in _sweep(spec, record)
    assert "3 points between synchronous 1.2" in _sweep({"sweep": {"points": 3}}, _record([2.15, 3.1, 4.05]))


def test_probe_concurrency_defaults(tmp_path: Path) -> None:
    from toolkit.bench.plan import probe_concurrency

    for text, want in ((MATRIX.replace("concurrency: [1, 2]", "sweep: {points: 2}"), 3),  # every request at once
                       (MATRIX.replace("concurrency: [1, 2]", "sweep: {points: 2, probe_concurrency: 5}"), 5),
                       (MATRIX.replace("concurrency: [1, 2]", "sweep: {points: 2}").replace("requests: 3",
                                                                                             "duration_s: 5"), 256)):
        _, m = write(tmp_path, matrix=text)
        assert probe_concurrency(load_spec(m).model) == want


CASES = {
    "sweep and concurrency": (SWEEP.replace("sweep:", "concurrency: [1]\nsweep:"), 6,
                              r"exactly one of `concurrency`.*`rates`.*`sweep`"),
    "sweep and rates": (SWEEP.replace("sweep:", "rates: [1]\nsweep:"), 6,
                        r"exactly one of `concurrency`.*`rates`.*`sweep`"),
    "points 0": (SWEEP.replace("points: 3", "points: 0"), 6, r"sweep\.points: 0 is out of range: it must be >= 1"),
    "no points": (SWEEP.replace("points: 3", "probe_concurrency: 4"), 6, r"sweep\.points"),
    "unknown key": (SWEEP.replace("points: 3", "points: 3, pionts: 4"), 6, r"sweep\.pionts"),
    "spacing misspelt": (SWEEP.replace("points: 3", "points: 3, spacing: geometic"), 6,
                         r"m\.yaml:6:20: sweep\.spacing: expected 'linear' or 'geometric', got 'geometic'",
                         r"did you mean 'geometric'\?"),
    "spacing log": (SWEEP.replace("points: 3", "points: 3, spacing: log"), 6,
                    r"sweep\.spacing: expected 'linear' or 'geometric', got 'log'"),
    "probe_concurrency 1": (SWEEP.replace("points: 3", "points: 3, probe_concurrency: 1"), 6,
                            r"sweep\.probe_concurrency: 1 is out of range: it must be >= 2"),
    "duration per level": (SWEEP.replace("requests: 3", "duration_s: {1: 5}"), 10,
                           r"names concurrency levels: with `sweep:` give seconds"),
    "warmup concurrency": (SWEEP + "warmup: concurrency\n", 11, r"`warmup: concurrency`.*with `sweep:`"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_sweep_mistakes_are_errors_at_their_line(tmp_path: Path, case: str) -> None:
    text, line, *patterns = CASES[case]
    _, m = write(tmp_path, matrix=text)
    bad(run_cli("validate", str(m)), m, line, *patterns)


def test_tune_refuses_a_sweep_matrix(tmp_path: Path) -> None:
    _, m = write(tmp_path, matrix=SWEEP + "tune:\n  space:\n    ngram: {prompt_lookup_num_tokens: [2, 4]}\n")
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "results"))
    bad(r, m, 6, r"`bench tune` searches at concurrency levels")
