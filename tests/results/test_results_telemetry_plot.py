"""The report plots GPU telemetry archived per cell (real samples from the committed H200 run)."""

from __future__ import annotations

from tests.conftest import ROOT
from toolkit.results.archive import open_archive
from toolkit.results.plots import all_plots

H200_RUN = ROOT / "results/h200-transformers/20261202T113835Z-de6da8"


def test_h200_run_report_has_a_telemetry_plot() -> None:
    a = open_archive(H200_RUN)
    plots = {name: png for name, _, png in all_plots([("A", a)])}
    assert "telemetry.png" in plots
    assert plots["telemetry.png"].startswith(b"\x89PNG") and len(plots["telemetry.png"]) > 10_000


def test_no_telemetry_no_plot(tmp_path) -> None:
    from tests.synthetic import write_run  # seeded synthetic archive without telemetry

    run = write_run(tmp_path, seed=1, n=20)
    assert "telemetry.png" not in {name for name, _, _ in all_plots([("A", open_archive(run))])}
