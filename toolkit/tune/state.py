"""The session's state on disk (tune.json, toolkit.schema.tune.TuneState): a new session (its folder, the
prompt split, the trials and the schedule), `--resume` (the same matrix, arm, tune block and budget), and
the save after every step (atomic, so Ctrl-C loses nothing)."""

from __future__ import annotations

import os
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.fsutil import write_json
from toolkit.schema.tune import FORMAT, RESUMABLE, STATE_FILE, VERSION, MatrixRef, Rung, TuneState, load_tune_state
from toolkit.specs import LoadedSpec, spec_hash
from toolkit.tune import search, specs
from toolkit.tune.space import Space


def matrix_hash(mspec: LoadedSpec) -> str:
    from toolkit.render import template_version

    return spec_hash(mspec, template_version())


def tune_block(mspec: LoadedSpec) -> dict:  # json-edge: tune.json's `tune` (the Matrix's block as written)
    """The Matrix's tune block as tune.json records it (and `--resume` compares it): `confirm_launches` only
    where it is not 1, so a session started before the field existed resumes and is judged again as it was."""
    out = mspec.model.tune.model_dump(mode="json")
    if out.get("confirm_launches") == 1:
        del out["confirm_launches"]
    return out


def _new_folder(parent: Path) -> Path:
    """results/<matrix>-tune/<id>/, created here (two sessions started at once get two ids)."""
    from toolkit.results.archive import new_run_id

    parent.mkdir(parents=True, exist_ok=True)
    while True:
        sid = new_run_id()
        try:
            os.mkdir(parent / sid)
            return parent / sid
        except FileExistsError:
            continue


def new_state(mspec: LoadedSpec, env_spec: LoadedSpec, space: Space, arm: str, *, budget: int, first: int,
              confirm_requests: int, again: str | None, results_root: Path) -> tuple[Path, TuneState]:
    """Pick the trials, make the session folder, split the prompts: (folder, the state before any run)."""
    m = mspec.model
    picked = search.choose_trials(space.candidates, budget, m.seed)
    if len(picked) < 2:
        raise mspec.error(("tune", "space", arm), f"the space holds {len(picked)} setting(s) SGLang would run "
                          "differently: nothing to compare", hint="give a knob more values")
    folder = _new_folder(Path(results_root) / f"{m.name}-tune")
    split = specs.split_prompts(mspec, folder, m.tune.holdout)
    trials = {f"t{i:02d}": p for i, p in enumerate(picked)}
    return folder, TuneState(
        format=FORMAT, version=VERSION, id=folder.name, status="running",
        matrix=MatrixRef(name=m.name, path=str(mspec.path), hash=matrix_hash(mspec)),
        environment=str(env_spec.path), arm=arm, baseline=m.baseline_arm, engine=space.engine, level=space.level,
        tune=tune_block(mspec), budget=budget, candidates=len(space.candidates), notes=space.notes,
        incumbent=space.base, trials=trials, schedule=search.schedule(len(trials), m.tune.eta),
        first_requests=first, confirm_requests=confirm_requests,
        split=split, server=None, again=again,
        seed=m.seed, knobs=space.knobs, rungs=[Rung(index=0, trials=list(trials), requests=first)],
        confirmation=None)


def resume_state(folder: Path, mspec: LoadedSpec, arm: str, budget: int) -> TuneState:
    """The state of an interrupted session, refused when it is finished or another search's."""
    f = Path(folder) / STATE_FILE
    if not f.is_file():
        raise ToolkitError(f"no tune session at {folder} (tune.json is missing)",
                           hint="give the folder `toolkit bench tune` printed, results/<matrix>-tune/<id>")
    state = load_tune_state(f)
    if state.status not in RESUMABLE:
        raise ToolkitError(f"tune session {state.id} is {state.status}", file=f,
                           hint="start a new one" + (" (or give --out ENV: a complete session's result is written "
                                                     "back without running anything)" if state.status == "complete"
                                                     else ""))
    return same_search(state, f, mspec, arm, budget)


def complete_state(folder: Path, mspec: LoadedSpec, arm: str, budget: int) -> TuneState | None:
    """The state of a finished session of this search (its result is written back again), else None."""
    f = Path(folder) / STATE_FILE
    if not f.is_file():
        return None
    state = load_tune_state(f)
    return same_search(state, f, mspec, arm, budget) if state.status == "complete" and state.result else None


def same_search(state: TuneState, f: Path, mspec: LoadedSpec, arm: str, budget: int) -> TuneState:
    """`state` when the session is this search's (arm, matrix, tune block, budget), else an error."""
    changed = [what for what, old, new in (
        ("the arm", state.arm, arm), ("the matrix", state.matrix.hash, matrix_hash(mspec)),
        ("the tune block", state.tune, tune_block(mspec)))
        if old != new]
    if changed or budget != state.budget:
        raise ToolkitError(f"{', '.join(changed) or 'the budget'} changed since session {state.id} started",
                           hint=f"resume with the same matrix, --arm {state.arm} and --budget {state.budget}, "
                                "or start a new session", file=mspec.path)
    return state


def save_state(folder: Path, state: TuneState) -> None:
    write_json(Path(folder) / STATE_FILE, state.dump())
