"""Reading unified diffs: which files a patch touches and which layout it was written against.

SGLang patches come in two layouts: the git repository's (`a/python/sglang/srt/...`, the usual
case) and the installed package's (`a/sglang/srt/...`). Both are applied relative to the
directory that *contains* the `sglang` package, with the strip level this module works out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import SpecError

_HEADER = re.compile(r"^\+\+\+ (\S+)")


@dataclass(frozen=True)
class PatchInfo:
    path: Path
    files: tuple[str, ...]  # package-relative, e.g. sglang/srt/server_args.py
    strip: int              # the -p level that maps a header path onto package-relative

    @property
    def layout(self) -> str:
        return "git" if self.strip == 2 else "package"


def _strip_for(name: str) -> tuple[int, str] | None:
    parts = name.split("/")
    for strip in range(len(parts)):
        rest = parts[strip:]
        if rest and rest[0] == "sglang":
            return strip, "/".join(rest)
    return None


def read_patch(path: Path) -> PatchInfo:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise SpecError(f"cannot read patch: {exc}", file=path) from None
    files: list[str] = []
    strips: set[int] = set()
    for lineno, line in enumerate(lines, 1):
        m = _HEADER.match(line)
        if not m:
            continue
        name = m.group(1)
        if name == "/dev/null":
            continue
        found = _strip_for(name)
        if found is None:
            raise SpecError(f"patch touches {name}, which is not inside the sglang package",
                            hint="write patches against python/sglang/... (git layout) or sglang/... (package layout)",
                            file=path, line=lineno)
        strip, rel = found
        strips.add(strip)
        files.append(rel)
    if not files:
        raise SpecError("not a unified diff: no `+++ b/...` file headers found",
                        hint="make patches with `git diff` or `diff -u`", file=path, line=1)
    if len(strips) > 1:
        raise SpecError("patch mixes layouts (python/sglang/... and sglang/...)",
                        hint="write every file of one patch against the same layout", file=path)
    return PatchInfo(path=path, files=tuple(files), strip=strips.pop())
