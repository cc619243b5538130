"""Weights pinned by sha256: an Environment's `weights:` names each model folder (or file) a preset serves with
its digest, and a launcher checks them before the server starts, so an archive proves which weights served.

The digest is toolkit.fsutil.folder_digest (a folder: the sha256 of its sorted file listing with each file's sha256).
`python -m toolkit.pair pin FOLDER...` prints the `weights:` block for folders made by the pair's recipe.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.fsutil import folder_digest


def check(pins: dict[str, str]) -> dict[str, str]:  # data-keyed: weights path
    """Every pinned path against its sha256; {path: sha256}. A mismatch is an error before any server starts:
    other weights would be measured under this name."""
    checked = {}
    for path, want in pins.items():
        have = folder_digest(Path(path))
        if have != want:
            raise ToolkitError(f"{path}: weights sha256 {have} differ from the Environment's pin {want}",
                               hint="these are other weights than the ones pinned: restore them, or pin these "
                                    "(`python -m toolkit.pair pin PATH` prints the line) in a new Environment")
        checked[path] = have
    return checked
