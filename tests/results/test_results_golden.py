"""Golden files pin the human output (benchstat keeps testdata/*.golden): `results show` text and the
report Markdown of one committed archive. A change to either is a visible diff in review.

Regenerate after an intended change:  TOOLKIT_REGEN_GOLDEN=1 python -m pytest tests/results/test_results_golden.py
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.synthetic import write_run
from toolkit.results.archive import open_archive
from toolkit.results.diff import diff_runs
from toolkit.results.report import (build_diff_report, build_run_report, render_html, render_json, render_md,
                                    render_text)

GOLDEN = Path(__file__).parent / "golden"
RUN = "results/sglang-h200/20261202T190515Z-52c8f2"
REGEN = os.environ.get("TOOLKIT_REGEN_GOLDEN") == "1"


def check_golden(name: str, got: str) -> None:
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
        return
    want = path.read_text() if path.exists() else ""
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), f"golden/{name}", "got"))
        raise AssertionError(f"{name} differs from the golden file (TOOLKIT_REGEN_GOLDEN=1 rewrites it after an "
                             f"intended change):\n{diff[:6000]}")


def test_show_text_golden() -> None:
    res = run_cli("results", "show", RUN)
    assert res.returncode == 0, res.stderr
    check_golden("show-sglang-h200-52c8f2.txt", res.stdout)


def test_report_markdown_golden(tmp_path: Path) -> None:
    res = run_cli("results", "report", RUN, "-o", str(tmp_path), "--no-html")
    assert res.returncode == 0, res.stderr
    check_golden("report-sglang-h200-52c8f2.md", (tmp_path / "report.md").read_text())


def test_text_and_markdown_come_from_one_model() -> None:
    """Every table row of the text is a row of the Markdown: the same strings, laid out twice."""
    report = build_run_report(open_archive(ROOT / RUN))
    text, md = render_text(report), render_md(report)
    md_rows = {" ".join(" ".join(_split_md_row(line)).split()) for line in md.splitlines() if line.startswith("| eagle3 |")}
    text_rows = {" ".join(line.split()) for line in text.splitlines() if line.startswith("eagle3 ")}
    assert len(text_rows) >= 8 and text_rows <= md_rows
    doc = json.loads(render_json(report))  # the --json rendering: the same cells, every metric
    assert set(doc["cells"]) == set(open_archive(ROOT / RUN).cell_map)
    assert doc["cells"]["eagle3__coding__c16__r0"]["metrics"]["itl_ms"]["p50"] == pytest.approx(4.80, abs=0.005)


def _split_md_row(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


def test_pipe_in_an_arm_name_is_escaped_in_markdown(tmp_path: Path) -> None:
    argv = ["python", "-m", "sglang.launch_server"]
    arms = {"base|line": argv, "eagle3": argv + ["--speculative-algorithm", "EAGLE3"]}
    a = write_run(tmp_path, seed=1, n=12, arms=arms, domains=("chat",), concurrency=(1,))
    b = write_run(tmp_path, seed=2, n=12, arms=arms, domains=("chat",), concurrency=(1,))
    for report in (build_run_report(open_archive(a)), build_diff_report(open_archive(a), open_archive(b),
                                                                        diff_runs(open_archive(a), open_archive(b)))):
        md = render_md(report)
        assert "base\\|line" in md and "| base|line" not in md
        tables, current = [], []
        for line in md.splitlines() + [""]:
            if line.startswith("|"):
                current.append(line)
            elif current:
                tables.append(current)
                current = []
        assert tables
        for t in tables:  # every row of a table has as many cells as its header
            assert len({len(_split_md_row(row)) for row in t}) == 1, t
        assert "base|line" in render_text(report) and "base|line" in render_html(report)


def test_the_runner_entries_build_the_same_cells_table(tmp_path: Path) -> None:
    """The runner's report.md (from its cell summaries, or from the archive being finalized) shows what
    `results show` shows: the Stats a summary stores equal the ones recomputed from the .npz."""
    from toolkit.results.report import archive_view, from_result, run_markdown

    a = open_archive(write_run(tmp_path, seed=3, n=40, domains=("chat",), concurrency=(1, 4)))
    shown = {k: m for k, _, m in archive_view(a).cells}  # request metrics recomputed from the .npz
    stored = {k: m for k, _, m in from_result({"name": "synthetic"}, a.cells, {}).cells}  # what the runner wrote
    assert len(shown) == 4 and shown == stored
    assert all(len(m) >= 8 for m in shown.values())  # + the two acceptance lengths on eagle3
    md = run_markdown(a.path, derived={}, status="complete")
    assert "- **status**: complete" in md
    assert md.split("## Cells")[1] == render_md(build_run_report(a)).split("## Cells")[1]
