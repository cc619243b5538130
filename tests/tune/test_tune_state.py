"""The typed session state (toolkit/schema/tune.py): tune.json of every writer loads (the committed session;
the shape before the knob order was kept), a new session's state survives the file round trip key for key,
`--resume` refuses what it must, and every progress call of the runner and the session has a no-op default."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from toolkit.errors import ToolkitError
from toolkit.schema.tune import TuneResult, TuneState, load_tune_state
from toolkit.specs import load_spec

SESSION = ROOT / "results/quickstart-tune/20261203T083318Z-598b59"  # committed, written before the typed state
QUICKSTART = ROOT / "envs/matrices/quickstart.yaml"

# the keys the dict-based writer put into a new session's tune.json (before any rung ran)
NEW_STATE_KEYS = {"format", "version", "id", "status", "matrix", "environment", "arm", "baseline", "engine", "level",
                  "tune", "budget", "candidates", "notes", "incumbent", "trials", "schedule", "first_requests",
                  "confirm_requests", "split", "server", "again", "seed", "knobs", "rungs", "confirmation"}


def _raw() -> dict:
    return json.loads((SESSION / "tune.json").read_text())


def _copy(tmp: Path, raw: dict) -> Path:
    folder = tmp / "session"
    folder.mkdir()
    (folder / "tune.json").write_text(json.dumps(raw, indent=2, sort_keys=True))
    return folder


def test_the_committed_session_loads_and_dumps_as_written() -> None:
    raw = _raw()
    state = load_tune_state(SESSION / "tune.json")
    assert state.status == "complete" and state.best == "t05" and state.again == "baseline-again"
    assert [r.index for r in state.rungs] == [0, 1, 2] and state.rungs[0].scores["t05"].cells == 4
    assert state.split["coding"].files.tune == "prompts/coding.tune.jsonl"
    assert state.server is not None and state.server.port == 35931
    assert state.params("t05") == {"prompt_lookup_num_tokens": 16, "max_matching_ngram_size": 2}  # space order
    # its result predates `excluded`: a drifted cell reads as excluded (what --out assumed), the rest usable
    cells = state.result.confirmation.cells
    assert [c.excluded for c in cells] == [["drift"] if c.drift else [] for c in cells]
    assert sum(c.drift for c in cells) == 3
    # dumped again: the file as written, plus only the mapped field
    dumped = state.dump()
    for c in dumped["result"]["confirmation"]["cells"]:
        c.pop("excluded")
    assert dumped == raw


def test_a_state_without_knobs_seed_or_again_loads(tmp_path: Path) -> None:
    """The shape before the knob order, the seed and the A/A twin were kept in the state."""
    raw = _raw()
    for k in ("knobs", "seed", "again", "result"):
        raw.pop(k)
    state = load_tune_state(_copy(tmp_path, raw) / "tune.json")
    # the space's keys as tune.json holds them (sorted), the matrix default seed, no twin
    assert state.knobs == ["max_matching_ngram_size", "prompt_lookup_num_tokens"]
    assert state.seed == 0 and state.again is None and state.result is None
    assert list(state.params("t05")) == state.knobs
    assert "seed" not in state.dump() and "again" not in state.dump()  # not written back as if it had been read


def test_the_result_recomputed_from_an_old_state_keeps_every_key() -> None:
    from toolkit.tune.report import result

    res = result(load_tune_state(SESSION / "tune.json"), SESSION)
    old = _raw()["result"]
    got = res.dump()
    # in the writer's order; `report` is the session's to add once it wrote report.md, `out` the CLI's (--out)
    assert list(got) == [k for k in TuneResult.model_fields if k not in ("report", "out")]
    # the decision (issue 42: adopt the winner or keep the preset) is new beside what the old writer set
    assert set(got) | {"report"} == set(old) | {"decision"}
    assert set(got["confirmation"]) == set(old["confirmation"]) | {"decision"}
    for new_cell, old_cell in zip(got["confirmation"]["cells"], old["confirmation"]["cells"]):
        # the cells gained what a verdict may use (excluded, qualified) and how the CI was made
        assert set(new_cell) - set(old_cell) == {"excluded", "qualified", "ci_method"}
    assert TuneResult.model_validate(got).dump() == got


def test_a_new_sessions_state_round_trips_key_for_key(tmp_path: Path) -> None:
    from toolkit.tune.space import check_space
    from toolkit.tune.state import new_state, save_state

    mspec = load_spec(QUICKSTART, expect="Matrix")
    env = load_spec(mspec.path_of(("environment",), mspec.model.environment), expect="Environment")
    space = check_space(mspec, env, "ngram")
    folder, state = new_state(mspec, env, space, "ngram", budget=4, first=2, confirm_requests=6,
                              again="baseline-again", results_root=tmp_path)
    assert folder.parent == tmp_path / "quickstart-tune" and (folder / "prompts" / "coding.tune.jsonl").is_file()
    save_state(folder, state)
    written = json.loads((folder / "tune.json").read_text())
    assert set(written) == NEW_STATE_KEYS  # nothing unset written (no best, wall_s, error, result yet)
    assert written["rungs"] == [{"index": 0, "trials": ["t00", "t01", "t02", "t03"], "requests": 2}]
    assert written["server"] is None and written["confirmation"] is None
    back = load_tune_state(folder / "tune.json")
    assert back == state and back.dump() == state.dump()
    # a step of the search, saved and read back: assigned fields are written
    back.rungs[0].status, back.best, back.wall_s = "complete", "t01", 12.5
    save_state(folder, back)
    again = json.loads((folder / "tune.json").read_text())
    assert again["best"] == "t01" and again["wall_s"] == 12.5 and again["rungs"][0]["status"] == "complete"
    assert load_tune_state(folder / "tune.json").dump() == back.dump()


def test_resume_refuses_a_finished_or_changed_session(tmp_path: Path) -> None:
    from toolkit.tune.state import matrix_hash, resume_state

    mspec = load_spec(QUICKSTART, expect="Matrix")
    with pytest.raises(ToolkitError, match="is complete"):
        resume_state(SESSION, mspec, "ngram", 6)
    raw = _raw()
    raw.update(status="partial", matrix={**raw["matrix"], "hash": matrix_hash(mspec)})
    raw.pop("knobs")  # an older writer's partial session resumes too
    folder = _copy(tmp_path, raw)
    state = resume_state(folder, mspec, "ngram", 6)
    assert state.status == "partial" and state.knobs
    with pytest.raises(ToolkitError, match="the budget changed"):
        resume_state(folder, mspec, "ngram", 5)
    with pytest.raises(ToolkitError, match="the arm changed"):
        resume_state(folder, mspec, "eagle", 6)
    with pytest.raises(ToolkitError, match="tune.json is missing"):
        resume_state(tmp_path, mspec, "ngram", 6)


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw.update(format="toolkit-run"), "not a tune session's state"),
    (lambda raw: raw.update(version=2), "version 2 is not one this toolkit reads"),
    (lambda raw: raw["rungs"][0].pop("requests"), r"rungs\.0\.requests"),
    (lambda raw: raw.update(level="cluster"), "level"),
])
def test_a_bad_state_file_is_a_clear_error(tmp_path: Path, edit, message) -> None:
    raw = _raw()
    edit(raw)
    f = _copy(tmp_path, raw) / "tune.json"
    with pytest.raises(ToolkitError, match=message) as exc:
        load_tune_state(f)
    assert exc.value.file == f


def test_every_progress_call_has_a_no_op_default() -> None:
    """A display passed in that leaves a call out cannot crash a run: every `progress.<call>(` the runner,
    the load generator and the tune session make is a method of the no-op base (the displays themselves,
    progress.py, drive rich's own Progress and are not callers)."""
    from toolkit.schema.progress import RunProgress
    from toolkit.tune.progress import SearchProgress

    calls: dict[str, set[str]] = {}
    for pkg in ("bench", "loadgen", "tune"):
        for f in sorted((ROOT / "toolkit" / pkg).glob("*.py")):
            if f.name != "progress.py":
                for name in re.findall(r"progress\.([a-z_]+)\(", f.read_text()):
                    calls.setdefault(pkg, set()).add(name)
    assert {"cell_done", "on_record", "start", "stop"} <= calls["bench"] | calls.get("loadgen", set())
    assert {"begin_session", "set_best", "finish"} <= calls["tune"]
    runner = calls["bench"] | calls.get("loadgen", set())
    assert not [c for c in runner if not callable(getattr(RunProgress, c, None))], runner
    assert not [c for c in runner | calls["tune"] if not callable(getattr(SearchProgress, c, None))]
    quiet = SearchProgress()
    assert quiet.on_record(object()) is None  # no per-request callback: the cell loop skips it
