"""A run published outside git: one tarball per run archive or tune session (`toolkit results pack`), which
`toolkit results verify RUN.tar.gz` checks as it is and `toolkit results import RUN.tar.gz --format toolkit`
unpacks under --root once it verifies (docs/results.md, "Compacted archives, and which runs live in git").

The tarball holds one folder, <matrix>/<run-id>/, as the toolkit wrote it (compacted, SHA256SUMS included):
its integrity is the archive's own, so nothing is added. Written deterministically (sorted members, mtime 0,
no owner), so packing a run twice gives the same bytes. Unpacking refuses anything but regular files and
folders inside that one folder (no links, no absolute or `..` paths).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterator

from toolkit.errors import ToolkitError
from toolkit.fsutil import write_atomic

SUFFIXES = (".tar.gz", ".tgz")


def is_tarball(path: str | Path) -> bool:
    return Path(path).is_file() and str(path).endswith(SUFFIXES)


def pack(folder: Path, out_dir: Path) -> Path:
    """out_dir/<run-id>.tar.gz holding folder as <matrix>/<run-id>/ (a finished run or tune session)."""
    folder = Path(folder)
    if not (folder / "SHA256SUMS").is_file():
        raise ToolkitError(f"{folder} has no SHA256SUMS: only a finished run or session is packed", file=folder)
    top = PurePosixPath(folder.parent.name, folder.name)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for p in [folder, *sorted(folder.rglob("*"))]:
            if p.is_symlink() or not (p.is_file() or p.is_dir()):
                raise ToolkitError(f"{p} is not a plain file or folder; a run archive holds none", file=p)
            info = tar.gettarinfo(str(p), arcname=str(top if p == folder else top / p.relative_to(folder).as_posix()))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if p.is_dir() else 0o644
            if p.is_file():
                with open(p, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    out = Path(out_dir) / f"{folder.name}.tar.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(out, gzip.compress(buf.getvalue(), compresslevel=9, mtime=0))


@contextlib.contextmanager
def unpacked(tarball: Path) -> Iterator[Path]:
    """The tarball's one <matrix>/<run-id> folder, unpacked into a temporary folder removed afterwards."""
    tarball = Path(tarball)
    with tempfile.TemporaryDirectory(prefix="toolkit-unpack-") as tmp:
        try:
            with tarfile.open(tarball, "r:gz") as tar:
                members = tar.getmembers()
                tops = set()
                for m in members:
                    parts = PurePosixPath(m.name).parts
                    if (not (m.isfile() or m.isdir()) or PurePosixPath(m.name).is_absolute() or ".." in parts
                            or len(parts) < 2 and not m.isdir()):
                        raise ToolkitError(f"{tarball}: member {m.name!r} is not a file or folder inside "
                                           "<matrix>/<run-id>/", file=tarball,
                                           hint="a run tarball is made by `toolkit results pack`")
                    if len(parts) >= 2:
                        tops.add(PurePosixPath(*parts[:2]))
                if len(tops) != 1:
                    raise ToolkitError(f"{tarball} holds {len(tops)} run folders; a run tarball holds one",
                                       file=tarball, hint="a run tarball is made by `toolkit results pack`")
                tar.extractall(tmp, members=members, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ToolkitError(f"{tarball} cannot be read as a .tar.gz ({exc}): truncated or not a tarball",
                               file=tarball) from None
        yield Path(tmp) / tops.pop()


def import_tarball(tarball: Path, root: Path) -> Path:
    """Unpack a run tarball to root/<matrix>/<run-id> once every folder in it verifies; an existing folder of
    that name is never overwritten."""
    from toolkit.results.verify import discover, errors, verify_folder

    with unpacked(tarball) as folder:
        for p in discover(folder):
            problems = errors(verify_folder(p))
            if problems:
                raise ToolkitError(f"{tarball}: {p.relative_to(folder.parent.parent)} does not verify "
                                   f"({problems[0]})", file=tarball,
                                   hint=f"`toolkit results verify {tarball}` lists every problem")
        dest = Path(root) / folder.parent.name / folder.name
        if dest.exists():
            raise ToolkitError(f"{dest} exists already; an archive is never overwritten", file=dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder, dest)
    return dest
