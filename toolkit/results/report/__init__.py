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

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkit.results.report.compare import build_diff_report
    from toolkit.results.report.listing import build_list_report
    from toolkit.results.report.model import Report
    from toolkit.results.report.render import render_html, render_json, render_md, render_text, write_report
    from toolkit.results.report.run import (RunView, archive_view, build_run_report, from_result, status_text,
                                            threshold_advice)

# Each name is imported from its module when first asked for (PEP 562), so that a command needing one block
# (verify's Para, show's run report) does not import the diff report's statistics (scipy, ~0.7 s of CPU).
_HOME = {"build_diff_report": "compare", "build_list_report": "listing", "Report": "model",
         "render_html": "render", "render_json": "render", "render_md": "render", "render_text": "render",
         "write_report": "render", "RunView": "run", "archive_view": "run", "build_run_report": "run",
         "from_result": "run", "status_text": "run", "threshold_advice": "run"}


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Report", "RunView", "archive_view", "build_diff_report", "build_list_report", "build_run_report",
           "emit", "from_result", "render_html", "render_json", "render_md", "render_text", "run_markdown",
           "status_text", "summary_markdown", "threshold_advice", "write_report"]


def emit(report: Report, json_out: bool = False, data=None) -> None:
    """The one JSON-or-render of a command: with --json the report's data (or `data`) as one JSON document on
    stdout, else the report as terminal text."""
    from toolkit.console import emit_json, out
    from toolkit.results.report.render import render_text

    if json_out:
        emit_json(report.data if data is None else data)
    else:
        out.print(render_text(report), markup=False, highlight=False, end="")


def run_markdown(run_dir: str | Path, derived: dict | None = None, status: str | None = None, why: str = "") -> str:
    """The report.md a writer stores at finalize (called once summary.json is written, so the finish time is the
    stored one; derived, status and why it is not complete as the runner has them)."""
    from toolkit.results.archive import open_archive
    from toolkit.results.report.render import render_md
    from toolkit.results.report.run import archive_view, build_run_report

    return render_md(build_run_report(archive_view(open_archive(run_dir), derived=derived, status=status, why=why)))


def summary_markdown(archive) -> str:
    """report.md of an archive already read (imports call this at finalize)."""
    from toolkit.results.report.render import render_md
    from toolkit.results.report.run import build_run_report

    return render_md(build_run_report(archive))
