"""The toolkit's own data folders, templates/ and playbooks/, wherever the toolkit was installed from.

    template_dir = data_dir("templates")     # a real folder: Jinja2 and ansible-runner need paths

A wheel carries them as the package data toolkit/_data/<name>/ (setup.py copies them at build time),
read here through importlib.resources. A checkout or an editable install has no copy there and reads
the repository's top-level folders. A zipped install is extracted once into the cache folder.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path

from toolkit import __version__
from toolkit.errors import ToolkitError

NAMES = ("templates", "playbooks")
REPOSITORY = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=None)
def data_dir(name: str) -> Path:
    if name not in NAMES:
        raise ValueError(f"unknown data folder {name!r}")
    packaged = resources.files("toolkit._data").joinpath(name)
    if packaged.is_dir():
        return packaged if isinstance(packaged, Path) else _extract(packaged, name)
    repo = REPOSITORY / name
    if repo.is_dir():
        return repo
    raise ToolkitError(f"the toolkit's {name}/ folder is missing from this installation",
                       hint="reinstall the toolkit (pip install --force-reinstall toolkit), or run it from a "
                            "checkout of its repository")


def _extract(tree, name: str) -> Path:
    """A non-filesystem resource tree (a zip import) copied to a folder once per toolkit version."""
    from toolkit.settings import cache_dir

    dest = cache_dir() / "resources" / __version__ / name
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest.parent))

    def copy(node, to: Path) -> None:
        for child in node.iterdir():
            if child.is_dir():
                (to / child.name).mkdir()
                copy(child, to / child.name)
            else:
                (to / child.name).write_bytes(child.read_bytes())

    copy(tree, tmp)
    try:
        tmp.rename(dest)
    except OSError:  # another process got there first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


ENGINE_TEMPLATES = "engines"  # templates/engines/NAME/: one engine's own templates (its image's Dockerfile)


def engine_templates(engine: str) -> list[Path]:
    """The files of templates/engines/<engine>/, sorted ([] for an engine without a folder of its own). They
    belong to that engine's Environments alone: toolkit.render.template_version leaves the folder out, and
    toolkit.specs.spec_hash adds an Environment's own engine's, so a vLLM template change keeps every SGLang
    image's cache (and an SGLang one, the vLLM images')."""
    folder = data_dir("templates") / ENGINE_TEMPLATES / engine
    return sorted(f for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else []
