"""One settings object: the cache root under one name, every folder below it, read at call time."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from toolkit.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def test_cache_root_and_the_folders_below_it(tmp_path):
    s = Settings.from_env({"TOOLKIT_CACHE_DIR": str(tmp_path / "c"), "HOME": "/nowhere"})
    assert s.cache_dir == tmp_path / "c" and s.hosts_dir == tmp_path / "c/hosts" and s.runs_dir == tmp_path / "c/provision"
    s = Settings.from_env({"XDG_CACHE_HOME": str(tmp_path / "x")})
    assert s.cache_dir == tmp_path / "x/toolkit"
    s = Settings.from_env({"TOOLKIT_CACHE_DIR": str(tmp_path), "TOOLKIT_HOSTS_DIR": "/h", "TOOLKIT_RUNS_DIR": "/r"})
    assert (s.hosts_dir, s.runs_dir) == (Path("/h"), Path("/r"))


def test_the_old_name_still_works_and_says_so_once(tmp_path, capsys):
    s = Settings.from_env({"TOOLKIT_CACHE": str(tmp_path / "old")})
    Settings.from_env({"TOOLKIT_CACHE": str(tmp_path / "old")})
    assert s.cache_dir == tmp_path / "old"
    err = capsys.readouterr().err
    assert err.count("TOOLKIT_CACHE is deprecated; set TOOLKIT_CACHE_DIR instead") == 1
    both = Settings.from_env({"TOOLKIT_CACHE": "/old", "TOOLKIT_CACHE_DIR": str(tmp_path / "new")})
    assert both.cache_dir == tmp_path / "new"  # the current name wins


def _code_strings(path: Path):
    """(line, text) of every string constant in a module's code (docstrings left out)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


# variables the toolkit sets for a process it starts and that process reads back: plumbing, not user settings
PLUMBING = {"TOOLKIT_SMOKE"}  # toolkit/image/smoke.py: the smoke test's inputs, handed into the container
PLUMBING |= {"TOOLKIT_HEARTBEAT", "TOOLKIT_HEARTBEAT_TIMEOUT_S"}  # toolkit/slurm: handed to a job by sbatch --export
PLUMBING |= {"TOOLKIT_INJECT_"}  # toolkit/bench/hostinfo.py: a prefix of what servers read (a test patch), recorded
_VAR = re.compile(r"^(TOOLKIT_[A-Z_]+|XDG_CACHE_HOME|DOCKER_HOST|NO_COLOR)$")


def _settings_vars() -> set[str]:
    """Every environment variable Settings reads: the variable-like strings in toolkit/settings.py."""
    return {text for _, text in _code_strings(ROOT / "toolkit/settings.py") if _VAR.match(text)}


def test_no_module_but_settings_reads_a_user_setting():
    """Every user setting (cache folders, the event loop, the JIT cache, the Docker host, ...) is read through
    Settings; another module naming one of its variables, or a TOOLKIT_ variable Settings does not know
    that is not plumbing, reads the environment around it."""
    known = _settings_vars()
    assert {"TOOLKIT_CACHE_DIR", "TOOLKIT_EVENT_LOOP", "TOOLKIT_JIT_CACHE", "DOCKER_HOST", "NO_COLOR"} <= known
    pattern = re.compile(r"^\.cache$")
    hits = [f"{p.relative_to(ROOT)}:{line} {text!r}" for p in sorted((ROOT / "toolkit").rglob("*.py"))
            if p.name != "settings.py" for line, text in _code_strings(p)
            if text in known or pattern.match(text) or (_VAR.match(text) and text not in PLUMBING)]
    assert not hits, "read these variables (and resolve folders) through toolkit.settings:\n  " + "\n  ".join(hits)


def test_the_event_loop_setting_picks_the_loop(monkeypatch):
    """TOOLKIT_EVENT_LOOP=asyncio (Settings.event_loop) runs the load generator on the standard loop; unset, on
    uvloop (installed with the toolkit's lock)."""
    import asyncio

    import uvloop

    from toolkit.loadgen.share import run

    async def loop_type():
        return type(asyncio.get_running_loop())

    monkeypatch.setenv("TOOLKIT_EVENT_LOOP", "asyncio")
    assert Settings.from_env().event_loop == "asyncio"
    assert not issubclass(run(loop_type()), uvloop.Loop)
    monkeypatch.delenv("TOOLKIT_EVENT_LOOP")
    assert issubclass(run(loop_type()), uvloop.Loop)
