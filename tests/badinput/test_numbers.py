"""Issue 43, numbers: what must be a finite positive number refuses .inf, .nan and negatives everywhere, in a
spec (`toolkit validate` at the value's line, before anything runs) and on the command line (exit 2, the
option named). `rates: [.inf]` validated, ran every cell and died in the report, the archive never finalized."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tests.conftest import run_cli
from tests.helpers import TINY_ENV

HEAD = "kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline]\nworkloads: [chat]\n"

# body (from line 6), the line of the bad value, what stderr says
SPEC_CASES = {
    "rate inf": ("rates: [.inf]\nrequests: 2\n", 6, r"rates\[0\]: inf is not a finite number"),
    "rate nan": ("rates: [1, .nan]\nrequests: 2\n", 6, r"rates\[1\]: nan is not a finite number"),
    "rate as text inf": ("rates: ['inf']\nrequests: 2\n", 6, r"rates\[0\]: 'inf' is not a finite number"),
    "rate huge": ("rates: [1e400]\nrequests: 2\n", 6, r"rates\[0\]: '1e400' is not a finite number"),
    "rate negative": ("rates: [-1]\nrequests: 2\n", 6, r"rates\[0\]: -1 is out of range"),
    "burstiness inf": ("rates: [1]\nrequests: 2\narrival: {process: gamma, burstiness: .inf}\n", 8,
                       r"arrival\.burstiness: inf is not a finite number"),
    "burstiness negative": ("rates: [1]\nrequests: 2\narrival: {process: gamma, burstiness: -2}\n", 8,
                            r"arrival\.burstiness: -2 is out of range"),
    "duration inf": ("concurrency: [1]\nduration_s: .inf\n", 7, r"duration_s: inf is not a finite number"),
    "duration per level inf": ("concurrency: [1]\nduration_s: {1: .inf}\n", 7, r"level 1: inf is not a number"),
    "output_len negative": ("concurrency: [1]\nrequests: 2\noutput_len: -5\n", 8, r"output_len: -5 is out of range"),
    "output_len inf": ("concurrency: [1]\nrequests: 2\noutput_len: .inf\n", 8, r"output_len: inf is not a finite"),
    "temperature nan": ("concurrency: [1]\nrequests: 2\ntemperature: .nan\n", 8, r"temperature: nan is not a finite"),
    "slo bound inf": ("concurrency: [1]\nrequests: 2\nslo: {ttft_ms: {p90: .inf}}\n", 8,
                      r"slo\.ttft_ms\.p90: inf is not a finite number"),
}


def test_validate_refuses_inf_nan_and_negatives_at_their_line(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    files = {}
    for i, (case, (body, line, pattern)) in enumerate(SPEC_CASES.items()):
        f = tmp_path / f"m{i}.yaml"
        f.write_text(HEAD + body)
        files[case] = f
    r = run_cli("validate", *map(str, files.values()))
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    for case, f in files.items():
        _, line, pattern = SPEC_CASES[case]
        shown = [ln for ln in r.stderr.splitlines() if ln.startswith(f"FAIL {f}:")]
        assert shown, (case, r.stderr)
        assert shown[0].startswith(f"FAIL {f}:{line}:") and re.search(pattern, shown[0]), (case, shown[0])
    assert "hint: allowed: a finite number > 0" in r.stderr
    assert "ok " not in r.stdout, r.stdout  # not one of them validates


def test_a_trace_with_infinite_times_is_refused_at_its_line(tmp_path: Path) -> None:
    """Python's json reads `Infinity` and `NaN`: a trace line with one is refused, file:line."""
    from toolkit.errors import ToolkitError
    from toolkit.schema.trace import read_trace

    tr = tmp_path / "tr.jsonl"
    tr.write_text('{"timestamp": 0, "input_length": 4}\n{"timestamp": Infinity, "input_length": 4}\n')
    try:
        read_trace(tr)
    except ToolkitError as exc:
        assert exc.line == 2 and "finite" in exc.message
    else:
        raise AssertionError("a trace with an infinite timestamp was read")


def test_cli_numbers_refuse_negative_inf_and_nan(tmp_path: Path) -> None:
    """`--fail-on-regression -5` was accepted (every regression 'beyond -5 %'); `--output-len -5` imported."""
    cases = [
        (["results", "diff", "a", "b", "--fail-on-regression", "-5"], "--fail-on-regression", "-5 is out of range"),
        (["results", "diff", "a", "b", "--fail-on-regression", "nan"], "--fail-on-regression", "not a finite"),
        (["results", "import", "x.json", "--format", "sglang", "--output-len", "-5"], "--output-len",
         "-5 is out of range"),
        (["results", "slo", "x", "--attainment", "inf"], "--attainment", "not a finite"),
        (["results", "reproduce", "x", "--tolerance", "inf"], "--tolerance", "not a finite"),
    ]
    for args, option, says in cases:
        r = run_cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert f"'{option}'" in r.stderr and says in r.stderr, (args, r.stderr)
