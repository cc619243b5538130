"""The toolkit's own environment is locked (requirements/, docs/install.md): every requirement of every extra
has a hashed pin that satisfies pyproject's range, the quickstart's lock agrees with the full one, and the
environment the tests run in is the locked one (so CI tested what a fresh machine installs)."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT, need

REQ = ROOT / "requirements"


def read_lock(path: Path) -> dict[str, dict]:
    """name -> {version, marker, hashes} of a requirements file with hashes (pip-compile's, or one line
    `name==version --hash=sha256:...`): backslash continuations joined, comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    pins: dict[str, dict] = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        hashes = re.findall(r"--hash=sha256:(\S+)", line)
        req = re.sub(r"--hash=\S+", "", line).strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+?)\s*(?:;\s*(.+))?", req)
        assert m, f"{path.name}: not a pin: {req!r}"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"{path.name}: {name} pinned twice"
        pins[name] = {"version": m.group(2), "marker": (m.group(3) or "").strip(), "hashes": hashes}
    return pins


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements_of(extras: list[str]) -> list[Requirement]:
    """The core requirements plus those of the extras, self-references (toolkit[a,b]) expanded."""
    proj = pyproject()
    out = [Requirement(r) for r in proj["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for r in map(Requirement, proj["optional-dependencies"][extra]):
            if canonicalize_name(r.name) == "toolkit":
                todo += sorted(r.extras)
            else:
                out.append(r)
    return out


def applies(req: Requirement) -> bool:
    return req.marker is None or req.marker.evaluate({"extra": ""})


def check_covers(lock: dict[str, dict], reqs: list[Requirement], name: str) -> None:
    missing, outside = [], []
    for r in reqs:
        if not applies(r):
            continue
        pin = lock.get(canonicalize_name(r.name))
        if pin is None:
            missing.append(str(r))
        elif not r.specifier.contains(Version(pin["version"]), prereleases=True):
            outside.append(f"{r} (locked {pin['version']})")
    hint = "run `bash requirements/refresh.sh` after changing pyproject.toml's dependencies"
    assert not missing, f"{name} has no pin for {missing}: {hint}"
    assert not outside, f"{name} pins outside pyproject's range: {outside}: {hint}"


def test_dev_lock_covers_every_extra_and_the_test_set():
    lock = read_lock(REQ / "dev.txt")
    extras = list(pyproject()["optional-dependencies"])
    assert {"local", "provision", "docker", "test", "all", "embed"} <= set(extras)
    check_covers(lock, requirements_of(extras), "requirements/dev.txt")
    for extra in extras:  # each extra alone is covered too (the lock holds their union)
        check_covers(lock, requirements_of([extra]), f"requirements/dev.txt (extra {extra})")


def test_local_lock_covers_the_quickstart_and_agrees_with_dev():
    local, dev = read_lock(REQ / "local.txt"), read_lock(REQ / "dev.txt")
    check_covers(local, requirements_of(["local"]), "requirements/local.txt")
    differ = {n: (p["version"], dev.get(n, {}).get("version")) for n, p in local.items()
              if dev.get(n, {}).get("version") != p["version"]}
    assert not differ, f"local.txt and dev.txt pin different versions: {differ}"


@pytest.mark.parametrize("name", ["dev.txt", "local.txt", "compat-transformers.txt"])
def test_every_pin_has_a_hash(name):
    lock = read_lock(REQ / name)
    assert lock
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for p in lock.values() for h in p["hashes"])
    unhashed = [n for n, p in lock.items() if not p["hashes"]]
    assert not unhashed, f"{name}: no --hash for {unhashed} (pip install --require-hashes would refuse it)"


def test_setuptools_for_the_editable_install_is_locked():
    """README and tests/run.sh install the toolkit with --no-build-isolation: its build backend comes from
    the lock, not from an unpinned download."""
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for lock in ("dev.txt", "local.txt"):
        check_covers(read_lock(REQ / lock), [Requirement(r) for r in build], f"requirements/{lock}")


def test_this_environment_is_the_locked_one():
    """The tests run in what tests/run.sh installed: every locked package at its locked version."""
    need(sys.prefix != sys.base_prefix, "not in a virtual environment: nothing was installed from the lock")
    wrong = {}
    for name, pin in read_lock(REQ / "dev.txt").items():
        if pin["marker"] and not Requirement(f"x; {pin['marker']}").marker.evaluate():
            continue
        try:
            have = version(name)
        except PackageNotFoundError:
            have = None
        if have != pin["version"]:
            wrong[name] = (pin["version"], have)
    assert not wrong, f"installed versions differ from requirements/dev.txt (locked, installed): {wrong}"


def test_readme_and_ci_install_from_the_lock():
    readme, run = (ROOT / "README.md").read_text(), (ROOT / "tests" / "run.sh").read_text()
    assert "--require-hashes -r requirements/local.txt" in readme
    assert "--require-hashes -r requirements/dev.txt" in run
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text()
    unpinned = [line for line in run.splitlines() if re.search(r"pip install(?!.*(-r requirements|--no-deps))", line)]
    assert not unpinned, f"tests/run.sh installs outside the lock: {unpinned}"
