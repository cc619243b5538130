"""Build a wheel set for the offline GPU machine into a few self-contained archives.

The sets are declared in wheelsets.py (pins, what is stripped and why): `--set sglang-0.5.17` (the
default, into .sglwheels/) and `--set vllm-0.24.0` (into .vllmwheels/, docs/lab/vllm.md).
Usage (here, any Python >= 3.11 with pip; PyPI through the configured index):

    .venv/bin/python benchmarks/sglang_h200/wheels.py            # download (cached), strip, unpack, pack, check
    .venv/bin/python benchmarks/sglang_h200/wheels.py --check    # re-check .sglwheels/ against MANIFEST.json
    .venv/bin/python benchmarks/sglang_h200/wheels.py --set vllm-0.24.0   # .vllmwheels/, 36 MiB parts

What follows describes the SGLang set; the vLLM set works the same way with its own folders.

  - wheels go to .cache/sglang-0.5.17-wheels/ (kept between runs; only missing ones are downloaded),
    the unpacked tree to .cache/sglang-0.5.17-wheels/tree/ (rebuilt every run),
  - archives to .sglwheels/partK.tar.xz + .sglwheels/MANIFEST.json (git-ignored), each <= 50 MiB;
    the run exits 1 when an archive is over the limit. Reruns give byte-identical archives. A wheel whose
    xz alone is over the limit (vLLM's own) gets an archive of its own, cut into pieces within it
    (partK.tar.xz.001, ...): carry each, gather them beside MANIFEST.json in one folder, and unpack.py joins them.
  - measured (2 cores): 2 archives, 41.5 + 42.4 MiB (zstd -19 --long=27 would be 44.1 + 45.0 MiB);
    ~5 min per run, plus ~6 min on the first one to size each entry (cached in estimates.json);
    unpacking both takes ~10 s.

Carry one part per trip (e.g. carry [".sglwheels/part1.tar.xz", ".sglwheels/MANIFEST.json"], then
part2 with the manifest) and unpack each into the same folder while the machine stays warm; on the
H200 (Python 3.12, stdlib only):

    python3 benchmarks/sglang_h200/unpack.py .sglwheels/part1.tar.xz --dest /tmp/site
    python3 benchmarks/sglang_h200/unpack.py .sglwheels/part2.tar.xz --dest /tmp/site
    PYTHONPATH=/tmp/site python3 -m sglang.launch_server ... --attention-backend flashinfer

The tree is what `pip install --target` makes (packages and *.dist-info at the top, no console
scripts); put it FIRST on sys.path so its transformers 5.12.1 wins over the machine's 5.17.
sglang_kernel is stripped to what an SM90 GPU loads: FA3 (`sgl_kernel.flash_ops`) is not carried,
so SGLang's Hopper default attention backend "fa3" (and the ViT "fa3" mm backend) cannot be used;
pass `--attention-backend flashinfer` (or triton) and, for VLMs, `--mm-attention-backend triton_attn`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import fnmatch
import hashlib
import io
import json
import lzma
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheelsets import SETS, WheelSet  # noqa: E402

PRESET = 9 | lzma.PRESET_EXTREME
ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


@dataclass(frozen=True)
class Where:
    """A set's folders: wheels in cache/, the unpacked tree in cache/tree/, archives in out/."""
    ws: WheelSet
    root: Path = ROOT

    @property
    def cache(self) -> Path:
        return self.root / self.ws.cache

    @property
    def tree(self) -> Path:
        return self.cache / "tree"

    @property
    def out(self) -> Path:
        return self.root / self.ws.out

    @property
    def estimates(self) -> Path:
        return self.cache / "estimates.json"


# ------------------------------------------------------------------------------------------ helpers
def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mib(n: int) -> str:
    return f"{n / MIB:8.2f} MiB"


def wheel_file(cache: Path, name: str, version: str) -> Path | None:
    """The cached wheel of name==version (error if several tags are cached)."""
    hits = []
    for p in cache.glob("*.whl"):
        parts = p.name[:-4].split("-")
        if len(parts) >= 5 and norm(parts[0]) == norm(name) and parts[1].lower() == version.lower():
            hits.append(p)
    if len(hits) > 1:
        sys.exit(f"several cached wheels for {name}=={version}: {[h.name for h in hits]}; remove the extra ones")
    return hits[0] if hits else None


def download(w: Where) -> dict[str, Path]:
    CACHE = w.cache
    CACHE.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={v}" for n, v in w.ws.wheels if wheel_file(CACHE, n, v) is None]
    if missing:
        print(f"downloading {len(missing)} wheel(s) into {CACHE.relative_to(ROOT)}/ ...", flush=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
               *[a for p in w.ws.platforms for a in ("--platform", p)],
               "--progress-bar", "off", "-d", str(CACHE), *missing]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        print(f"download: {time.perf_counter() - t0:.1f} s", flush=True)
    files = {}
    for n, v in w.ws.wheels:
        p = wheel_file(CACHE, n, v)
        if p is None:
            sys.exit(f"pip did not fetch {n}=={v}")
        files[norm(n)] = p
    print(f"{len(files)} wheels, {mib(sum(p.stat().st_size for p in files.values()))} as published")
    return files


def target_path(member: str) -> str | None:
    """Where a wheel member lands in a `pip install --target` tree (None: not installed there)."""
    top, _, rest = member.partition("/")
    if top.endswith(".data"):
        kind, _, sub = rest.partition("/")
        return sub if kind in ("purelib", "platlib") and sub else None  # scripts/headers/data: dropped
    return member


# ----------------------------------------------------------------------------------------- unpack
def unpack(w: Where, files: dict[str, Path], drop_static: bool) -> dict:
    """Unpack every wheel into w.tree; return per-wheel facts for the manifest."""
    TREE, DROP, KEEP, STATIC_DROP = w.tree, w.ws.drop, w.ws.keep, w.ws.static_drop
    if TREE.exists():
        shutil.rmtree(TREE)
    TREE.mkdir(parents=True)
    owner: dict[str, str] = {}  # tree path -> wheel that wrote it
    facts = {}
    for name, ver in sorted(w.ws.wheels, key=lambda nv: norm(nv[0])):
        key = norm(name)
        whl = files[key]
        drop = DROP.get(key, []) + (STATIC_DROP.get(key, []) if drop_static else [])
        used = {pat: 0 for pat in drop}
        dropped, kept_bytes, all_bytes = [], 0, 0
        moved: dict[str, str | None] = {}  # wheel path -> tree path (None: left out)
        with zipfile.ZipFile(whl) as z:
            infos = [i for i in z.infolist() if not i.is_dir()]
            for info in infos:
                all_bytes += info.file_size
                dest = target_path(info.filename)
                hit = [pat for pat in drop if fnmatch.fnmatchcase(info.filename, pat)]
                for pat in hit:
                    used[pat] += 1
                if hit or dest is None:
                    moved[info.filename] = None
                    dropped.append({"path": info.filename, "size": info.file_size})
                    continue
                moved[info.filename] = dest
                out = TREE / dest
                data = z.read(info)
                if dest in owner:
                    same = out.read_bytes() == data
                    print(f"  note: {dest} from {whl.name} {'(identical) ' if same else ''}"
                          f"overwrites the one from {owner[dest]}")
                owner[dest] = whl.name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
                mode = (info.external_attr >> 16) & 0o777
                out.chmod(0o755 if mode & 0o111 else 0o644)
                kept_bytes += info.file_size
        for pat, n in used.items():
            if not n:
                sys.exit(f"{whl.name}: drop pattern {pat!r} matched nothing; update DROP for this release")
        kept_paths = [d for d in moved.values() if d]
        for pat in KEEP.get(key, []):
            if not any(fnmatch.fnmatchcase(p, pat) for p in kept_paths):
                sys.exit(f"{whl.name}: nothing kept matches {pat!r}")
        if dropped:
            rewrite_record(TREE, whl, moved)
        facts[key] = {
            "name": name, "version": ver, "file": whl.name, "sha256": sha256_file(whl),
            "size": whl.stat().st_size, "unpacked_size": kept_bytes,
            "dropped": sorted(dropped, key=lambda d: d["path"]),
            "top_level": sorted({p.split("/")[0] for p in kept_paths}),
        }
        stripped = [d for d in dropped if target_path(d["path"]) is not None]
        if stripped:
            print(f"{whl.name}: {mib(whl.stat().st_size)} as published; unpacked {mib(all_bytes)}"
                  f" -> kept {mib(kept_bytes)}")
            for d in sorted(stripped, key=lambda d: (-d["size"], d["path"])):
                print(f"    dropped {mib(d['size'])}  {d['path']}")
            if key in KEEP:
                for p in sorted(p for p in kept_paths if not p.endswith(".py")
                                and any(fnmatch.fnmatchcase(p, pat) for pat in KEEP[key])):
                    print(f"    kept    {mib((TREE / p).stat().st_size)}  {p}")
        elif dropped:
            print(f"{whl.name}: not installed by --target: {', '.join(d['path'] for d in dropped)}")
    return facts


def rewrite_record(TREE: Path, whl: Path, moved: dict[str, str | None]) -> None:
    """Rewrite <dist-info>/RECORD in TREE: paths as installed, rows of left-out files removed."""
    record = next((p for p in moved if p.endswith(".dist-info/RECORD") and p.count("/") == 1), None)
    if record is None:
        return
    with zipfile.ZipFile(whl) as z:
        rows = list(csv.reader(io.StringIO(z.read(record).decode("utf-8"))))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for row in rows:
        if not row:
            continue
        dest = moved.get(row[0], target_path(row[0]))
        if dest is None:
            continue
        w.writerow([dest, *row[1:]])
    (TREE / moved[record]).write_text(buf.getvalue(), encoding="utf-8")


# ------------------------------------------------------------------------------------------- pack
def add_entry(TREE: Path, tar: tarfile.TarFile, top: str) -> None:
    """Add TREE/top (file or folder) with normalised metadata, names sorted."""
    def info(rel: str, path: Path) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(rel)
        ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = 0, 0, 0, "", ""
        if path.is_dir():
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
        else:
            ti.size = path.stat().st_size
            ti.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
        return ti

    root = TREE / top
    if root.is_file():
        with open(root, "rb") as f:
            tar.addfile(info(top, root), f)
        return
    tar.addfile(info(top, root))
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(TREE).as_posix()
        for d in dirnames:
            tar.addfile(info(f"{rel_dir}/{d}", Path(dirpath, d)))
        for fn in sorted(filenames):
            p = Path(dirpath, fn)
            with open(p, "rb") as f:
                tar.addfile(info(f"{rel_dir}/{fn}", p), f)


def tar_bytes(TREE: Path, entries: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in sorted(entries):
            add_entry(TREE, tar, e)
    return buf.getvalue()


def estimate_one(TREE: Path, entry: str) -> tuple[str, str, int]:
    raw = tar_bytes(TREE, [entry])
    digest = hashlib.sha256(raw).hexdigest()
    return entry, digest, len(raw)


def compress_len(raw: bytes) -> int:
    return len(lzma.compress(raw, format=lzma.FORMAT_XZ, preset=PRESET))


def estimate(w: Where, entries: list[str], jobs: int) -> dict[str, int]:
    """xz size of each top-level entry alone (cached by content)."""
    ESTIMATES = w.estimates
    cache = json.loads(ESTIMATES.read_text()) if ESTIMATES.exists() else {}
    sizes, todo = {}, []
    for e in entries:
        _, digest, _ = estimate_one(w.tree, e)
        if digest in cache:
            sizes[e] = cache[digest]
        else:
            todo.append((e, digest))
    if todo:
        t0 = time.perf_counter()
        print(f"estimating xz size of {len(todo)} top-level entries ({jobs} processes) ...", flush=True)
        with concurrent.futures.ProcessPoolExecutor(jobs) as ex:
            futs = {ex.submit(_estimate_worker, w.tree, e): (e, d) for e, d in todo}
            for fut in concurrent.futures.as_completed(futs):
                e, d = futs[fut]
                sizes[e] = cache[d] = fut.result()
        ESTIMATES.write_text(json.dumps(cache, indent=0, sort_keys=True))
        print(f"estimate: {time.perf_counter() - t0:.1f} s", flush=True)
    return sizes


def _estimate_worker(TREE: Path, entry: str) -> int:
    return compress_len(tar_bytes(TREE, [entry]))


def write_archive(TREE: Path, path: Path, entries: list[str]) -> dict:
    raw = tar_bytes(TREE, entries)
    with open(path, "wb") as f:
        f.write(lzma.compress(raw, format=lzma.FORMAT_XZ, preset=PRESET))
    return {"file": path.name, "entries": sorted(entries), "size": path.stat().st_size,
            "sha256": sha256_file(path), "tar_size": len(raw)}


def split_pieces(path: Path, limit: int) -> list[dict]:
    """An archive over the limit cut into equal byte pieces of at most `limit` (PATH.001, PATH.002, ...), each
    carried in a call of its own; unpack.py joins them (their order is the manifest's) and checks the whole
    archive's sha256. The whole file is removed: only carry-sized files are left in the folder."""
    size = path.stat().st_size
    count = math.ceil(size / limit)
    step = math.ceil(size / count)
    pieces = []
    with open(path, "rb") as f:
        for k in range(1, count + 1):
            chunk = f.read(step)
            piece = path.with_name(f"{path.name}.{k:03d}")
            piece.write_bytes(chunk)
            pieces.append({"file": piece.name, "size": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    path.unlink()
    return pieces


def units(facts: dict) -> list[tuple[str, ...]]:
    """Top-level entries grouped so that each wheel's entries (package, dist-info, .libs) stay in one
    archive; wheels writing the same top-level entry (a shared file or namespace folder) share a unit."""
    groups: list[set[str]] = []
    for f in facts.values():
        merged = set(f["top_level"])
        for g in [g for g in groups if g & merged]:
            merged |= g
            groups.remove(g)
        groups.append(merged)
    return sorted(tuple(sorted(g)) for g in groups)


def balance(sizes: dict[tuple[str, ...], int], n: int) -> list[list[str]]:
    """Greedy (largest first, into the lightest archive) split of the units into n archives."""
    bins: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    for u in sorted(sizes, key=lambda u: (-sizes[u], u)):
        k = min(range(n), key=lambda i: (load[i], i))
        bins[k].extend(u)
        load[k] += sizes[u]
    return bins


def pack(w: Where, facts: dict, limit: int, jobs: int, drop_static: bool) -> int:
    TREE, OUT = w.tree, w.out
    entries = sorted(p.name for p in TREE.iterdir())
    esize = estimate(w, entries, jobs)
    sizes = {u: sum(esize[e] for e in u) for u in units(facts)}
    if sorted(e for u in sizes for e in u) != entries:
        sys.exit("top-level entries and wheels disagree")
    total_est = sum(sizes.values())
    print(f"{len(entries)} top-level entries in {len(sizes)} units (a wheel's entries stay together), "
          f"{mib(total_est)} xz if compressed one by one")
    # a unit over the limit alone (vLLM's own wheel: its _C library is ~81 MiB of already-compressed fatbins)
    # gets an archive of its own, carried in pieces (split_pieces); the rest are balanced as before
    solo = sorted((u for u in sizes if sizes[u] > limit), key=lambda u: (-sizes[u], u))
    for u in solo:
        print(f"  {u} alone is {mib(sizes[u])} xz, over the {mib(limit)} limit: an archive of its own, in pieces")
    sizes = {u: s for u, s in sizes.items() if u not in solo}
    if OUT.exists():
        for old in [*OUT.glob("part*.tar.xz"), *OUT.glob("part*.tar.xz.[0-9][0-9][0-9]"), OUT / "MANIFEST.json"]:
            old.unlink(missing_ok=True)
    OUT.mkdir(exist_ok=True)
    n = max(1, math.ceil(sum(sizes.values()) / limit)) if sizes else 0
    archives: list[dict] = []
    while n:
        bins = balance(sizes, n)
        t0 = time.perf_counter()
        print(f"packing {n} archive(s), xz preset 9e ...", flush=True)
        with concurrent.futures.ProcessPoolExecutor(min(jobs, n)) as ex:
            archives = list(ex.map(partial(write_archive, TREE), [OUT / f"part{k + 1}.tar.xz" for k in range(n)], bins))
        print(f"pack: {time.perf_counter() - t0:.1f} s", flush=True)
        if all(a["size"] <= limit for a in archives) or n >= len(sizes):
            break
        print(f"  an archive is over the limit ({[mib(a['size']) for a in archives]}); trying {n + 1}")
        for a in archives:
            (OUT / a["file"]).unlink()
        n += 1
    for k, u in enumerate(solo, start=n + 1):
        a = write_archive(TREE, OUT / f"part{k}.tar.xz", list(u))
        a["pieces"] = split_pieces(OUT / a["file"], limit)
        print(f"  {a['file']}: {mib(a['size'])} in {len(a['pieces'])} pieces", flush=True)
        archives.append(a)
    manifest = {
        "what": w.ws.what,
        "compression": "tar (pax, sorted, mtime 0) + xz preset 9|PRESET_EXTREME",
        "limit_bytes": limit,
        "static_libs_dropped": drop_static,
        "wheels": [facts[k] for k in sorted(facts)],
        "archives": archives,
    }
    for a in archives:
        a["wheels"] = sorted(f["file"] for f in facts.values() if set(f["top_level"]) & set(a["entries"]))
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return check(w, limit)


# ------------------------------------------------------------------------------------------ check
def check(w: Where, limit: int) -> int:
    OUT = w.out
    mpath = OUT / "MANIFEST.json"
    if not mpath.exists():
        print(f"no {mpath.relative_to(ROOT)}")
        return 1
    manifest = json.loads(mpath.read_text())
    bad = 0
    print(f"\n{'archive':<16} {'size':>12} {'tar':>12} {'entries':>8}  status")
    total = 0
    for a in manifest["archives"]:
        p = OUT / a["file"]
        status = "ok"
        if a.get("pieces"):  # carried in pieces: each within the limit, together the archive
            whole, size = hashlib.sha256(), 0
            for piece in a["pieces"]:
                pp, pstatus = OUT / piece["file"], "ok"
                if not pp.exists():
                    pstatus = "MISSING"
                else:
                    data = pp.read_bytes()
                    whole.update(data)
                    size += len(data)
                    if len(data) != piece["size"] or hashlib.sha256(data).hexdigest() != piece["sha256"]:
                        pstatus = "CHANGED (size/sha256 differ from MANIFEST)"
                    elif len(data) > limit:
                        pstatus = f"OVER {limit / MIB:.0f} MiB"
                bad += pstatus != "ok"
                print(f"{piece['file']:<16} {mib(piece['size'])} {'':>12} {'':>8}  {pstatus}")
            if size != a["size"] or whole.hexdigest() != a["sha256"]:
                status = "CHANGED (its pieces do not make the archive of MANIFEST)"
            bad += status != "ok"
            total += size
            print(f"{'  = ' + a['file']:<16} {mib(size)} {mib(a['tar_size'])} {len(a['entries']):>8}  {status} "
                  f"({len(a['pieces'])} pieces)")
            continue
        if not p.exists():
            status, size = "MISSING", 0
        else:
            size = p.stat().st_size
            if size != a["size"] or sha256_file(p) != a["sha256"]:
                status = "CHANGED (size/sha256 differ from MANIFEST)"
            elif size > limit:
                status = f"OVER {limit / MIB:.0f} MiB"
        bad += status != "ok"
        total += size
        print(f"{a['file']:<16} {mib(size)} {mib(a['tar_size'])} {len(a['entries']):>8}  {status}")
    print(f"{'total':<16} {mib(total)}   ({len(manifest['wheels'])} wheels, limit {limit / MIB:.0f} MiB per archive)")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="sglang-0.5.17", choices=sorted(SETS),
                    help="which wheel set (default sglang-0.5.17, into .sglwheels/; vllm-0.24.0 into .vllmwheels/)")
    ap.add_argument("--check", action="store_true", help="only check the set's archives against MANIFEST.json")
    ap.add_argument("--limit-mib", type=float, default=None, help="largest archive (default: the set's, 50)")
    ap.add_argument("--drop-static-libs", action="store_true",
                    help="leave out link-time-only files (the set's static_drop, e.g. xgrammar's libxgrammar.a)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compression processes")
    args = ap.parse_args()
    w = Where(SETS[args.set])
    limit = int((args.limit_mib if args.limit_mib is not None else w.ws.limit_mib) * MIB)
    if args.check:
        return check(w, limit)
    t0 = time.perf_counter()
    files = download(w)
    facts = unpack(w, files, args.drop_static_libs)
    rc = pack(w, facts, limit, max(1, args.jobs), args.drop_static_libs)
    print(f"\ndone in {time.perf_counter() - t0:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
