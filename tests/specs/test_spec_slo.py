"""The Matrix's `slo:` block: validated like every spec (file:line, what is wrong, a hint, exit 2), and
analysis only: it is not part of the matrix hash."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.errors import SpecError
from toolkit.schema.slo import Objectives
from toolkit.specs import load_spec, spec_hash

MATRIX = textwrap.dedent("""\
    kind: Matrix
    name: m
    environment: {env}
    arms: [baseline, ngram]
    workloads: [coding]
    concurrency: [1, 4]
    requests: 4
    """)


def write(tmp: Path, slo: str) -> Path:
    f = tmp / "m.yaml"
    f.write_text(MATRIX.format(env=ROOT / "envs/local-cpu.yaml") + slo)
    return f


def test_the_block_becomes_objectives(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "slo:\n  tpot_ms: {p90: 50}\n  ttft_ms: {per_request: 500, p99: 2000}\n"))
    obj = Objectives.from_block(spec.model.slo.model_dump())
    assert [o.name for o in obj.items] == ["ttft_ms.p99", "ttft_ms.per_request", "tpot_ms.p90"]
    assert obj.attainment == 0.9 and obj.per_request[0].limit == 500


CASES = {
    "unknown metric": ("slo:\n  tpot: {p90: 50}\n", 9, "slo.tpot: unknown key", "did you mean 'tpot_ms'?"),
    "misspelt percentile": ("slo:\n  tpot_ms: {P90: 50}\n", 9, "slo.tpot_ms.P90: unknown key", "did you mean 'p90'?"),
    "misspelt per_request": ("slo:\n  e2e_ms:\n    per_requests: 900\n", 10, "per_requests: unknown key",
                             "did you mean 'per_request'?"),
    "negative limit": ("slo:\n  ttft_ms: {p90: -5}\n", 9, "slo.ttft_ms.p90: -5 is out of range", "> 0"),
    "empty objective": ("slo:\n  ttft_ms: {}\n", 9, "give a percentile", None),
    "no objective": ("slo:\n  attainment: 0.95\n", 8, "name at least one objective", None),
    "attainment above 1": ("slo:\n  ttft_ms: {p90: 100}\n  attainment: 95\n", 10, "slo.attainment: 95",
                           "> 0 and <= 1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_block_names_file_line_and_fix(tmp_path: Path, case: str) -> None:
    slo, line, message, hint = CASES[case]
    f = write(tmp_path, slo)
    with pytest.raises(SpecError) as e:
        load_spec(f)
    assert e.value.line == line and str(e.value.file) == str(f), str(e.value)
    assert message in e.value.message, str(e.value)
    if hint:
        assert hint in (e.value.hint or ""), str(e.value)


def test_the_cli_refuses_it_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    res = run_cli("validate", str(write(tmp_path, "slo:\n  tpot: {p90: 50}\n")))
    assert res.returncode == 2 and "m.yaml:9" in res.stderr and "did you mean 'tpot_ms'" in res.stderr
    assert "Traceback" not in res.stderr


def test_objectives_do_not_change_the_matrix_hash(tmp_path: Path) -> None:
    """What a run measures does not depend on its objectives: the same hash with or without them, so a
    partial run resumes after objectives are added, and runs with other objectives still compare."""
    plain = spec_hash(load_spec(write(tmp_path, "")))
    with_slo = spec_hash(load_spec(write(tmp_path, "slo:\n  tpot_ms: {p90: 50}\n")))
    other = spec_hash(load_spec(write(tmp_path, "slo:\n  tpot_ms: {p90: 20}\n")))
    assert plain == with_slo == other
    assert spec_hash(load_spec(write(tmp_path, "seed: 3\n"))) != plain  # a measured setting still counts
