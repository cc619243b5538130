"""The toolkit as a user installs it: a wheel built from the sources, installed into a fresh virtual
environment, run from a folder outside the checkout. The wheel must carry templates/ and playbooks/ (as
toolkit/_data/), and render env, render hosts, validate and the quickstart matrix must work from it.

The fresh venv sees this environment's site-packages through a .pth file (after its own), so the
dependencies are not downloaded again (torch stays the pinned CPU build); the toolkit itself comes only
from the wheel, which the test checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from toolkit.results import compact

pytestmark = pytest.mark.slow

SOURCES = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "toolkit", "templates", "playbooks"]


def run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["NO_COLOR"] = "1"
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def _setuptools_ok() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:  # a clean copy: no build/ or egg-info of the checkout leaks into the wheel
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
        else:
            shutil.copy2(p, src / name)
    dist = tmp_path_factory.mktemp("dist")
    # this environment's setuptools when it is new enough; else pip fetches setuptools>=77 to build with
    isolation = ["--no-build-isolation"] if _setuptools_ok() else []
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *isolation, "-w", str(dist), str(src)], cwd=src)
    (whl,) = dist.glob("toolkit-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel: Path) -> Path:
    d = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", str(d)], cwd=d.parent)
    py = d / "bin" / "python"
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "zz-toolkit-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([str(py), "-m", "pip", "install", "-q", f"{wheel}[local]"], cwd=d.parent)
    return d


def test_wheel_carries_templates_and_playbooks(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "toolkit/_data/playbooks/site.yml" in names
    assert "toolkit/_data/templates/Dockerfile.j2" in names and "toolkit/_data/templates/inventory.yml.j2" in names
    roles = {n.split("/")[4] for n in names if n.startswith("toolkit/_data/playbooks/roles/")}
    assert {"common", "docker", "facts", "nvidia_driver", "cuda_toolkit"} <= roles
    assert "toolkit/workloads/data/coding.jsonl" in names
    # the quickstart's trained target (toolkit:quickstart-model), whose digest the environment pins
    assert {"toolkit/_data/quickstart-model/model.safetensors", "toolkit/_data/quickstart-model/config.json",
            "toolkit/_data/quickstart-model/tokenizer.json"} <= names


def test_installed_wheel_works_from_any_folder(venv: Path, tmp_path: Path) -> None:
    work = tmp_path / "elsewhere"  # outside the checkout: nothing can be found beside the sources
    work.mkdir()
    tk, py = str(venv / "bin" / "toolkit"), str(venv / "bin" / "python")
    where = run([py, "-c", "import toolkit; print(toolkit.__file__)"], cwd=work).stdout.strip()
    assert where.startswith(str(venv)) and not where.startswith(str(ROOT)), where

    specs = [ROOT / "envs" / n for n in ("sglang-cu13-blackwell.yaml", "local-cpu.yaml", "hosts/blackwell.yaml",
                                         "matrices/quickstart.yaml", "local-cpu-pair.yaml")]
    run([tk, "validate", *map(str, specs)], cwd=work)

    r = run([tk, "render", "env", str(ROOT / "envs/sglang-cu13-blackwell.yaml"), "-o", "out/env"], cwd=work)
    dockerfile = (work / "out/env/Dockerfile").read_text()
    assert dockerfile.startswith("# Rendered by toolkit") and "--fuzz=0" in dockerfile
    # the same spec hash as from the checkout: the packaged templates are the repository's
    from toolkit.render import render_env
    from toolkit.specs import load_spec

    assert f"spec hash {render_env(load_spec(specs[0])).hash}" in r.stdout

    run([tk, "render", "hosts", str(specs[2]), "-o", "out/inventory.yml"], cwd=work)
    assert "gpu-01" in (work / "out/inventory.yml").read_text()

    # the playbooks are found too: a misspelt role is caught against the packaged roles (no SSH needed)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # where ansible-playbook is
    p = subprocess.run([tk, "provision", "host", str(specs[2]), "--tags", "dockre"], cwd=work, capture_output=True,
                       text=True, env={**os.environ, "NO_COLOR": "1", "PATH": path}, timeout=120)
    assert p.returncode == 2 and "did you mean 'docker'" in p.stderr and "Traceback" not in p.stderr, p.stderr

    # the quickstart (its environment: the trained model packaged in the wheel, both arms, both workloads),
    # with fewer, shorter requests per cell: what is checked is that the installed toolkit runs it from here, not
    # how long 100 requests take (the full quickstart holds them; this one extends it, found by path)
    (work / "quick.yaml").write_text(f"extends: {specs[3]}\nrequests: 4\noutput_len: 16\n")
    r = run([tk, "bench", "matrix", "quick.yaml", "--results", "results"], cwd=work, timeout=900)
    assert "run complete" in r.stdout, r.stdout[-2000:]
    runs = list((work / "results" / "quickstart").iterdir())
    assert len(runs) == 1 and (runs[0] / "report.md").is_file()
    summary = json.loads(compact.read_text(runs[0] / "summary.json"))
    assert {(c["arm"], c["domain"], c["status"]) for c in summary["cells"]} == {
        (a, w, "ok") for a in ("baseline", "ngram") for w in ("coding", "encyclopedic")}
    assert all(c["n_requests"] == 4 for c in summary["cells"])
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert str(venv) in json.dumps(manifest["arms"]), "the model was not the installed wheel's"
