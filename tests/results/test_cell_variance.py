"""Per-cell launch variance (issue 42, item 3): a bimodal cell, or the noisiest cell when launch noise rises with
concurrency, cannot hide in the arm's pool. Seeded, a few hundred replays of benchmarks/cellvar_sim.py's
generator (its full run prints the rates); loose bounds."""

from __future__ import annotations

import math

from benchmarks.cellvar_sim import CELLS, SCENARIOS, rates
from toolkit.results.launches import ALPHA, cell_noise, interval


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
