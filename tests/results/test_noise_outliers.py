"""A launch far from every other launch of its cell is named beside the launch CV: the committed H200
reference run (3 launches per arm) has one, NGRAM's first launch on a fresh machine, whose coding cells
paid a one-time stall; the baseline's launches stay within a few percent and are not named."""

from __future__ import annotations

from pathlib import Path

from toolkit.results.archive import open_archive
from toolkit.results.report.noise import OUTLIER_FACTOR, noise_blocks, noise_data

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results/sglang-h200-noise/20261204T052002Z-fc9254"


def test_the_cold_ngram_launch_is_named_and_nothing_else() -> None:
    data = noise_data(open_archive(RUN))
    odd = data.outliers
    assert {(o.arm, o.launch, o.cell) for o in odd} == {("ngram", 0, "coding c=8"), ("ngram", 0, "coding c=32")}
    c32 = next(o for o in odd if o.cell == "coding c=32" and o.metric == "output_tok_s")
    assert 450 < c32.value < 500 and len(c32.others) == 2 and c32.factor > 10
    assert all(o.factor >= OUTLIER_FACTOR for o in odd)
    text = "\n".join(str(getattr(b, "text", "")) + str(getattr(b, "items", "")) for b in noise_blocks(data))
    assert "ngram launch 0, coding c=32: output_tok_s" in text
