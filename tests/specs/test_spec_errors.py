"""A battery of malformed specs: each exits 2 with file:line and a hint, and no traceback."""

from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli

GOOD_PATCH = textwrap.dedent("""\
    --- a/python/sglang/version.py
    +++ b/python/sglang/version.py
    @@ -1 +1 @@
    -__version__ = "0.5.23"
    +__version__ = "0.5.23+toolkit"
    """)


def env_spec(extra: str = "", patch_sha: str | None = None) -> str:
    sha = patch_sha or hashlib.sha256(GOOD_PATCH.encode()).hexdigest()
    return textwrap.dedent(f"""\
        kind: Environment
        name: t
        base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
        cuda: "13.0"
        sglang:
          version: 0.5.23
          patches:
            - path: p.patch
              sha256: {sha}
        servers:
          baseline:
            model-path: /models/x
            tp-size: 8
        """) + extra


def write(tmp: Path, text: str, patch: str = GOOD_PATCH) -> Path:
    (tmp / "p.patch").write_text(patch)
    f = tmp / "env.yaml"
    f.write_text(text)
    return f


CASES = {
    "yaml syntax": (lambda t: t.replace("  version: 0.5.23", "  version: [0.5.23"), r"YAML syntax error",
                    None),
    "misspelt key": (lambda t: t.replace("cuda:", "cdua:"), r"cdua: unknown key", "did you mean 'cuda'"),
    "wrong type": (lambda t: t.replace('cuda: "13.0"', "cuda: [13]"), r"cuda", "type"),
    "missing required": (lambda t: t.replace("  version: 0.5.23\n", ""), r"sglang.version: required key is missing",
                         "add `version:`"),
    "malformed digest": (lambda t: t.replace("ubuntu24.04", "ubuntu24.04@sha256:abc"), r"malformed digest", None),
    "missing patch file": (lambda t: t.replace("path: p.patch", "path: nope.patch"), r"does not exist", "relative"),
    "sha256 mismatch": (lambda t: t.replace(hashlib.sha256(GOOD_PATCH.encode()).hexdigest(), "a" * 64),
                        r"sha256 of p.patch is", "sha256sum"),
    "server arg of wrong type": (lambda t: t.replace("tp-size: 8", "tp-size: {gpus: 8}"),
                                 r"servers.baseline.tp-size: an argument value must be", None),
    "server arg with dashes": (lambda t: t.replace("tp-size: 8", "--tp-size: 8"), r"without leading dashes", None),
    "server flag without value": (lambda t: t.replace("tp-size: 8", "tp-size:"), r"needs a value", None),
    "unknown kind": (lambda t: t.replace("kind: Environment", "kind: Enviroment"), r"kind: expected one of",
                     "did you mean 'Environment'"),
    "duplicate key": (lambda t: t + "cuda: \"12.8\"\n", r"duplicate key 'cuda'", None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_spec_exits_2_with_location(tmp_path: Path, case: str) -> None:
    mutate, pattern, hint = CASES[case]
    f = write(tmp_path, mutate(env_spec()))
    r = run_cli("validate", str(f))
    assert r.returncode == 2, (case, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert re.search(rf"{re.escape(str(f))}:\d+(:\d+)?:", r.stderr), r.stderr  # file:line[:col]
    assert re.search(pattern, r.stderr), r.stderr
    if hint:
        assert "hint:" in r.stderr and hint in r.stderr, r.stderr


def test_error_line_points_at_the_offending_key(tmp_path: Path) -> None:
    f = write(tmp_path, env_spec().replace("tp-size: 8", "tp-size: {gpus: 8}"))
    r = run_cli("validate", str(f))
    line = next(i for i, s in enumerate(f.read_text().splitlines(), 1) if "tp-size" in s)
    assert f"{f}:{line}:" in r.stderr


def test_render_of_bad_spec_writes_nothing(tmp_path: Path) -> None:
    f = write(tmp_path, env_spec().replace("cuda:", "cdua:"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "Dockerfile").write_text("previous\n")
    r = run_cli("render", "env", str(f), "-o", str(out))
    assert r.returncode == 2
    assert (out / "Dockerfile").read_text() == "previous\n"


def test_extends_merges_and_reports_child_lines(tmp_path: Path) -> None:
    write(tmp_path, env_spec())
    child = tmp_path / "child.yaml"
    child.write_text("extends: env.yaml\nname: child\nservers:\n  baseline:\n    tp-size: 4\n    bogus_flag: 1\n")
    r = run_cli("validate", str(child))
    assert r.returncode == 2
    assert f"{child}:6:" in r.stderr and "bogus-flag" in r.stderr
    child.write_text("extends: env.yaml\nname: child\nservers:\n  baseline:\n    tp-size: 4\n")
    from toolkit.specs import load_spec

    spec = load_spec(child)
    assert spec.model.servers["baseline"] == {"model-path": "/models/x", "tp-size": 4}
    # a parent's relative patch path still resolves next to the parent
    assert spec.path_of(("sglang", "patches", 0, "path")) == tmp_path / "p.patch"


def test_extends_cycle_is_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("extends: b.yaml\nkind: Environment\nname: a\n")
    b.write_text("extends: a.yaml\nkind: Environment\nname: b\n")
    r = run_cli("validate", str(a))
    assert r.returncode == 2 and "cycle" in r.stderr
