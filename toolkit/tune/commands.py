"""`toolkit bench tune`: the search over one speculative arm's settings (docs/tune.md). Registered under
`toolkit bench` by toolkit/cli.py: tune runs matrices through bench, so bench must not import it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from toolkit.console import emit_json, err, json_option, out, warn
from toolkit.exits import INCONCLUSIVE

if TYPE_CHECKING:  # the CLI loads this module at every start; the tune schema's models cost ~0.1 s to build
    from toolkit.schema.tune import TuneResult

KEEP = "keep the preset"  # toolkit.tune.integrity.KEEP (not imported here: the CLI loads this module at start)
KEEP_PRESET_EXIT = INCONCLUSIVE  # 3: the tune ran, and its winner did not beat the preset (README, Exit codes)

JsonResult = json_option("print the result as JSON on stdout")

# `toolkit bench tune`: shown under bench, whose matrices it runs; toolkit/cli.py merges this group into bench
# (bench must not import tune)
bench_app = typer.Typer()


@bench_app.command("tune")
def tune_cmd(
    spec: Annotated[Path, typer.Argument(help="a Matrix spec with a `tune:` block, e.g. envs/matrices/quickstart.yaml")],
    arm: Annotated[str, typer.Option("--arm", help="the arm (a preset of the environment) whose knobs are searched")],
    budget: Annotated[Optional[int], typer.Option("--budget", help="trials: distinct settings to evaluate "
                                                  "(default: tune.budget of the spec)")] = None,
    out_env: Annotated[Optional[Path], typer.Option("--out", help="write the environment with the tuned preset "
                                                    "here (comments and order kept, each tuned value commented)")]
    = None,
    results: Annotated[Path, typer.Option("--results", help="sessions go to RESULTS/<matrix>-tune/<id>/")]
    = Path("results"),
    resume: Annotated[Optional[Path], typer.Option("--resume", help="continue an interrupted session (its folder)")]
    = None,
    write_anyway: Annotated[bool, typer.Option("--write-anyway", help="write the winner to --out even when the "
                                               "confirmation says keep the preset (its comments say so)")] = False,
    json_out: JsonResult = False,
) -> None:
    """Find the best settings of one speculative arm per domain and concurrency, confirm them on held-out
    prompts, and write them back into the environment.

    The search space is the Matrix's `tune:` block (docs/tune.md); it is checked before anything runs, SGLang's
    rules between its speculative flags included. Trials are measured by successive halving over requests per
    cell on a seeded sample of each workload: every trial runs every cell with few requests, the best go on
    with more. Request-level knobs (the embedded engine's prompt lookup) share one server; SGLang flags launch
    one server per trial. The winner and the arm as it was are then measured against the baseline on prompts
    the search never saw: paired speedup with a 95 % CI per domain and concurrency, and the concurrency from
    which speculation should be off.

    Every rung and the confirmation is a normal run archive (arms = trials) under the session folder; the
    session's report.md has the trial x cell heatmap, the winner per cell and the confirmation table. Ctrl-C
    leaves the finished work in place; `--resume SESSION` goes on from there.
    """
    from toolkit.specs import load_spec
    from toolkit.tune.progress import TuneProgress
    from toolkit.tune.session import TuneSession
    from toolkit.tune.state import complete_state

    loaded = load_spec(spec, expect="Matrix")
    for w in loaded.warnings:
        warn(w)
    if out_env is not None:
        _writer_ready(out_env)  # before any trial: a session that cannot write its result back wastes the GPU time
    done = complete_state(resume, loaded, arm, budget or loaded.model.tune.budget) if resume else None
    if done is not None:  # finished: judged again from its archives (and written back with --out), nothing runs
        from toolkit.tune.report import result

        env_spec = load_spec(loaded.path_of(("environment",), loaded.model.environment), expect="Environment")
        res = result(done, Path(resume))  # as its archives stand here (paths, intervals), not as stored there
        if out_env is not None and _may_write(res, write_anyway):
            res.out = str(_write_back(env_spec, res, out_env))
            err.print(f"tune session {done.id} is complete: its result written back, nothing run", markup=False)
        else:
            err.print(f"tune session {done.id} is complete, judged again from its archives: nothing run",
                      markup=False)
    else:
        session = TuneSession(loaded, arm, budget=budget, results_root=results, resume=resume,
                              log=lambda m: err.print(m, markup=False))
        for w in session.warnings:
            warn(w)
        res = session.run(progress=TuneProgress(err))
        if res.status == "complete" and out_env is not None and _may_write(res, write_anyway):
            res.out = str(_write_back(session.env_spec, res, out_env))
    if json_out:
        emit_json(res.dump())
    else:
        _print_result(res)
    if res.status != "complete":
        err.print(f"tune stopped: resume with `toolkit bench tune {spec} --arm {arm} --resume {res.session}`",
                  markup=False)
        raise typer.Exit(130)
    if res.decision == KEEP:
        err.print(f"keep the preset: {res.confirmation.decision.reason}"
                  + ("" if res.out else f"; {out_env} not written" if out_env else ""), markup=False)
        raise typer.Exit(KEEP_PRESET_EXIT)


def _may_write(res: TuneResult, write_anyway: bool) -> bool:
    """Only a winner that beat the preset is written back (toolkit.tune.integrity.decide), unless asked."""
    return res.decision != KEEP or write_anyway


def _writer_ready(out_env: Path) -> None:
    """What the write-back needs, checked before the search: ruamel.yaml (a dependency of the toolkit, so its
    absence is a broken install) and a folder for the file."""
    from toolkit.errors import ToolkitError

    try:
        import ruamel.yaml  # noqa: F401
    except ImportError:
        raise ToolkitError("--out: writing the tuned environment needs ruamel.yaml, which is not installed here",
                           hint="install the toolkit with its dependencies (README, docs/install.md), or "
                                "`pip install 'ruamel.yaml>=0.18,<0.20'`")
    if out_env.parent.exists() and not out_env.parent.is_dir():
        raise ToolkitError(f"--out {out_env}: {out_env.parent} is a file, not a folder",
                           hint="give --out a path in a folder, e.g. --out envs/tuned.yaml")
    if not out_env.parent.is_dir():
        raise ToolkitError(f"--out {out_env}: the folder {out_env.parent} does not exist", hint="create it first")
    if out_env.is_dir():
        raise ToolkitError(f"--out {out_env}: is a folder", hint=f"give a file name, e.g. --out {out_env / 'tuned.yaml'}")


def _write_back(env_spec, res: TuneResult, out_env: Path) -> Path:
    """The tuned environment at out_env, each value commented with what the session found (the words are
    toolkit.tune.verdict's); a warning first when the winner is not faster than the preset it replaces."""
    from toolkit.tune.verdict import write_back_texts
    from toolkit.tune.writeback import write_tuned

    texts = write_back_texts(res, out_env)
    if texts.caution:
        warn(texts.caution)
    return write_tuned(env_spec, out_env, arm=res.arm, engine=res.engine, params=res.best.params,
                       note=texts.note, threshold=res.confirmation.recommended_disable_batch_threshold,
                       threshold_note=texts.threshold_note)


def _print_result(res: TuneResult) -> None:
    """The session's report on the terminal: the same model as report.md."""
    from toolkit.results.report import render_text
    from toolkit.tune.report import build_tune_report

    out.print(render_text(build_tune_report(res)), markup=False, highlight=False)
    if res.report:
        out.print(f"report: {res.report}", markup=False)
    if res.out:
        out.print(f"tuned environment: {res.out}", markup=False)
