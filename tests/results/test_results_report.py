"""Reports: Markdown with PNG plots, and a self-contained HTML page that headless Chromium renders with
the plots visible (checked on the screenshot's pixels)."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from tests.conftest import have, need
from toolkit.results.archive import open_archive
from tests.synthetic import write_run

TAB_BLUE, TAB_ORANGE = (31, 119, 180), (255, 127, 14)  # matplotlib's first two line colours


def _share(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> float:
    px = (img[..., :3] * 255).round().astype(int)
    return float((np.abs(px - np.array(rgb)).max(axis=-1) <= tol).mean())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return (write_run(root, seed=1, n=60, concurrency=(1, 4, 16)),
            # one launch a side: a change is called only beyond the default floor (32 %), arm-wide
            write_run(root, seed=2, n=60, concurrency=(1, 4, 16), slowdown={"eagle3": 1.6}))


def test_markdown_report_with_plots_and_the_archive_untouched(two_runs, tmp_path, cli):
    a, _ = two_runs
    before = {p: p.read_bytes() for p in a.rglob("*") if p.is_file()}
    res = cli("results", "report", str(a), "-o", str(tmp_path / "rep"), "--no-html")
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    for name in ("throughput", "ttft", "itl", "speedup", "acceptance"):
        assert f"(plots/{name}.png)" in md
        assert (tmp_path / "rep" / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| eagle3 | chat | 16 |" in md and not (tmp_path / "rep" / "report.html").exists()
    assert {p: p.read_bytes() for p in a.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_html_diff_report_renders_its_plots_in_headless_chromium(two_runs, tmp_path, cli):
    need(have("chromium"), "chromium is needed (tests/run.sh installs it)")
    a, b = two_runs
    res = cli("results", "report", str(b), "--against", str(a), "-o", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr
    page = tmp_path / "rep" / "report.html"
    text = page.read_text()
    imgs = re.findall(r"src='plots/([a-z_]+\.png)'", text)  # linked, not embedded: the pngs beside it
    assert len(imgs) == 5 and all((page.parent / "plots" / i).read_bytes()[:4] == b"\x89PNG" for i in imgs)
    assert "src='http" not in text and "<script" not in text and "base64" not in text
    assert "WORSE" in text and "Environment diff" in text

    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1300,7000", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    img = imread(shot)
    assert img.shape[0] == 7000 and img[..., :3].std() > 0.05  # not blank
    plots = img[img.shape[0] // 3:]  # the plots follow the tables
    assert _share(plots, TAB_BLUE) > 0.0005 and _share(plots, TAB_ORANGE) > 0.0005  # the arms' lines and bars
    # the heatmap's red (speedup < 1) appears: RdYlGn's low end
    red = ((plots[..., 0] > 0.6) & (plots[..., 1] < 0.25) & (plots[..., 2] < 0.25)).mean()
    assert red > 0.0005


def test_report_of_a_single_run_has_speedup_heatmap_data(two_runs):
    from toolkit.results.plots import speedup_table

    table = speedup_table(open_archive(two_runs[0]))
    assert set(table) == {"eagle3"} and table["eagle3"][("chat", 1)] > 1.2 > 1 > table["eagle3"][("chat", 16)]


def test_the_heatmap_and_the_runner_share_one_speedup():
    """The derived speed-ups' throughput_ratio is toolkit.schema.metrics.throughput_ratios of the archived
    cells (the committed H200 run), and the heatmap of a run without derived speed-ups (an import) reads
    that same function, not a ratio of its own."""
    from toolkit.results.plots import baseline_arm, speedup_table
    from toolkit.schema.metrics import throughput_ratios

    run = sorted((Path(__file__).resolve().parents[2] / "results" / "sglang-h200").iterdir())[0]
    a = open_archive(run)
    derived = {(r.arm, r.domain, int(r.concurrency)): r.throughput_ratio for r in a.derived.speedups
               if r.throughput_ratio is not None}
    ours = throughput_ratios(a.cells, baseline_arm(a))
    assert derived and set(ours) == set(derived)
    assert all(ours[k] == pytest.approx(v, rel=1e-9) for k, v in derived.items())
    a.derived.speedups = []  # as an import: no derived speed-ups
    table = speedup_table(a)
    assert {(arm, d, c): v for arm, t in table.items() for (d, c), v in t.items()} == ours


def test_unembed_html_links_only_the_plots_whose_bytes_match(tmp_path: Path) -> None:
    from toolkit.results.report.render import unembed_html
    (tmp_path / "plots").mkdir()
    png = b"\x89PNG\r\n\x1a\nfake"
    (tmp_path / "plots" / "a.png").write_bytes(png)
    emb = lambda b: f"<img alt='A' src='data:image/png;base64,{base64.b64encode(b).decode()}'>"
    page = tmp_path / "report.html"
    page.write_text(f"<p>x</p>\n{emb(png)}<figcaption>A</figcaption>\n{emb(b'other')}\n")
    assert unembed_html(page) == 1
    assert page.read_text() == f"<p>x</p>\n<img alt='A' src='plots/a.png'><figcaption>A</figcaption>\n{emb(b'other')}\n"
