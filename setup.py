"""Everything is in pyproject.toml; this file only adds one build step: the wheel carries the
repository's top-level templates/ and playbooks/ as package data under toolkit/_data/, where
toolkit.resources reads them with importlib.resources. An editable install (pip install -e .) reads
the repository's folders directly, so the step is skipped there."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_DIRS = ("templates", "playbooks")


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in DATA_DIRS:
            src = Path(name)
            if not src.is_dir():  # building from an sdist that lacks them would give a broken wheel
                raise SystemExit(f"setup.py: {name}/ is missing; it must be shipped with the source")
            dest = Path(self.build_lib) / "toolkit" / "_data" / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".*", "__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
