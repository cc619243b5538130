"""Extract one (or more) .sglwheels/partK.tar.xz (or .vllmwheels/partK.tar.xz) into a site folder. Stdlib only, Python >= 3.11.4.

    python3 benchmarks/sglang_h200/unpack.py .sglwheels/part1.tar.xz [--dest /tmp/site]

Checks the archive's sha256 against MANIFEST.json beside it (when that lists the file), then extracts
with tarfile's 'data' filter (no absolute paths, no '..', no links out of the folder, no device files).
An archive over the carry limit travels in pieces (partK.tar.xz.001, .002, ...: wheels.py's split_pieces):
put every piece and MANIFEST.json in one folder and name the archive (partK.tar.xz, which need not exist):
the pieces are checked one by one and as a whole, and extracted as one stream.
Unpack every part into the same --dest, then put it first on the path: PYTHONPATH=/tmp/site.
Built by benchmarks/sglang_h200/wheels.py.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
import time
from pathlib import Path


def sha256_file(path: Path, *also) -> str:
    """The file's sha256; each of `also` (hashlib objects) is fed the same bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            for other in also:
                other.update(block)
    return h.hexdigest()


def entry_of(archive: Path) -> dict | None:
    manifest = archive.parent / "MANIFEST.json"
    if not manifest.exists():
        return None
    return next((a for a in json.loads(manifest.read_text())["archives"] if a["file"] == archive.name), None)


def pieces_of(archive: Path) -> list[Path]:
    """The files that hold the archive: itself, or its pieces (the manifest's, else PATH.NNN in name order)."""
    if archive.exists():
        return [archive]
    entry = entry_of(archive)
    if entry and entry.get("pieces"):
        return [archive.parent / p["file"] for p in entry["pieces"]]
    found = sorted(archive.parent.glob(archive.name + ".[0-9][0-9][0-9]"))
    if not found:
        sys.exit(f"{archive}: no such archive, nor pieces of it ({archive.name}.001, ...) beside it")
    return found


def verify(archive: Path) -> str:
    if not (archive.parent / "MANIFEST.json").exists():
        return "no MANIFEST.json beside it, sha256 not checked"
    entry = entry_of(archive)
    if entry is None:
        return f"{archive.name} not in MANIFEST.json, sha256 not checked"
    whole = hashlib.sha256()
    wants = entry.get("pieces") if not archive.exists() else None  # a joined archive: checked whole
    for piece, want in zip(pieces_of(archive), wants or [None]):
        if not piece.exists():
            sys.exit(f"{piece}: missing (carry every piece of {archive.name}, with MANIFEST.json, into one folder)")
        digest = sha256_file(piece, whole)
        if want is not None and digest != want["sha256"]:
            sys.exit(f"{piece}: sha256 {digest} differs from MANIFEST.json's {want['sha256']}")
    if whole.hexdigest() != entry["sha256"]:
        sys.exit(f"{archive}: sha256 {whole.hexdigest()} differs from MANIFEST.json's {entry['sha256']}")
    return f"sha256 ok ({len(wants)} pieces)" if wants else "sha256 ok"


class Joined(io.RawIOBase):
    """Several files read as one stream, in order (an archive's pieces)."""

    def __init__(self, paths: list[Path]):
        self.paths, self.f = list(paths), None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while True:
            if self.f is None:
                if not self.paths:
                    return 0
                self.f = open(self.paths.pop(0), "rb")
            n = self.f.readinto(b)
            if n:
                return n
            self.f.close()
            self.f = None


def extract(archive: Path, dest: Path) -> tuple[int, int]:
    if not hasattr(tarfile, "data_filter"):
        sys.exit("this Python's tarfile has no extraction filters (needs 3.12, or 3.11.4+)")
    dest.mkdir(parents=True, exist_ok=True)
    stream = io.BufferedReader(Joined(pieces_of(archive)), 1 << 20)
    with tarfile.open(fileobj=stream, mode="r|xz") as tar:  # stream: one pass over the xz data
        tar.extractall(dest, filter="data")
        files = [m for m in tar.getmembers() if m.isfile()]
    return len(files), sum(m.size for m in files)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("archives", nargs="+", type=Path, help=".sglwheels/partK.tar.xz")
    ap.add_argument("--dest", type=Path, default=Path("/tmp/site"), help="site folder (default /tmp/site)")
    ap.add_argument("--no-verify", action="store_true", help="skip the sha256 check")
    args = ap.parse_args()
    for archive in args.archives:
        t0 = time.perf_counter()
        note = "sha256 not checked" if args.no_verify else verify(archive)
        t1 = time.perf_counter()
        files, size = extract(archive, args.dest)
        t2 = time.perf_counter()
        size_in = sum(p.stat().st_size for p in pieces_of(archive))
        print(f"{archive} ({size_in / 2**20:.1f} MiB): {note} in {t1 - t0:.2f} s; "
              f"{files} files, {size / 2**20:.1f} MiB into {args.dest} in {t2 - t1:.2f} s", flush=True)
    print(f"use it with: PYTHONPATH={args.dest}${{PYTHONPATH:+:$PYTHONPATH}} python3 ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
