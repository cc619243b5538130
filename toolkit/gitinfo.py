"""The git commit a build or a run came from: one function for every provenance record."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_revision(path: Path | None = None) -> str | None:
    """Commit of the repository holding `path` (default: this toolkit), with -dirty when tracked files
    there differ from it; None outside a git checkout. A copy without .git (a tarball, a device's copy of the
    tree) names its commit in TOOLKIT_GIT_REVISION."""
    from toolkit.settings import settings

    if settings().git_revision:
        return settings().git_revision
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    where = where if where.is_dir() else where.parent
    try:
        sha = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no", "--", "."],
                               capture_output=True, text=True, timeout=10)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None
