"""Extract one (or more) .sglwheels/partK.tar.xz (or .vllmwheels/partK.tar.xz) into a site folder. Stdlib only, Python >= 3.11.4.

    python3 benchmarks/sglang_h200/unpack.py .sglwheels/part1.tar.xz [--dest /tmp/site]

Checks the archive's sha256 against MANIFEST.json beside it (when that lists the file), then extracts
with tarfile's 'data' filter (no absolute paths, no '..', no links out of the folder, no device files).
Unpack every part into the same --dest, then put it first on the path: PYTHONPATH=/tmp/site.
Built by benchmarks/sglang_h200/wheels.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
import time
from pathlib import Path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(archive: Path) -> str:
    manifest = archive.parent / "MANIFEST.json"
    if not manifest.exists():
        return "no MANIFEST.json beside it, sha256 not checked"
    entry = next((a for a in json.loads(manifest.read_text())["archives"] if a["file"] == archive.name), None)
    if entry is None:
        return f"{archive.name} not in MANIFEST.json, sha256 not checked"
    digest = sha256_file(archive)
    if digest != entry["sha256"]:
        sys.exit(f"{archive}: sha256 {digest} differs from MANIFEST.json's {entry['sha256']}")
    return "sha256 ok"


def extract(archive: Path, dest: Path) -> tuple[int, int]:
    if not hasattr(tarfile, "data_filter"):
        sys.exit("this Python's tarfile has no extraction filters (needs 3.12, or 3.11.4+)")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r|xz") as tar:  # stream: one pass over the xz data
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
        print(f"{archive} ({archive.stat().st_size / 2**20:.1f} MiB): {note} in {t1 - t0:.2f} s; "
              f"{files} files, {size / 2**20:.1f} MiB into {args.dest} in {t2 - t1:.2f} s", flush=True)
    print(f"use it with: PYTHONPATH={args.dest}${{PYTHONPATH:+:$PYTHONPATH}} python3 ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
