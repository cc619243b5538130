"""One report model, built once and rendered many ways (as benchstat builds its tables once).

    build_run_report(archive or RunView, plots=False) -> Report     results show, results report, report.md
    build_diff_report(a, b, DiffResult, plots=False)  -> Report     results diff, results report --against
    build_list_report(rows)                            -> Report     results list
    render_text / render_md / render_html / render_json (Report)    the renderings
    emit(report, json_out, data=None)                               a command's output: JSON on stdout, or text
    write_report(report, out_dir, html_too)                          report.md + plots/*.png + report.html

model.py holds the blocks (Heading, Para, Facts, Table, Items, Code, Image) and the number formats.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.results.report.compare import build_diff_report
from toolkit.results.report.listing import build_list_report
from toolkit.results.report.model import Report
from toolkit.results.report.render import render_html, render_json, render_md, render_text, write_report
from toolkit.results.report.run import (RunView, archive_view, build_run_report, from_result, status_text,
                                        threshold_advice)

__all__ = ["Report", "RunView", "archive_view", "build_diff_report", "build_list_report", "build_run_report",
           "emit", "from_result", "render_html", "render_json", "render_md", "render_text", "run_markdown",
           "status_text", "summary_markdown", "threshold_advice", "write_report"]


def emit(report: Report, json_out: bool = False, data=None) -> None:
    """The one JSON-or-render of a command: with --json the report's data (or `data`) as one JSON document on
    stdout, else the report as terminal text."""
    from toolkit.console import emit_json, out

    if json_out:
        emit_json(report.data if data is None else data)
    else:
        out.print(render_text(report), markup=False, highlight=False, end="")


def run_markdown(run_dir: str | Path, derived: dict | None = None, status: str | None = None, why: str = "") -> str:
    """The report.md a writer stores at finalize (before summary.json exists: pass derived, status and why
    it is not complete)."""
    from toolkit.results.archive import open_archive

    return render_md(build_run_report(archive_view(open_archive(run_dir), derived=derived, status=status, why=why)))


def summary_markdown(archive) -> str:
    """report.md of an archive already read (imports call this at finalize)."""
    return render_md(build_run_report(archive))
