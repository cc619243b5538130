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


def test_no_module_but_settings_resolves_a_cache_folder():
    pattern = re.compile(r"^(\.cache|TOOLKIT_CACHE(_DIR)?|XDG_CACHE_HOME|TOOLKIT_(HOSTS|RUNS)_DIR|TOOLKIT_SSH_KNOWN_HOSTS|"
                         r"TOOLKIT_GIT_REVISION|DOCKER_HOST|NO_COLOR)$")
    hits = [f"{p.relative_to(ROOT)}:{line} {text!r}" for p in sorted((ROOT / "toolkit").rglob("*.py"))
            if p.name != "settings.py" for line, text in _code_strings(p) if pattern.match(text)]
    assert not hits, "resolve folders and read these variables through toolkit.settings:\n  " + "\n  ".join(hits)
