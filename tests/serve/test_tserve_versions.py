"""The embedded engine on both streamer shapes transformers has had: the locked release (5.25 on:
`_TokenStreamer` in the model's process) and 5.24 (`DirectStreamer` in the server), installed from
requirements/compat-transformers.txt with its hash beside the locked set. Each runs a real matrix (baseline
and n-gram arms) through toolkit.serve._tserve: every cell ok, every request counted token by token (the
n-gram arm's multi-token steps included), the version served recorded. A transformers with neither
streamer fails at once with one line naming the supported range."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, need, run_cli
from toolkit.results import compact

pytestmark = pytest.mark.slow

OUTPUT_LEN = 32
COMPAT = ROOT / "requirements" / "compat-transformers.txt"


def _compat_version() -> str:
    return re.search(r"^transformers==(\S+)", COMPAT.read_text(), re.M).group(1)


@pytest.fixture(scope="module")
def compat_site(tmp_path_factory) -> Path:
    """transformers 5.24 in a folder of its own, put first on PYTHONPATH (its dependencies: the locked ones)."""
    site = tmp_path_factory.mktemp("transformers-compat")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--require-hashes",
                        "--target", str(site), "-r", str(COMPAT)], capture_output=True, text=True, timeout=600)
    need(r.returncode == 0, f"could not install {COMPAT.name} (PyPI unreachable?): {r.stderr[-500:]}")
    return site


def _matrix(tmp_path: Path) -> Path:
    spec = tmp_path / "m.yaml"
    spec.write_text(f"kind: Matrix\nname: tserve-versions\nenvironment: {ROOT / 'envs' / 'local-cpu.yaml'}\n"
                    "arms: [baseline, ngram]\nbaseline: baseline\nworkloads: [coding]\nconcurrency: [1]\n"
                    f"output_len: {OUTPUT_LEN}\nrequests: 4\nwarmup: 1\n")
    return spec


def _serve_matrix(tmp_path: Path, pythonpath: str | None) -> tuple[dict, Path]:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [pythonpath, os.environ.get("PYTHONPATH")]))}
    r = run_cli("bench", "matrix", str(_matrix(tmp_path)), "--results", str(tmp_path / "results"), "--json",
                env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    return out, Path(out["run"])


def _check(out: dict, run: Path, expect_version: str) -> None:
    cells = out["cells"]
    assert len(cells) == 2 and all(c["status"] == "ok" for c in cells), cells
    assert {info["engine_version"] for info in out["derived"]["arm_info"].values()} == {expect_version}
    from toolkit.results.archive import open_archive

    arch = open_archive(run)
    for key in arch.cell_map:
        recs = [r for r in arch.iter_records(key) if not r.warmup]
        assert recs and all(r.output_tokens == OUTPUT_LEN for r in recs), [r.output_tokens for r in recs]
    # the server's own count: every request done with all its tokens; prompt lookup took multi-token steps
    done = [tuple(map(int, m)) for m in re.findall(r"request done tokens=(\d+) steps=(\d+)",
                                                   compact.read_text(run / "logs" / "ngram.log"))]
    assert done and all(t == OUTPUT_LEN for t, _ in done), done
    assert any(s < t for t, s in done), f"no multi-token step in the n-gram arm: {done}"


def test_locked_transformers_serves_every_cell(tmp_path):
    from importlib.metadata import version

    out, run = _serve_matrix(tmp_path, None)
    _check(out, run, version("transformers"))


def test_transformers_5_24_serves_every_cell(tmp_path, compat_site):
    out, run = _serve_matrix(tmp_path, str(compat_site))
    _check(out, run, _compat_version())


def test_the_two_shapes_are_the_two_releases(compat_site):
    """The shim detects the shape, not the version: the locked release has one, 5.24 the other."""
    code = ("from transformers.cli.serving import utils; from toolkit.serve._tserve import streamer_shape; "
            "print(streamer_shape(utils))")
    shapes = []
    for pp in (None, str(compat_site)):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [pp, str(ROOT)])))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        shapes.append(r.stdout.strip().splitlines()[-1])
    assert shapes == ["token", "direct"]


def test_no_known_streamer_fails_at_once_naming_the_range(tmp_path):
    """A transformers whose serving code has neither streamer (a future release): one line, non-zero exit."""
    fake = tmp_path / "site" / "transformers"
    (fake / "cli" / "serving").mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '9.0.0'\n")
    (fake / "cli" / "__init__.py").write_text("")
    (fake / "cli" / "serving" / "__init__.py").write_text("")
    (fake / "cli" / "serving" / "utils.py").write_text("class SomethingElse: pass\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT)]))
    r = subprocess.run([sys.executable, "-m", "toolkit.serve._tserve", "serve", "x"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "transformers 9.0.0" in lines[0] and "supported: transformers 5.0 to 5.25" in lines[0]
