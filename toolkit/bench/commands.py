"""`toolkit bench ...`: run a benchmark matrix (the main job)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import emit_json, err, out, warn

app = typer.Typer(no_args_is_help=True, help="Benchmark server presets on domain workloads.")


@app.command("matrix")
def matrix_cmd(
    spec: Annotated[Path, typer.Argument(help="a Matrix spec, e.g. envs/matrices/quickstart.yaml")],
    results: Annotated[Path, typer.Option("--results", help="archive root: runs go to RESULTS/<matrix>/<run-id>/")]
    = Path("results"),
    resume: Annotated[Optional[Path], typer.Option("--resume", help="continue a partial run: only missing cells run")]
    = None,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 when a methodology check reports an error")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the run's summary as JSON on stdout")] = False,
) -> None:
    """Launch each arm's server once, run every (workload x concurrency x repeat) cell against it with
    the same prompts for every arm, and archive the run: per-request records, summary, report.md.

    The run directory is printed at the end; `toolkit results show RUN` and `toolkit results report
    RUN --html` read it. Ctrl-C leaves a valid partial run that `--resume RUN` completes.
    """
    from toolkit.bench.matrix import run_matrix
    from toolkit.bench.progress import MatrixProgress
    from toolkit.bench.report import CELL_COLUMNS, SPEEDUP_COLUMNS, cell_rows, rich_table, speedup_rows
    from toolkit.spec import load_spec

    loaded = load_spec(spec, expect="Matrix")
    for w in loaded.warnings:
        warn(w)
    progress = None if json_out else MatrixProgress(err)
    result = run_matrix(loaded, results_root=results, resume=resume, progress=progress,
                        log=lambda m: err.print(m, markup=False))
    run_dir = result.path
    d = result.derived
    dd = d.model_dump(mode="json")
    errors = d.errors()
    if json_out:
        emit_json({"run": str(run_dir), "status": result.status, "report": str(result.report),
                   "cells": [c.model_dump() for c in result.cells], "derived": dd})
    else:
        out.print(rich_table("cells", CELL_COLUMNS, cell_rows(result.cells)))
        if d.speedups:
            out.print(rich_table(f"speedup over {d.baseline}", SPEEDUP_COLUMNS, speedup_rows(dd)))
        from toolkit.bench.derive import threshold_advice

        for arm in d.recommended_disable_batch_threshold:
            out.print(f"{arm}: {threshold_advice(dd, arm)}")
        for c in d.methodology:
            (warn if c.severity == "warning" else lambda m: err.print(f"methodology error: {m}", markup=False))(
                f"[{c.check}] {c.message}")
        t = d.timing
        if t.overhead_ratio:
            out.print(f"wall {t.wall_s:.1f} s = {t.overhead_ratio:.3f} x the busiest slot's own time (all "
                      f"slots: cells {t.cells_s:.1f} s + server starts {sum(t.launch_s.values()):.1f} s + "
                      f"stops {sum(t.stop_s.values()):.1f} s)")
        out.print(f"run {result.status}: {run_dir}")
        out.print(f"report: {result.report}")
    if result.status == "partial":
        raise typer.Exit(130)
    if strict and errors:
        raise typer.Exit(1)
