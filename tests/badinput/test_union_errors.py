"""Issue 43, union-typed fields: the error first reported is the one of the member the user meant. A mapping is
meant for a mapping member (a Workload), never for `str`; a list for a list member; a number for a number.
`{trace: x, speed: .inf}` said "workloads[0]: expected a valid string ... quote it", the real reason (speed not
finite) only in an `also:` line. Members that all refuse the value's shape are one mistake, said once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from tests.conftest import run_cli
from tests.helpers import TINY_ENV
from toolkit.errors import SpecError
from toolkit.specs import load_spec, validation_error
from toolkit.specs.base import StrictModel
from toolkit.specs.yamlsrc import parse_marked

HEAD = "kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline]\n"

# body (from line 5), the line of the mistake, the first error's pattern, words that must not appear at all
CASES = {
    # workloads[i]: Name | Workload
    "trace speed inf": ("workloads:\n  - {trace: tr.jsonl, speed: .inf}\n", 6,
                        r"workloads\[0\]\.speed: inf is not a finite number"),
    "trace speed negative": ("workloads:\n  - {trace: tr.jsonl, speed: -1}\n", 6,
                             r"workloads\[0\]\.speed: -1 is out of range"),
    "workload unknown key": ("workloads:\n  - {name: x, pth: a.jsonl}\nconcurrency: [1]\nrequests: 2\n", 6,
                             r"workloads\[0\]\.pth: unknown key"),
    "workload bad sample": ("workloads:\n  - {name: x, path: a.jsonl, sample: 0}\nconcurrency: [1]\nrequests: 2\n",
                            6, r"workloads\[0\]\.sample: 0 is out of range"),
    "workload validator": ("workloads:\n  - {trace: tr.jsonl, path: a.jsonl}\n", 6,
                           r"workloads\[0\]\.path: a `trace:` workload sends the trace's own requests"),
    # speed: Positive | list[Positive]
    "speed list item": ("workloads:\n  - trace: tr.jsonl\n    speed: [1, -2]\n", 7,
                        r"workloads\[0\]\.speed\[1\]: -2 is out of range"),
    "speed text": ("workloads:\n  - trace: tr.jsonl\n    speed: fast\n", 7,
                   r"workloads\[0\]\.speed: expected a number or a list, got 'fast'$"),
    # warmup: int >= 0 | Literal['concurrency']
    "warmup negative": ("workloads: [chat]\nconcurrency: [1]\nrequests: 2\nwarmup: -1\n", 8,
                        r"warmup: -1 is out of range: it must be >= 0$"),
    "warmup text": ("workloads: [chat]\nconcurrency: [1]\nrequests: 2\nwarmup: all\n", 8,
                    r"warmup: expected 'concurrency' or an integer, got 'all'$"),
    # tune.space values: int | float | str | bool
    "tune value mapping": ("workloads: [chat]\nconcurrency: [1]\nrequests: 2\ntune:\n  space:\n"
                           "    ngram: {prompt-lookup-num-tokens: [{a: 1}]}\n", 10,
                           r"expected an integer, a number, a string or a boolean, got \{'a': 1\}$"),
}
NEVER = ("expected a valid string", "expected a valid list", "quote it", "more error", "also:")


def _error(tmp_path: Path, body: str) -> SpecError:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    f = tmp_path / "m.yaml"
    f.write_text(HEAD + body)
    with pytest.raises(SpecError) as info:
        load_spec(f)
    return info.value


@pytest.mark.parametrize("case", list(CASES))
def test_the_member_meant_is_reported_first_and_alone(tmp_path: Path, case: str) -> None:
    body, line, pattern = CASES[case]
    exc = _error(tmp_path, body)
    text = str(exc)
    assert exc.line == line, (case, text)
    assert re.search(pattern, exc.message), (case, text)
    assert not any(word in text for word in NEVER), (case, text)


def test_validate_says_it_at_the_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    f = tmp_path / "m.yaml"
    f.write_text(HEAD + CASES["trace speed inf"][0])
    r = run_cli("validate", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"FAIL {f}:6:" in r.stderr and "speed: inf is not a finite number" in r.stderr, r.stderr
    assert "hint: allowed: a finite number > 0" in r.stderr and "quote it" not in r.stderr, r.stderr


class _Local(StrictModel):
    kind: str
    gpus: list[str]


class _Remote(StrictModel):
    kind: str
    url: str
    timeout: int


class _Holder(StrictModel):
    where: _Local | _Remote


def test_among_mapping_members_the_one_that_knows_the_keys_written() -> None:
    """Two mapping members: the one that knows every key the user wrote is the one meant (its `timeout` is
    wrong), not the one that would call `url` and `timeout` unknown."""
    text = "where:\n  kind: remote\n  url: http://x\n  timeout: soon\n"
    data, marks = parse_marked(text, Path("h.yaml"))
    with pytest.raises(ValidationError) as info:
        _Holder.model_validate(data)
    exc = validation_error(info.value, _Holder, data, marks, Path("h.yaml"))
    assert exc.line == 4 and exc.message.startswith("where.timeout: expected a valid integer"), str(exc)
    assert not exc.also, str(exc)


def test_a_model_without_unions_is_unchanged() -> None:
    class Plain(BaseModel):
        n: int

    data, marks = parse_marked("n: x\n", Path("p.yaml"))
    with pytest.raises(ValidationError) as info:
        Plain.model_validate(data)
    exc = validation_error(info.value, Plain, data, marks, Path("p.yaml"))
    assert exc.message.startswith("n: expected a valid integer") and exc.line == 1, str(exc)
