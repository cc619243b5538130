"""`toolkit results`: list, show, verify, compact, diff, report and import archived runs (a thin shell)."""

from __future__ import annotations

import contextlib

from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import JsonOpt, emit_json, err, out
from toolkit.errors import ToolkitError
from toolkit.numbers import non_negative, positive, positive_int
from toolkit.results.verify import mark_unverified

app = typer.Typer(no_args_is_help=True, help=(
    "List, verify, diff and report archived runs.\n\n"
    "A run is a folder results/<matrix>/<run-id>/ (docs/results.md). RUN arguments take a run folder, "
    "a run id (or a unique prefix or suffix of one) under --root, `<matrix>/<run-id>`, or `latest`."))

Root = Annotated[Path, typer.Option("--root", help="folder holding <matrix>/<run-id>/ archives")]
Json = JsonOpt
RunArg = Annotated[str, typer.Argument(help="run folder, run id (prefix), <matrix>/<run-id>, or latest")]
SloOpt = Annotated[Optional[list[str]], typer.Option(
    "--slo", metavar="METRIC.BOUND=MS",
    help="an objective, repeatable: METRIC is ttft_ms, tpot_ms, itl_ms (each request's mean ITL) or e2e_ms; BOUND "
         "a percentile of the cell (p50 p75 p90 p95 p99) or per_request (a request counts toward goodput only "
         "within it). E.g. --slo tpot_ms.p90=30 --slo ttft_ms.per_request=500")]
Unverified = Annotated[bool, typer.Option(
    "--force", "--allow-unverified", help="read a run that does not verify (checksums, schema or content) anyway, "
                                          "its problems printed first and UNVERIFIED in every output; without it "
                                          "such a run is refused (exit 2)")]
AttainmentOpt = Annotated[Optional[float], typer.Option(
    "--attainment", parser=positive, help="share of a cell's requests that must succeed and meet every per-request objective "
                         "for the objectives to hold there (default: the run's, else 0.9)")]


def existing_root(root: Path) -> Path:
    """The --root folder, which must be one: a missing root is a mistyped path, not a folder with no runs."""
    if not root.is_dir():
        raise ToolkitError(f"{root}: " + ("is a file, not a folder of runs" if root.exists() else "no such folder"),
                           hint="--root names the folder holding <matrix>/<run-id>/ archives (default: results)")
    return root


def resolve_run(ref: str, root: Path = Path("results"), matrix: str | None = None) -> Path:
    """A run reference to its folder: a path, a run id or unique prefix under root, or `latest`."""
    p = Path(ref)
    if (p / "manifest.json").exists():
        return p
    existing_root(root)
    runs = sorted(root.glob("*/*/manifest.json"))
    if matrix:
        runs = [r for r in runs if r.parent.parent.name == matrix]
    if ref == "latest":
        if not runs:
            raise ToolkitError(f"no runs under {root}", hint="run `toolkit bench matrix ...` or pass --root")
        return max(runs, key=lambda r: r.parent.name).parent
    hits = [r.parent for r in runs if r.parent.name.startswith(ref) or r.parent.name.endswith(ref)
            or f"{r.parent.parent.name}/{r.parent.name}".startswith(ref)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise ToolkitError(f"no run {ref!r} (neither a run folder nor a run id under {root})",
                           hint="`toolkit results list` shows the runs; pass --root for another folder")
    raise ToolkitError(f"run id prefix {ref!r} is ambiguous: {', '.join(h.name for h in hits[:5])}",
                       hint="give more characters of the run id")


@app.command("list")
def list_cmd(root: Root = Path("results"),
             matrix: Annotated[Optional[str], typer.Option("--matrix", help="only runs of this matrix")] = None,
             json_out: Json = False) -> None:
    """The archived runs, newest first: when, matrix, env hash, host, GPU, arms, status. Corrupt runs are
    listed with their error; the others still list. A run whose SHA256SUMS does not match shows as
    UNVERIFIED (tampered: FILE); `results verify` makes the full check."""
    from toolkit.results.facts import list_runs
    from toolkit.results.report import build_list_report, emit

    report = build_list_report(list_runs(existing_root(root), matrix))
    emit(report, json_out)


AcceptanceFrom = Annotated[Optional[str], typer.Option(
    "--acceptance-from", metavar="RUN", help="predict speed-ups from this run's speed-up surface (its "
    "synthetic_acceptance arms) at the real acceptance measured in RUN (its real speculative arms), and check them "
    "against RUN's measured speed-ups (default: this run's own real arms). docs/results.md#speed-up-surface")]


TrainingData = Annotated[Optional[Path], typer.Option(
    "--training-data", metavar="FILE", help="a sample of the drafter's training prompts (JSON lines, e.g. from "
    "`python -m toolkit.pair sample`): the run's workloads are compared with it now, and their distance set beside "
    "the real acceptance per domain with Spearman's rho (default: the representativeness the run recorded). "
    "docs/results.md#representativeness-against-acceptance")]


Pairs = Annotated[Optional[list[str]], typer.Option(
    "--pair", metavar="ARM/REF", help="also the paired speed-ups of ARM over REF, any two arms of the run (e.g. "
    "vllm-ngram/sglang-ngram: one engine over another in the same role; vllm-ngram/vllm-baseline: speculation over "
    "its own engine's baseline), made from its records as those over the baseline are, launch-aware; repeatable. "
    "docs/bench.md#comparing-any-two-arms")]


def _pairs(texts: list[str] | None, a) -> list[tuple[str, str]]:
    from toolkit.results.speedups import parse_pairs

    return parse_pairs(texts or [], list(a.manifest.arms), a.manifest.baseline)


def _acceptance_run(ref: str | None, run, root: Path, allow_unverified: bool):
    """The --acceptance-from run, read like RUN; refused when RUN has no synthetic-acceptance surface."""
    if ref is None:
        return None
    if not any(r.synthetic_acceptance is not None for r in run.derived.speedups):
        raise ToolkitError(f"run {run.run_id} has no synthetic-acceptance speed-ups: no surface to predict from",
                           hint="--acceptance-from goes with a run of a Matrix with `synthetic_acceptance:` "
                                "(docs/bench.md#synthetic-acceptance)")
    return _open(ref, root, allow_unverified)


@app.command("show")
def show_cmd(run: RunArg, root: Root = Path("results"), json_out: Json = False,
             allow_unverified: Unverified = False, acceptance_from: AcceptanceFrom = None,
             training_data: TrainingData = None, pair: Pairs = None) -> None:
    """One run: its facts, the per-cell table, speedups, crossovers and methodology checks. Every figure
    is read through the metric registry (docs/results.md), so it equals what `results diff` shows for
    the cell. --json gives every metric with mean, p50, p90, p99, the median's 95% CI and n. A run with
    synthetic-acceptance arms adds its speed-up surface and the speed-ups it predicts from a real acceptance.
    Arms from several Environments: how each differs from the run's own; --pair ARM/REF: any two arms compared."""
    from toolkit.results.report import build_run_report, emit

    a = _open(run, root, allow_unverified)
    pairs = _pairs(pair, a)
    src = _acceptance_run(acceptance_from, a, root, allow_unverified)
    report = build_run_report(a, acceptance_from=src, training_data=training_data, pairs=pairs)
    mark_unverified(report, a, *([src] if src is not None else []))
    emit(report, json_out)


@app.command("verify")
def verify_cmd(runs: Annotated[Optional[list[str]], typer.Argument(
                   help="runs or folders to check, with the run archives nested in them (default: everything "
                        "under --root)")] = None,
               root: Root = Path("results"), json_out: Json = False) -> None:
    """Check every folder the toolkit keeps: run archives (checksums, schema, and content: each cell's
    records, per-request columns and summary agree), the run archives nested in tune sessions, the sessions'
    own files and other capture folders (SHA256SUMS). Every truncated or edited file is named. A folder
    written before its kind was checksummed is a warning. Exit 1 when any folder has a problem. An intact
    archive of a run that is not complete says so beside `ok` (`run failed (no cell succeeded ...)`): the
    archive verifies, the run did not succeed."""
    from toolkit.results.bundle import is_tarball, unpacked
    from toolkit.results.verify import discover

    stack = contextlib.ExitStack()
    shown: dict[Path, str] = {}  # a folder unpacked from a tarball: named as TARBALL:<matrix>/<run-id>/...
    targets = []
    for r in runs or []:
        if is_tarball(r):
            inner = stack.enter_context(unpacked(Path(r)))
            targets.append(inner)
            for p in discover(inner):
                shown[p] = f"{r}:{p.relative_to(inner.parent.parent).as_posix()}"
        else:
            targets.append(Path(r) if Path(r).is_dir() else resolve_run(r, root))
    if not runs:
        targets = [existing_root(root)]
    with stack:
        _verify_paths(sorted({p for t in targets for p in discover(t)}), shown, root, json_out)


def _verify_paths(paths: list[Path], shown: dict[Path, str], root: Path, json_out: bool) -> None:
    from toolkit.results.archive import open_archive
    from toolkit.results.report import status_text
    from toolkit.results.verify import errors, kind_of, verify_folder

    report, bad = [], 0
    for p in paths:
        problems = verify_folder(p)
        failed = bool(errors(problems))
        bad += failed
        status, why = None, ""
        if not failed and kind_of(p) == "run":
            a = open_archive(p)
            status, why = a.status, a.why if a.status != "complete" else ""
        report.append({"run": shown.get(p, str(p)), "kind": kind_of(p), "ok": not failed, "status": status, "why": why,
                       "problems": [x.to_dict() for x in problems]})
        if not json_out:
            label = "FAIL" if failed else "warn" if problems else "ok  "
            tail = f"  (archive intact; run {status_text(status, why)})" if status not in (None, "complete") else ""
            out.print(f"{label} {shown.get(p, p)}{tail}", markup=False)
            for x in problems:
                out.print(f"  {x}", markup=False)
    if json_out:
        emit_json(report)
    if not paths and not json_out:
        out.print(f"no runs under {root}", markup=False)
    if bad:
        raise typer.Exit(1)


@app.command("compact")
def compact_cmd(runs: Annotated[Optional[list[str]], typer.Argument(
                    help="runs or folders to compact, with the run archives nested in them (default: everything "
                         "under --root)")] = None,
                root: Root = Path("results")) -> None:
    """Store a finished archive's large files gzipped (server logs; JSON, per-request columns cells/*.npz and
    a run's inputs/files/ of 1 KiB or more: NAME.gz, read transparently), in run archives and tune sessions, as
    runs are now written at finalize: for archives written before. In a tune session, its runs' inputs/files/
    move to the session's inputs/sha256/ store, and
    its prompts/*.jsonl and the store's blobs are stored as .gz too (a session that did not finish is refused:
    --resume reads them, as is an interrupted run). Each folder's SHA256SUMS is checked first and
    rewritten to list the stored bytes; the original digests stay in SHA256SUMS.orig, and verify checks the
    decompressed files against them. A folder without SHA256SUMS is skipped; one that does not verify is
    refused (exit 1). Running it again changes nothing."""
    from toolkit.checksums import NAME as SUMS
    from toolkit.results.compact import compact
    from toolkit.results.verify import discover, kind_of

    targets = [Path(r) if Path(r).is_dir() else resolve_run(r, root) for r in runs] if runs else [existing_root(root)]
    bad = 0
    for p in sorted({p for t in targets for p in discover(t)}):
        if kind_of(p) == "folder" or not (p / SUMS).is_file():
            continue
        try:
            done = compact(p)
        except ToolkitError as exc:
            bad += 1
            err.print(f"refused {p}: {exc.message}", markup=False)
            continue
        out.print(f"{p}: {len(done)} file(s) compressed", markup=False)
    if bad:
        raise typer.Exit(1)


@app.command("recode")
def recode_cmd(runs: Annotated[list[str], typer.Argument(help="runs whose request records to re-encode (named: "
                                                               "never everything by default)")],
               root: Root = Path("results")) -> None:
    """Re-encode a finished run's request records (cells/<key>.jsonl.gz -> <key>.rec.xz: times as integer
    microseconds, xz), recorded in the run's RECODED.json: the sha256 of each file it replaced, whether the
    re-encoding is exact, else the rounding (1 us). Columns, summaries and every other file are kept; verify
    checks the records against them within that rounding and says the run was re-encoded. A run that does
    not verify, or was interrupted, is refused (exit 1). Running it again changes nothing."""
    from toolkit.results.recode import recode

    bad = 0
    for r in runs:
        p = Path(r) if Path(r).is_dir() else resolve_run(r, root)
        try:
            done = recode(p)
        except ToolkitError as exc:
            bad += 1
            err.print(f"refused {p}: {exc.message}", markup=False)
            continue
        out.print(f"{p}: {len(done)} records file(s) re-encoded", markup=False)
    if bad:
        raise typer.Exit(1)


def _open(ref: str, root: Path, allow_unverified: bool):
    """A run for show, report, diff and slo: read only when it verifies (toolkit.results.verify.open_verified)."""
    from toolkit.results.verify import open_verified

    return open_verified(resolve_run(ref, root), allow_unverified,
                         warn=lambda line: err.print(line, markup=False, highlight=False))


@app.command("diff")
def diff_cmd(
    a: Annotated[str, typer.Argument(help="run A (the reference)")],
    b: Annotated[str, typer.Argument(help="run B (compared with A)")],
    metric: Annotated[Optional[list[str]], typer.Option("--metric", "-m", help="metric(s) to compare, by registry "
                      "name (ttft_ms tpot_ms itl_ms itl_req_mean_ms e2e_ms req_output_tok_s req_accept_length "
                      "output_tok_s request_s accept_length; under objectives also goodput_req_s goodput_tok_s "
                      "slo_attainment; docs/results.md defines each); default all")] = None,
    fail_on_regression: Annotated[Optional[float], typer.Option(
        "--fail-on-regression", metavar="PCT", parser=non_negative,
        help="exit 1 when any metric got worse by more than PCT percent with confidence: a one-sided test of the "
             "log ratio beyond log(1 + PCT/100) (higher is better for tok/s and acceptance, lower for latencies), "
             "Holm-adjusted; an inconclusive change never does. No cell in common, or a negative PCT: exit 2")] = None,
    correction: Annotated[str, typer.Option(
        "--correction", help="holm: adjust p-values for the many tests of one diff (no false alarms from "
                             "testing dozens of cells); none: per-test alpha, as benchstat")] = "holm",
    slo: SloOpt = None,
    attainment: AttainmentOpt = None,
    root: Root = Path("results"),
    json_out: Json = False,
    allow_unverified: Unverified = False,
) -> None:
    """Compare run B against run A, benchstat style: per cell and metric the two figures `results show`
    prints (medians with 95% CIs), the change, and a verdict whose unit is the server launch: with two or
    more launches a side (or a calibration by `toolkit bench noise`), a t-test of the per-launch figures
    with the change's 95% CI; with one launch a side and no calibration, the per-request test, and `?`
    (inconclusive: launch noise unknown) for changes within the default floor or not arm-wide. `~`: not
    significant at 0.05. Cells match on arm, domain, concurrency and output length; the environment diff
    follows. Under service-level objectives (A's slo block, else B's, else --slo) goodput and attainment
    are compared too, both runs judged by the same objectives. docs/results.md#launch-noise.

    Example (CI gate): toolkit results diff quickstart/20261201T0900Z-1a2b3c latest --fail-on-regression 5"""
    from toolkit.results.diff import TOO_FEW_LAUNCHES, diff_runs, family
    from toolkit.results.report import build_diff_report, emit

    from toolkit.results.slo import objectives_for, parse_slo

    ra, rb = _open(a, root, allow_unverified), _open(b, root, allow_unverified)
    objectives = None
    if slo or attainment is not None:
        own = objectives_for(ra.manifest, ra.derived) or objectives_for(rb.manifest, rb.derived)
        objectives = parse_slo(slo or [], attainment, base=own)
    result = diff_runs(ra, rb, metric, correction, objectives)
    if not result.cells:  # nothing compared is no verdict: "no significant regression" would be a pass by default
        shown = lambda cells: ", ".join(cells[:4]) + (f" and {len(cells) - 4} more" if len(cells) > 4 else "") or "none"
        raise ToolkitError(f"runs {ra.run_id} and {rb.run_id} have no cell in common: nothing to compare",
                           hint=f"cells match on arm, domain, load level and output length; A has {shown(result.only_a)}; "
                                f"B has {shown(result.only_b)}")
    regressions = result.regressions(fail_on_regression) if fail_on_regression is not None else []
    ungated = result.regressions(fail_on_regression, gated=False) if fail_on_regression is not None else []
    data = result.to_dict()
    data["regressions"] = [{"cell": c.label, "metric": m.metric, "delta_pct": m.delta_pct, "p": p}
                           for c, m, p in regressions]
    data["not_gated"] = [{"cell": c.label, "metric": m.metric, "delta_pct": m.delta_pct, "p": p,
                          "excluded": c.excluded + m.excluded} for c, m, p in ungated]
    report = build_diff_report(ra, rb, result, data=data)
    mark_unverified(report, ra, rb)
    emit(report, json_out)
    if fail_on_regression is not None:
        for c, m, _ in ungated:
            err.print(f"not gated: {c.label} {m.metric} {m.delta_pct:+.2f}% in a cell no verdict "
                      f"{'may use' if c.excluded else 'on ' + m.metric + ' may use'} "
                      f"({'; '.join(c.excluded + m.excluded)})", markup=False)
        if result.unclaimed():
            err.print(f"not gated: {len(result.unclaimed())} metric-cell(s) with {TOO_FEW_LAUNCHES}", markup=False)
        size = family(result.gate_tests()).count(None)
        how = f"one-sided tests at {result.alpha:g}" + (f", Holm-adjusted over {size}" if correction == "holm" else "")
        if result.cross_machine:
            how += "; the runs ran on different machines: the machine level included"
        for why in result.calibration_refused:  # never a busy host's or another hash's calibration
            err.print(f"{why}" if result.calibration else f"{why}: the gate uses the default floor instead",
                      markup=False)
        if regressions:
            err.print(f"{len(regressions)} significant regression(s) worse than {fail_on_regression:g}% with "
                      f"confidence ({how}):", markup=False)
            for c, m, p in regressions:
                err.print(f"  {c.label} {m.metric} {m.delta_pct:+.2f}% (p={p:.3g})", markup=False)
            raise typer.Exit(1)
        err.print(f"no regression worse than {fail_on_regression:g}% with confidence ({how})", markup=False)


@app.command("report")
def report_cmd(
    run: RunArg,
    against: Annotated[Optional[str], typer.Option("--against", help="a second run: report RUN against it "
                                                   "(it is A, the reference; RUN is B), plots overlaid")] = None,
    html_out: Annotated[bool, typer.Option("--html/--no-html", help="also write report.html, one self-contained "
                                           "file with the plots embedded")] = True,
    out_dir: Annotated[Optional[Path], typer.Option("-o", "--out", help="output folder "
                                                    "(default: reports/<run-id>[-vs-<run-id>])")] = None,
    root: Root = Path("results"),
    json_out: Json = False,
    allow_unverified: Unverified = False,
    acceptance_from: AcceptanceFrom = None,
    training_data: TrainingData = None,
    pair: Pairs = None,
) -> None:
    """Write a report of a run: Markdown with PNG plots beside it, and a self-contained HTML page.
    Plots: throughput vs concurrency per arm and domain, TTFT/ITL percentiles, a speedup heatmap
    (domain x concurrency, crossover outlined), acceptance length per domain. The archive is never touched."""
    from toolkit.results.diff import diff_runs
    from toolkit.results.report import build_diff_report, build_run_report, write_report

    b = _open(run, root, allow_unverified)
    if against and acceptance_from:
        raise ToolkitError("--acceptance-from goes with a run report, not with --against",
                           hint="report the surface run on its own: toolkit results report RUN --acceptance-from RUN2")
    if against and pair:
        raise ToolkitError("--pair compares two arms of one run, not with --against",
                           hint="report the run on its own: toolkit results report RUN --pair ARM/REF")
    if against:
        a = _open(against, root, allow_unverified)
        report = build_diff_report(a, b, diff_runs(a, b), plots=True)
        target = out_dir or Path("reports") / f"{b.run_id}-vs-{a.run_id}"
    else:
        src = _acceptance_run(acceptance_from, b, root, allow_unverified)
        report = build_run_report(b, plots=True, acceptance_from=src, training_data=training_data,
                                  pairs=_pairs(pair, b))
        target = out_dir or Path("reports") / b.run_id
    mark_unverified(report, b, *([a] if against else []))
    written = write_report(report, target, html_too=html_out)
    if json_out:
        emit_json({"out": str(target), "files": [str(w) for w in written]})
        return
    for w in written:
        out.print(f"wrote {w}", markup=False)


@app.command("slo")
def slo_cmd(run: RunArg, slo: SloOpt = None, attainment: AttainmentOpt = None, root: Root = Path("results"),
            json_out: Json = False, allow_unverified: Unverified = False) -> None:
    """A run against service-level objectives, recomputed from its per-request records without rerunning
    anything: per cell goodput (req/s and tok/s of the requests that met every per-request objective),
    attainment with a 95% Wilson interval and each percentile objective with its 95% CI; per arm and domain
    the capacity (the highest concurrency at which the objectives hold) and the first failing level; the
    speculative advice by raw throughput and within the objectives. Without --slo, the run's own objectives
    (its Matrix's slo block). The archive is only read. docs/slo.md explains every figure.

    Example: toolkit results slo latest --slo tpot_ms.p90=30 --slo ttft_ms.per_request=500 --json"""
    from toolkit.results.report import emit, threshold_advice
    from toolkit.results.report.run import eligibility_of, methodology_blocks
    from toolkit.results.report.slo import build_slo_report
    from toolkit.results.slo import analyse, objectives_for, parse_slo
    from toolkit.results.verdicts import current, judged_cells

    a = _open(run, root, allow_unverified)
    objectives = parse_slo(slo or [], attainment, base=objectives_for(a.manifest, a.derived))
    an = analyse(a, objectives)
    d = current(a)  # the raw verdicts under the rule of what a verdict may use
    raw = {arm: threshold_advice(d, arm) for arm in d.recommended_disable_batch_threshold}
    elig = eligibility_of(judged_cells(a), d)
    data = {"run": str(a.path), "run_id": a.run_id, "matrix": a.matrix_name, **an.model_dump(mode="json"),
            "methodology": [c.model_dump(mode="json") for c in d.methodology],
            "excluded_cells": elig.lines(excluding=True), "qualified_cells": elig.lines(excluding=False)}
    report = build_slo_report(f"Run {a.matrix_name}/{a.run_id} against service-level objectives", an, raw, data,
                              methodology_blocks(d, elig))
    mark_unverified(report, a)
    emit(report, json_out)


@app.command("pack")
def pack_cmd(runs: Annotated[list[str], typer.Argument(help="finished runs or tune sessions to pack")],
             root: Root = Path("results"),
             out_dir: Annotated[Path, typer.Option("--out", "-o", help="folder for the tarballs")] = Path("."),
             json_out: Json = False) -> None:
    """One tarball per run (or tune session), <run-id>.tar.gz holding <matrix>/<run-id>/ as archived: how a
    run that does not live in git is published. `results verify` reads it as it is; `results import
    --format toolkit` unpacks it under --root once it verifies. The same run packs to the same bytes."""
    from toolkit.results.bundle import pack
    from toolkit.results.verify import discover, errors, verify_folder

    folders = [Path(r) if Path(r).is_dir() else resolve_run(r, root) for r in runs]
    for folder in folders:  # a tarball of a damaged archive would carry the damage to whoever imports it
        problems = [p for f in discover(folder) for p in errors(verify_folder(f))]
        if problems:
            more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
            raise ToolkitError(f"{folder.name} does not verify: {problems[0]}{more}; nothing packed", file=folder,
                               hint=f"`toolkit results verify {folder}` lists every problem; restore the folder "
                                    "from a copy, then pack it")
    made = [pack(folder, out_dir) for folder in folders]
    if json_out:
        emit_json([str(p) for p in made])
    else:
        for p in made:
            out.print(f"packed {p}", markup=False)


@app.command("import")
def import_cmd(
    files: Annotated[list[Path], typer.Argument(help="the result file(s) to import: several become the arms of one "
                                                     "run, in order")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="sglang: `python -m sglang.bench_serving --output-file` "
                                     "JSON lines; vllm: `vllm bench serve --save-result` JSON; toolkit: a run "
                                     "tarball of `toolkit results pack`, unpacked under --root once it verifies")],
    root: Root = Path("results"),
    matrix: Annotated[Optional[str], typer.Option("--matrix", help="matrix name to file it under "
                                                  "(default: imported-<format>)")] = None,
    arm: Annotated[Optional[list[str]], typer.Option("--arm", help="arm name, once per file in the files' order "
                                                     "(default: each file's label or backend); diff matches cells by "
                                                     "arm, so name it like the run you compare with")] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="several files: the arm the others are "
                                                    "compared with (default: the first)")] = None,
    same_prompts: Annotated[bool, typer.Option("--same-prompts", help="several files: they were recorded with the "
                                               "same prompts in the same order (same dataset, seed, order), which the "
                                               "files cannot show: pair requests by index (recorded)")] = False,
    domain: Annotated[Optional[str], typer.Option("--domain", help="domain name (default: the dataset name)")] = None,
    output_len: Annotated[Optional[int], typer.Option("--output-len", parser=positive_int, help="max output tokens the run used "
                                                      "(default: from the file, else the longest output)")] = None,
    workload_hash: Annotated[str, typer.Option("--workload-hash", help="the workload hash, when you know the prompts "
                                               "were the same as a toolkit workload's")] = "",
    json_out: Json = False,
) -> None:
    """Turn sglang.bench_serving or `vllm bench serve` results into an archive, so they can be listed,
    reported and diffed. Per-request lists (--output-details / --save-detailed) give the diff its samples;
    without them the cells are summary-only. Several files become the arms of one run, with speed-ups over
    the baseline: paired where the prompts are known to match (docs/results.md#import).

    Example: toolkit results import base.jsonl eagle3.jsonl --format sglang --arm baseline --arm eagle3"""
    if fmt == "toolkit":  # run tarballs (toolkit results pack): unpacked under --root once they verify
        from toolkit.results.bundle import import_tarball

        paths = [import_tarball(f, root) for f in files]
        if json_out:
            emit_json([{"run": str(p), "run_id": p.name} for p in paths])
        else:
            for f, p in zip(files, paths):
                out.print(f"imported {f} -> {p}", markup=False)
        return
    from toolkit.results.importers import import_files

    path = import_files(files, fmt, root, matrix=matrix, arms=arm, baseline=baseline, domain=domain,
                        output_len=output_len, workload_hash=workload_hash, same_prompts=same_prompts)
    if json_out:
        emit_json({"run": str(path), "run_id": path.name})
    else:
        out.print(f"imported {', '.join(map(str, files))} -> {path}", markup=False)
