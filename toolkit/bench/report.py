"""The runner's report.md and printed tables come from the one report model (toolkit/results/report);
this module only adapts the runner's call. Prefer `toolkit.results.report.run_markdown(run_dir,
derived, status)`, which reads the archive being finalized."""

from __future__ import annotations

from toolkit.schema.records import CellSummary


def markdown_report(matrix, cells: list[CellSummary], derived: dict) -> str:
    """report.md from a Matrix spec, its cell summaries and derived results (no archive needed)."""
    from toolkit.results.report import build_run_report, from_result, render_md

    return render_md(build_run_report(from_result(matrix, cells, derived)))
