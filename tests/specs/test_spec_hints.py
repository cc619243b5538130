"""Hints that fit the error: a value out of range is told the allowed range (every bound of the field), a
value of the wrong type is told to fix its type, a pattern mismatch what the pattern stands for."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli

MATRIX = textwrap.dedent("""\
    kind: Matrix
    name: m
    environment: env.yaml
    arms: [baseline]
    workloads: [coding]
    concurrency: [1, 4]
    requests: 8
    """)
ENV = "kind: Environment\nname: e\nengine: transformers\nmodel: {dummy: {}}\nservers: {baseline: {}}\n"


@pytest.mark.parametrize("change, where, message, hint", [
    (("requests: 8", "requests: 0"), "requests", "0 is out of range: it must be >= 1", "allowed: a whole number >= 1"),
    (("concurrency: [1, 4]", "concurrency: [1, 0]"), r"concurrency\[1\]", "0 is out of range",
     "allowed: a whole number >= 1"),
    (("requests: 8", "duration_s: 0"), "duration_s", "0 is out of range: it must be > 0",
     "allowed: a number > 0"),
    (("requests: 8", "requests: many"), "requests", "expected a valid integer", "fix the value's type"),
    (("concurrency: [1, 4]", "concurrency: []"), "concurrency", "needs at least 1 item", "list the values"),
    (("name: m", "name: My Matrix"), "name", "is not of the form this key takes", "expected a lower-case name"),
])
def test_hint_fits_the_error(tmp_path: Path, change, where, message, hint) -> None:
    (tmp_path / "env.yaml").write_text(ENV)
    f = tmp_path / "m.yaml"
    f.write_text(MATRIX.replace(*change))
    r = run_cli("validate", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert re.search(rf"{re.escape(str(f))}:\d+:\d+: {where}: ", r.stderr), r.stderr
    assert message in r.stderr and f"hint: {hint}" in r.stderr, r.stderr
    if "out of range" in message:
        assert "type" not in r.stderr


def test_bounded_field_hint_gives_both_ends(tmp_path: Path) -> None:
    patch = tmp_path / "p.patch"
    patch.write_text("--- a/sglang/x.py\n+++ b/sglang/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    import hashlib

    sha = hashlib.sha256(patch.read_bytes()).hexdigest()
    f = tmp_path / "env.yaml"
    f.write_text(textwrap.dedent(f"""\
        kind: Environment
        name: e
        base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
        sglang:
          version: 0.5.23
          patches:
            - {{path: p.patch, sha256: {sha}, fuzz: 5}}
        """))
    r = run_cli("validate", str(f))
    assert r.returncode == 2 and "sglang.patches[0].fuzz: 5 is out of range: it must be <= 3" in r.stderr
    assert "hint: allowed: a whole number from 0 to 3" in r.stderr, r.stderr
