"""Per-cell launch variance (issue 42, item 3): a bimodal cell, or the noisiest cell when launch noise rises with
concurrency, cannot hide in the arm's pool. Seeded, a few hundred replays of benchmarks/cellvar_sim.py's
generator (its full run prints the rates); loose bounds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.cellvar_sim import CELLS, SCENARIOS, rates
from tests.synthetic import write_run
from toolkit.errors import ToolkitError
from toolkit.results.archive import open_archive
from toolkit.results.diff import TOO_FEW_LAUNCHES, diff_runs
from toolkit.results.equivalence import judge
from toolkit.stats import ALPHA, cell_noise, interval


def _calibrated(per_cell: dict) -> list:
    """The cells whose A/A false alarms exceed alpha + 3 points or whose CIs cover outside 91-99 % (300 replays:
    a share's se is about 1.3 points)."""
    return [c for c, (fa, cov, sp) in per_cell.items()
            if fa > ALPHA + 0.03 or not 0.91 <= min(cov, sp) <= max(cov, sp) <= 0.99]


def test_every_cell_is_calibrated_with_its_own_variance_and_not_with_the_pool() -> None:
    cv, bimodal, heavy = SCENARIOS["both"]  # a bimodal cell, CV rising with concurrency, t(3) launch effects
    r = rates(300, 7, 3, cv, bimodal, heavy)
    assert not _calibrated(r["after"]), r["after"]
    before = _calibrated(r["before"])
    assert bimodal in before and r["before"][bimodal][0] > 0.10, r["before"]  # the pool hides the bimodal cell
    assert ("chat", 16) in before and ("code", 16) in before  # and the noisiest cells
    assert ("chat", 1) in before  # while the quiet ones are over-covered (almost never called)
    assert len(CELLS) == 6


def test_cell_noise_by_hand() -> None:
    n = cell_noise([1.0, math.e], [math.e, math.e ** 3])  # logs 0, 1 and 1, 3: ss 0.5 + 2, df 2
    assert n.var == 1.25 and n.df == 2.0 and n.cells == 1
    assert cell_noise([2.0], [3.0]) is None and cell_noise([2.0, 2.0], [3.0]).df == 1.0  # a side of one: the other's
    centre, lo, hi = interval([1.0, math.e], cell_noise([1.0, math.e]))
    assert centre == math.exp(0.5) and hi / centre > 50  # 2 rounds: df 1, t = 12.7


def test_no_claim_at_the_family_level_from_two_launches_a_side_unless_calibrated(tmp_path: Path) -> None:
    """2 launches a side: each cell's own variance has 2 df; a 3x slowdown is shown with its CI but called
    inconclusive, `differs` and the gate refuse it; a calibration of the environment makes the claims."""
    kw = {"launch_cv": 0.02, "n": 100, "domains": ("chat",), "env_hash": "c" * 64}
    a, b = (open_archive(write_run(tmp_path, seed=s, launches=2, slowdown={"eagle3": x}, **kw))
            for s, x in ((80, 1.0), (81, 3.0)))
    r = diff_runs(a, b, calibration=None)
    slowed = [m for c in r.cells if c.arm == "eagle3" for m in c.metrics.values() if m.se is not None]
    assert not any(m.significant for c in r.cells for m in c.metrics.values())
    few = [m for m in slowed if m.verdict == "inconclusive"]
    assert few and all(m.note == TOO_FEW_LAUNCHES and (m.high_pct < 0 or m.low_pct > 0) for m in few)
    with pytest.raises(ToolkitError, match="too few launches for a claim"):
        r.gate(5.0)
    assert judge(r, []).verdict == "inconclusive"
    cal = write_run(tmp_path, seed=82, launches=4, purpose="noise-calibration", **kw)
    r = diff_runs(a, b)  # the calibration under the same root is found
    assert r.calibration == cal.name and r.noise["eagle3"].source == f"calibration {cal.name}"
    assert {c.arm for c in r.cells for m in c.metrics.values() if m.verdict == "worse"} == {"eagle3"}
    assert r.regressions(5.0) and judge(r, []).verdict == "differs"
