"""Issue 43, load that cannot be what was declared, refused before the cell starts: a trace whose replay would
take longer than its workload's `max_hours:` (24 h unless raised; a trace spanning a year replayed at speed 1),
and a trace length no model takes (its prompt of N words was built in memory before anything reached the
server). Both at plan time (load_trace, read_trace), so `toolkit validate` and the run refuse them alike. (A
schedule the client did not keep is marked `late` while the cell runs: toolkit.schema.eligibility.late_check,
an excluding check, so verdicts skip the cell; tested in tests/loadgen/test_arrival.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import write_matrix
from toolkit.bench.plan import check_matrix
from toolkit.errors import SpecError, ToolkitError
from toolkit.schema.eligibility import EXCLUDING
from toolkit.specs import load_spec

DAY, YEAR = 86400, 365 * 86400


def _trace(tmp: Path, span_s: float, n: int = 2, input_length: int = 4) -> None:
    lines = [f'{{"timestamp": {span_s * i / (n - 1)}, "input_length": {input_length}}}' for i in range(n)]
    (tmp / "tr.jsonl").write_text("\n".join(lines) + "\n")


# trace span, workload keys, the words of the refusal (None: it plans)
SPANS = {
    "a year at speed 1": (YEAR, "", "takes 365 days"),
    "two days at speed 1": (2 * DAY, "", "takes 48.0 h"),
    "a year at speed 100": (YEAR, ", speed: 100", "speed 100 takes"),
    "a year at speeds 1000 and 1": (YEAR, ", speed: [1000, 1]", "speed 1 takes"),
    "two hours over max_hours 1": (7200, ", max_hours: 1", "more than max_hours 1 h"),
    "a day and a second": (DAY + 1, "", "more than max_hours 24 h"),
    "a day exactly": (DAY, "", None),
    "a year at speed 400": (YEAR, ", speed: 400", None),
    "a year with max_hours raised": (YEAR, ", max_hours: 9000", None),
    "an hour": (3600, "", None),
}


@pytest.mark.parametrize("case", list(SPANS))
def test_a_replay_longer_than_max_hours_is_refused_before_it_starts(tmp_path: Path, case: str) -> None:
    span, keys, says = SPANS[case]
    _trace(tmp_path, span)
    m = write_matrix(tmp_path, f"arms: [baseline]\nworkloads:\n  - {{trace: tr.jsonl{keys}}}\n")
    if says is None:
        check_matrix(load_spec(m))
        return
    with pytest.raises(SpecError) as e:
        check_matrix(load_spec(m))
    exc = e.value
    assert says in exc.message and (exc.file, exc.line) == (m, 6), str(exc)
    assert "replay it faster" in exc.hint and "max_hours" in exc.hint, exc.hint


def test_the_hint_names_the_speed_that_fits(tmp_path: Path) -> None:
    _trace(tmp_path, YEAR)
    m = write_matrix(tmp_path, "arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl}\n")
    with pytest.raises(SpecError) as e:
        check_matrix(load_spec(m))
    assert "speed: 365 or more" in e.value.hint


@pytest.mark.parametrize("body, says", [
    ("arms: [baseline]\nworkloads:\n  - {name: chat, max_hours: 3}\nconcurrency: [1]\nrequests: 2\n", "needs `trace:`"),
    ("arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl, max_hours: 0}\n", "max_hours"),
    ("arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl, max_hours: -1}\n", "max_hours"),
    ("arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl, max_hours: .inf}\n", "max_hours"),
])
def test_max_hours_itself_must_make_sense(tmp_path: Path, body: str, says: str) -> None:
    _trace(tmp_path, 60)
    with pytest.raises(SpecError) as e:
        load_spec(write_matrix(tmp_path, body))
    assert says in str(e.value) and e.value.line == 6, str(e.value)
    assert e.value.hint or "remove it" in e.value.message  # a model's own check says the fix in its message


@pytest.mark.parametrize("length", [1 << 24 + 1, 10 ** 12, 2 ** 63])
@pytest.mark.parametrize("key", ["input_length", "output_length"])
def test_a_length_no_model_takes_is_refused_at_its_line(tmp_path: Path, key: str, length: int) -> None:
    (tmp_path / "tr.jsonl").write_text('{"timestamp": 0, "input_length": 4}\n'
                                       f'{{"timestamp": 1, "input_length": 4, "{key}": {length}}}\n'
                                       .replace(', "input_length": 4, "input_length"', ', "input_length"'))
    m = write_matrix(tmp_path, "arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl}\n")
    with pytest.raises(ToolkitError) as e:
        check_matrix(load_spec(m))
    exc = e.value
    assert (exc.file, exc.line) == (tmp_path / "tr.jsonl", 2), str(exc)
    assert "more than any model's context" in exc.message and key in exc.message and exc.hint


def test_the_largest_length_still_plans(tmp_path: Path) -> None:
    (tmp_path / "tr.jsonl").write_text('{"timestamp": 0, "input_length": 4}\n'
                                       '{"timestamp": 1, "input_length": 4, "output_length": 16777216}\n')
    check_matrix(load_spec(write_matrix(tmp_path, "arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl}\n")))


def test_a_late_cell_is_one_verdicts_skip() -> None:
    assert "late" in EXCLUDING


def test_the_cli_refuses_a_year_long_replay_with_exit_2(tmp_path: Path) -> None:
    _trace(tmp_path, YEAR)
    m = write_matrix(tmp_path, "arms: [baseline]\nworkloads:\n  - {trace: tr.jsonl}\n")
    for args in (("validate", str(m)), ("bench", "matrix", str(m), "--results", str(tmp_path / "results"))):
        r = run_cli(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert f"{m}:6:" in r.stderr and "takes 365 days" in r.stderr and "hint: " in r.stderr, r.stderr
    assert not (tmp_path / "results").exists()  # refused before any archive
