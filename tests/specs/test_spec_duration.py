"""`duration_s` per concurrency level: validated with file:line errors, resolved per level, in the hash."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from toolkit.render import template_version
from toolkit.specs import load_spec, spec_hash

ENV = textwrap.dedent("""\
    kind: Environment
    name: t-cpu
    engine: transformers
    model:
      dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}
    servers:
      baseline: {}
    """)


def matrix(tmp: Path, duration: str, name: str = "m.yaml") -> Path:
    (tmp / "env.yaml").write_text(ENV)
    f = tmp / name
    f.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: m
        environment: env.yaml
        arms: [baseline]
        workloads: [coding]
        concurrency: [1, 4, 16, 64]
        duration_s: {duration}
        """))
    return f


def test_a_level_takes_the_highest_listed_level_at_or_below_it(tmp_path: Path) -> None:
    m = load_spec(matrix(tmp_path, "{1: 10, 16: 20.5}")).model
    assert [m.duration_at(c) for c in (1, 4, 16, 64)] == [10.0, 10.0, 20.5, 20.5]
    assert load_spec(matrix(tmp_path, "12")).model.duration_at(64) == 12.0


def test_per_level_durations_are_in_the_hash(tmp_path: Path) -> None:
    hashes = {d: spec_hash(load_spec(matrix(tmp_path, d, f"m{i}.yaml")), template_version())
              for i, d in enumerate(("{1: 10, 16: 20}", "{1: 10, 16: 30}", "{1: 10, 4: 20}", "10"))}
    assert len(set(hashes.values())) == 4
    assert spec_hash(load_spec(matrix(tmp_path, "{1: 10, 16: 20}", "again.yaml")), template_version()) == \
        hashes["{1: 10, 16: 20}"]


@pytest.mark.parametrize("duration, message, hint", [
    ("{4: 10, 16: 20}", "starts at level 4, so concurrency 1 has no duration: add `1: SECONDS`", None),
    ("{1: 10, 16: 0}", "level 16: 0 is not a number of seconds > 0", None),
    ("{0: 10}", "0 is not a concurrency level (a whole number >= 1)", None),
    ("{1: fast}", "level 1: 'fast' is not a number of seconds > 0", None),
    ("{}", "names no level", None),
    ("0", "0 is out of range: it must be > 0", "allowed: a number > 0"),
    ("[1, 2]", "expected a valid number", "fix the value's type"),
])
def test_bad_durations_name_the_line(tmp_path: Path, duration: str, message: str, hint: str | None) -> None:
    f = matrix(tmp_path, duration)
    r = run_cli("validate", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert re.search(rf"{re.escape(str(f))}:7:\d+: duration_s: ", r.stderr), r.stderr
    assert message in r.stderr, r.stderr
    if hint:
        assert f"hint: {hint}" in r.stderr, r.stderr
