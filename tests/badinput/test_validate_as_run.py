"""Issue 43, validate refuses what the run refuses before it starts: a bad trace file validated `ok` and the run
then refused it. `toolkit validate` calls toolkit.tune.space.check_matrix, which calls bench.plan.check_matrix, the
function plan_run calls (load_workloads), so the two cannot disagree."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import TINY_ENV

HEAD = "kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline]\nworkloads:\n  - {trace: tr.jsonl}\n"

# trace file, its bad line, words of the error
TRACES = {
    "a timestamp that is text": ('{"timestamp": 0, "input_length": 4}\n{"timestamp": "x", "input_length": 4}\n', 2,
                                 "timestamp"),
    "not JSON": ('{"timestamp": 0, "input_length": 4}\nnot json\n', 2, ""),
    "an infinite timestamp": ('{"timestamp": Infinity, "input_length": 4}\n', 1, "finite"),
}


@pytest.mark.parametrize("case", list(TRACES))
def test_validate_refuses_a_bad_trace_file_at_its_line(tmp_path: Path, case: str) -> None:
    text, line, says = TRACES[case]
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    (tmp_path / "tr.jsonl").write_text(text)
    m = tmp_path / "m.yaml"
    m.write_text(HEAD)
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert f"{tmp_path / 'tr.jsonl'}:{line}" in r.stderr and says in r.stderr, r.stderr
    assert "ok " not in r.stdout


def test_a_good_trace_matrix_still_validates(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    (tmp_path / "tr.jsonl").write_text('{"timestamp": 0, "input_length": 4}\n{"timestamp": 1, "input_length": 4}\n')
    m = tmp_path / "m.yaml"
    m.write_text(HEAD)
    r = run_cli("validate", str(m))
    assert r.returncode == 0, r.stderr
