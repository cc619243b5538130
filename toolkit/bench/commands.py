"""`toolkit bench ...`: run a benchmark matrix (the main job)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import emit_json, err, json_option, out, warn
from toolkit.numbers import parser

JsonSummary = json_option("print the run's summary as JSON on stdout")
JsonNoise = json_option("print the calibration's launch noise as JSON")
JsonVerdict = json_option("print the verdict and per-cell comparisons as JSON")

app = typer.Typer(no_args_is_help=True, help="Benchmark server presets on domain workloads.")
# commands defined here, beside the runner they use, that `toolkit results` shows: toolkit/cli.py merges this
# group into results (results must not import bench)
results_app = typer.Typer()


@app.command("matrix")
def matrix_cmd(
    spec: Annotated[Path, typer.Argument(help="a Matrix spec, e.g. envs/matrices/quickstart.yaml")],
    results: Annotated[Path, typer.Option("--results", help="archive root: runs go to RESULTS/<matrix>/<run-id>/")]
    = Path("results"),
    resume: Annotated[Optional[Path], typer.Option("--resume", help="continue a partial run: only missing cells run")]
    = None,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 when a methodology check reports an error")] = False,
    allow_failed_cells: Annotated[bool, typer.Option(
        "--allow-failed-cells", help="exit 0 for a run in which some cells failed (status partial) as long as one "
                                     "succeeded; without it such a run exits 1")] = False,
    json_out: JsonSummary = False,
) -> None:
    """Launch each arm's server (`launches:` times, in rounds whose arm order is a seeded shuffle), run every
    (workload x concurrency x repeat) cell against each launch with the same prompts for every arm, and
    archive the run: per-request records, summary, report.md.

    The run directory is printed at the end; `toolkit results show RUN` and `toolkit results report
    RUN --html` read it. Ctrl-C leaves a valid partial run that `--resume RUN` completes.

    Exit (README "Exit codes"): 0 complete; 1 status failed (no cell succeeded), or partial (some cells
    failed) without --allow-failed-cells, or --strict with methodology errors; 2 bad input; 130 interrupted.
    """
    from toolkit.bench.matrix import run_matrix
    from toolkit.bench.progress import MatrixProgress
    from toolkit.specs import load_spec

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
    from toolkit.exits import run_exit

    code = run_exit(result.status, result.interrupted, allow_failed_cells=allow_failed_cells,
                    strict_errors=strict and bool(errors))
    if json_out:
        emit_json({"run": str(run_dir), "status": result.status, "interrupted": result.interrupted,
                   "why": result.why, "exit_code": code, "report": str(result.report),
                   "cells": [c.model_dump() for c in result.cells], "derived": dd})
    else:  # the runner's tables are `results show`'s: one report model (toolkit/results/report)
        from toolkit.results.archive import open_archive
        from toolkit.results.report import build_run_report, emit, status_text

        emit(build_run_report(open_archive(run_dir)))
        for c in errors:
            err.print(f"methodology error: [{c.check}] {c.message}", markup=False)
        out.print(f"run {status_text(result.status, result.why)}: {run_dir}", markup=False, highlight=False)
        out.print(f"report: {result.report}", markup=False, highlight=False)
    if result.status == "partial" and not result.interrupted and not allow_failed_cells:
        err.print("some cells failed (their reasons are under `Failed cells`): exit 1; --allow-failed-cells "
                  "accepts a partial run", markup=False)
    raise typer.Exit(code)


@app.command("noise")
def noise_cmd(
    spec: Annotated[Path, typer.Argument(help="a Matrix spec: its arms, workloads and levels are what gets calibrated")],
    launches: Annotated[int, typer.Option("--launches", parser=parser(lower=2, inclusive=True, integer=True),
                                           help="server launches per arm")] = 3,
    results: Annotated[Path, typer.Option("--results", help="archive root: the calibration goes to "
                                          "RESULTS/<matrix>/<run-id>/, where diff and reproduce look for it")]
    = Path("results"),
    json_out: JsonNoise = False,
) -> None:
    """Calibrate the launch-to-launch noise of this GPU and environment: an A/A run of MATRIX with --launches
    server launches per arm (interleaved rounds), archived as a normal run marked `noise-calibration`.

    `results diff` and `results reproduce` of runs with one launch per side find the newest calibration of
    the same environment hash on the same GPU model under the same results root, and use its launch noise
    instead of the default floor (they print which). The run report shows the launch CV per arm and metric
    and the smallest change each cell can show (docs/results.md#launch-noise).

    Example: toolkit bench noise envs/matrices/quickstart.yaml --launches 3
    """
    from toolkit.bench.noise import calibrate
    from toolkit.bench.progress import MatrixProgress
    from toolkit.specs import load_spec

    loaded = load_spec(spec, expect="Matrix")
    for w in loaded.warnings:
        warn(w)
    result = calibrate(loaded, launches=launches, results_root=results,
                       progress=None if json_out else MatrixProgress(err), log=lambda m: err.print(m, markup=False))
    from toolkit.results.archive import open_archive
    from toolkit.results.report import build_run_report, emit

    report = build_run_report(open_archive(result.path))
    emit(report, json_out, data={"run": str(result.path), "status": result.status, "purpose": "noise-calibration",
                                 "noise": report.data.get("noise")})
    if not json_out:
        out.print(f"noise calibration {result.status}: {result.path}", markup=False, highlight=False)
    if result.status == "partial":
        raise typer.Exit(130)


@results_app.command("reproduce")
def reproduce_cmd(
    run: Annotated[str, typer.Argument(help="the run to replay: run folder, run id (prefix), <matrix>/<run-id>, "
                                            "or latest")],
    results: Annotated[Path, typer.Option("--results", "--root", help="archive root: where RUN is looked up and "
                                          "the new run is archived (RESULTS/<matrix>/<run-id>/)")] = Path("results"),
    image: Annotated[Optional[str], typer.Option("--image", help="SGLang in containers: run this image (default: "
                                                 "the one built from the archived spec's hash, else the original's)")]
    = None,
    target: Annotated[Optional[str], typer.Option("--target", help="run elsewhere: `local`, an http(s) URL, or a Hosts "
                                                  "spec PATH[:GROUP] (recorded as drift)")] = None,
    allow_drift: Annotated[bool, typer.Option("--allow-drift", help="run even on another GPU model, engine version "
                                              "or dummy-model recipe; the drift is recorded in the new manifest")]
    = False,
    extract: Annotated[Optional[Path], typer.Option("--extract", help="only lay the run's archived inputs (specs, "
                                                    "patches, workload files) out in this new folder, and exit")]
    = None,
    tolerance: Annotated[Optional[float], typer.Option(
        "--tolerance", metavar="PCT", parser=parser(lower=0.1, inclusive=True),
        help="the margin X of `reproduced within ±X %`, percent, on the log scale (a ratio within 1/(1+X)..1+X); "
             "declare it before looking at the data (default: 10%, fixed; never derived from the judged runs)")] = None,
    replay: Annotated[Optional[str], typer.Option(
        "--replay", metavar="RUN2", help="judge this earlier replay of RUN instead of running one (its manifest "
                                         "says `reproduces: RUN`): the verdict again, e.g. at another --tolerance")]
    = None,
    json_out: JsonVerdict = False,
) -> None:
    """Replay an archived run from the archive alone (its inputs/: specs, patches, workload files; never
    the checkout's envs/), with the same cells, seeds and prompts, archive the replay as a new run whose
    manifest says `reproduces: RUN`, and compare the two like `toolkit results diff`.

    The server launch is the unit of replication (docs/results.md#launch-noise). Verdicts, with the margin
    X (--tolerance):

    \b
      reproduced within ±X %   exit 0: every metric's change (geometric mean over the cells) is within ±X
                               with confidence (TOST, every arm tested), no cell differs, every cell tested
      differs                  exit 1: a change beyond ±X with confidence (cells named, with the CI), or a
                               cell missing, failed or not comparable
      inconclusive             exit 3: a CI straddles the margin, cells could not be tested (one launch
                               per side and no calibration: launch noise unknown; `launches: 3` in the
                               Matrix, or `toolkit bench noise`, makes them testable), or an arm's
                               equivalence test could not run (named)

    With several arms the verdict is the run's; each arm's own follows (the same rules on its cells alone):
    one arm that does not repeat from launch to launch does not hide that the others reproduced.

    Bad input (exit 2): an archive that does not verify, a missing or edited input file, an archive from
    before inputs/ that read files it does not hold, or another GPU model or engine version without
    --allow-drift. Interrupted: 130 (the replay is partial).

    Example: toolkit results reproduce quickstart/20261202T111454Z-7d0001 --json
    """
    if extract is not None:
        _extract(run, results, extract, json_out)
        return
    _reproduce(run, results, image, target, allow_drift, tolerance, replay, json_out)


def _extract(run: str, results: Path, folder: Path, json_out: bool) -> None:
    """`results reproduce --extract`: the run's archived inputs laid out in `folder`."""
    from toolkit.bench.reproduce import extract as extract_inputs

    path = extract_inputs(run, results, folder)
    if json_out:
        emit_json({"matrix": str(path), "folder": str(folder)})
    else:
        out.print(f"inputs of {run} laid out in {folder}; its matrix: {path}", markup=False)


def _reproduce(run: str, results: Path, image: str | None, target: str | None, allow_drift: bool,
               tolerance: float | None, replay: str | None, json_out: bool) -> None:
    """`results reproduce`: replay the run (or judge the earlier replay `replay`), print the verdict, exit with it."""
    from toolkit.bench.progress import MatrixProgress
    from toolkit.bench.reproduce import judge_replay, reproduce, reproduce_text

    rep = judge_replay(run, replay, root=results, tolerance=tolerance) if replay is not None else reproduce(run, root=results, image=image, target=target, allow_drift=allow_drift,
                    progress=None if json_out else MatrixProgress(err), log=lambda m: err.print(m, markup=False),
                    tolerance=tolerance)
    if json_out:
        emit_json(rep.to_dict())
    else:
        out.print(reproduce_text(rep), markup=False, highlight=False)
    if rep.interrupted:
        from toolkit.exits import INTERRUPTED

        raise typer.Exit(INTERRUPTED)
    raise typer.Exit(rep.exit_code)
