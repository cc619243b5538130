"""Build the SGLang 0.5.17 wheel set for the offline H200 into a few self-contained archives.

Usage (here, any Python >= 3.11 with pip; PyPI through the configured index):

    .venv/bin/python benchmarks/sglang_h200/wheels.py            # download (cached), strip, unpack, pack, check
    .venv/bin/python benchmarks/sglang_h200/wheels.py --check    # re-check .sglwheels/ against MANIFEST.json

  - wheels go to .cache/sglang-0.5.17-wheels/ (kept between runs; only missing ones are downloaded),
    the unpacked tree to .cache/sglang-0.5.17-wheels/tree/ (rebuilt every run),
  - archives to .sglwheels/partK.tar.xz + .sglwheels/MANIFEST.json (git-ignored), each <= 50 MiB;
    the run exits 1 when an archive is over the limit. Reruns give byte-identical archives.
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
from pathlib import Path

# --------------------------------------------------------------------------------------------- data
# (distribution, version): exactly one wheel each, cp312 / manylinux x86_64 or pure.
WHEELS: list[tuple[str, str]] = [
    ("annotated_types", "0.8.0"),
    ("apache_tvm_ffi", "0.1.11"),
    ("asttokens", "3.0.2"),
    ("cffi", "2.1.1"),
    ("compressed_tensors", "0.20.1"),
    ("dill", "0.4.1"),
    ("distro", "1.9.0"),
    ("executing", "2.3.0"),
    ("fastapi", "0.165.0"),
    ("flashinfer_python", "0.6.15.post1"),
    ("gguf", "0.19.0"),
    ("ipython", "9.18.1"),
    ("ipython_pygments_lexers", "1.1.1"),
    ("jedi", "0.20.1"),
    ("jiter", "0.19.0"),
    ("jsonschema", "4.26.0"),
    ("jsonschema_specifications", "2025.9.1"),
    ("loguru", "0.7.3"),
    ("matplotlib_inline", "0.2.2"),
    ("msgspec", "0.23.0"),
    ("openai", "2.6.1"),
    ("opentelemetry_api", "1.45.2"),
    ("orjson", "3.13.0"),
    ("parso", "0.8.7"),
    ("partial_json_parser", "0.2.1.1.post7"),
    ("pexpect", "4.9.0"),
    ("prompt_toolkit", "3.0.53"),
    ("ptyprocess", "0.7.0"),
    ("pure_eval", "0.2.4"),
    ("pybase64", "1.5.1"),
    ("pycparser", "3.12"),
    ("pydantic", "2.14.4"),
    ("pydantic_core", "2.50.5"),
    ("python_multipart", "0.0.34"),
    ("pyzmq", "27.3.0"),
    ("referencing", "0.37.0"),
    ("rpds_py", "2026.9.1"),
    ("setproctitle", "1.3.8"),
    ("sgl_deep_gemm", "0.1.5.post1"),
    ("sglang", "0.5.17"),
    ("sglang_kernel", "0.4.5"),
    ("sniffio", "1.3.1"),
    ("soundfile", "0.13.1"),
    ("stack_data", "0.6.3"),
    ("starlette", "1.10.0"),
    ("tokenizers", "0.22.2"),
    ("torch_c_dlpack_ext", "0.1.5"),
    ("torch_memory_saver", "0.0.10"),
    ("traitlets", "5.16.1"),
    ("transformers", "5.12.1"),
    ("typing_extensions", "4.16.0"),  # pydantic 2.14 needs a newer one than the machine's
    ("typing_inspection", "0.4.5"),
    ("uvicorn", "0.55.0"),
    ("wcwidth", "0.9.4"),
    ("xgrammar", "0.2.1"),
    ("zstandard", "0.25.0"),
]

# Files left out of the tree, per distribution (fnmatch patterns on the wheel's paths). Every pattern
# must match something, so a new release with other names fails here instead of carrying 1 GiB.
# sgl_kernel/__init__.py calls load_utils._load_architecture_specific_ops(), which on compute
# capability 90 loads sgl_kernel/sm90/common_ops.* (sm100/ is for every other GPU); flash_ops (FA3),
# flashmla_ops and infllm_ops are loaded only when their backends are used.
DROP: dict[str, list[str]] = {
    "sglang_kernel": [
        "sgl_kernel/flash_ops.*",  # FA3, ~1.05 GiB unpacked
        "sgl_kernel/flashmla_ops.*",  # FlashMLA
        "sgl_kernel/infllm_ops.*",  # InfLLM-V2
        "sgl_kernel/sm100/*",  # common_ops for non-SM90 GPUs
    ],
}
# Files that must survive the strip (what an SM90 GPU loads).
KEEP: dict[str, list[str]] = {
    "sglang_kernel": ["sgl_kernel/__init__.py", "sgl_kernel/load_utils.py", "sgl_kernel/sm90/common_ops.*"],
}
# Dropped only with --drop-static-libs: link-time-only files (no Python code opens them); xgrammar's
# static C++ library is 62 MiB unpacked, ~26 MiB xz. Not needed to fit in 2 archives (see MANIFEST).
STATIC_DROP: dict[str, list[str]] = {
    "xgrammar": ["xgrammar/lib/libxgrammar.a"],
}

PLATFORMS = ["manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "any"]
PRESET = 9 | lzma.PRESET_EXTREME
LIMIT_MIB = 50

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "sglang-0.5.17-wheels"
TREE = CACHE / "tree"
OUT = ROOT / ".sglwheels"
ESTIMATES = CACHE / "estimates.json"
MIB = 1 << 20


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


def wheel_file(name: str, version: str) -> Path | None:
    """The cached wheel of name==version (error if several tags are cached)."""
    hits = []
    for p in CACHE.glob("*.whl"):
        parts = p.name[:-4].split("-")
        if len(parts) >= 5 and norm(parts[0]) == norm(name) and parts[1].lower() == version.lower():
            hits.append(p)
    if len(hits) > 1:
        sys.exit(f"several cached wheels for {name}=={version}: {[h.name for h in hits]}; remove the extra ones")
    return hits[0] if hits else None


def download() -> dict[str, Path]:
    CACHE.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={v}" for n, v in WHEELS if wheel_file(n, v) is None]
    if missing:
        print(f"downloading {len(missing)} wheel(s) into {CACHE.relative_to(ROOT)}/ ...", flush=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
               *[a for p in PLATFORMS for a in ("--platform", p)],
               "--progress-bar", "off", "-d", str(CACHE), *missing]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        print(f"download: {time.perf_counter() - t0:.1f} s", flush=True)
    files = {}
    for n, v in WHEELS:
        p = wheel_file(n, v)
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
def unpack(files: dict[str, Path], drop_static: bool) -> dict:
    """Unpack every wheel into TREE; return per-wheel facts for the manifest."""
    if TREE.exists():
        shutil.rmtree(TREE)
    TREE.mkdir(parents=True)
    owner: dict[str, str] = {}  # tree path -> wheel that wrote it
    facts = {}
    for name, ver in sorted(WHEELS, key=lambda nv: norm(nv[0])):
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
            rewrite_record(whl, moved)
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
                for p in sorted(p for p in kept_paths if not p.endswith(".py")):
                    print(f"    kept    {mib((TREE / p).stat().st_size)}  {p}")
        elif dropped:
            print(f"{whl.name}: not installed by --target: {', '.join(d['path'] for d in dropped)}")
    return facts


def rewrite_record(whl: Path, moved: dict[str, str | None]) -> None:
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
def add_entry(tar: tarfile.TarFile, top: str) -> None:
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


def tar_bytes(entries: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in sorted(entries):
            add_entry(tar, e)
    return buf.getvalue()


def estimate_one(entry: str) -> tuple[str, str, int]:
    raw = tar_bytes([entry])
    digest = hashlib.sha256(raw).hexdigest()
    return entry, digest, len(raw)


def compress_len(raw: bytes) -> int:
    return len(lzma.compress(raw, format=lzma.FORMAT_XZ, preset=PRESET))


def estimate(entries: list[str], jobs: int) -> dict[str, int]:
    """xz size of each top-level entry alone (cached by content)."""
    cache = json.loads(ESTIMATES.read_text()) if ESTIMATES.exists() else {}
    sizes, todo = {}, []
    for e in entries:
        _, digest, _ = estimate_one(e)
        if digest in cache:
            sizes[e] = cache[digest]
        else:
            todo.append((e, digest))
    if todo:
        t0 = time.perf_counter()
        print(f"estimating xz size of {len(todo)} top-level entries ({jobs} processes) ...", flush=True)
        with concurrent.futures.ProcessPoolExecutor(jobs) as ex:
            futs = {ex.submit(_estimate_worker, e): (e, d) for e, d in todo}
            for fut in concurrent.futures.as_completed(futs):
                e, d = futs[fut]
                sizes[e] = cache[d] = fut.result()
        ESTIMATES.write_text(json.dumps(cache, indent=0, sort_keys=True))
        print(f"estimate: {time.perf_counter() - t0:.1f} s", flush=True)
    return sizes


def _estimate_worker(entry: str) -> int:
    return compress_len(tar_bytes([entry]))


def write_archive(path: Path, entries: list[str]) -> dict:
    raw = tar_bytes(entries)
    with open(path, "wb") as f:
        f.write(lzma.compress(raw, format=lzma.FORMAT_XZ, preset=PRESET))
    return {"file": path.name, "entries": sorted(entries), "size": path.stat().st_size,
            "sha256": sha256_file(path), "tar_size": len(raw)}


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


def pack(facts: dict, limit: int, jobs: int, drop_static: bool) -> int:
    entries = sorted(p.name for p in TREE.iterdir())
    esize = estimate(entries, jobs)
    sizes = {u: sum(esize[e] for e in u) for u in units(facts)}
    if sorted(e for u in sizes for e in u) != entries:
        sys.exit("top-level entries and wheels disagree")
    total_est = sum(sizes.values())
    print(f"{len(entries)} top-level entries in {len(sizes)} units (a wheel's entries stay together), "
          f"{mib(total_est)} xz if compressed one by one")
    big = max(sizes, key=sizes.get)
    if sizes[big] > limit:
        sys.exit(f"{big} alone is {mib(sizes[big])} xz, over the {mib(limit)} limit")
    if OUT.exists():
        for old in [*OUT.glob("part*.tar.xz"), OUT / "MANIFEST.json"]:
            old.unlink(missing_ok=True)
    OUT.mkdir(exist_ok=True)
    n = max(1, math.ceil(total_est / limit))
    while True:
        bins = balance(sizes, n)
        t0 = time.perf_counter()
        print(f"packing {n} archive(s), xz preset 9e ...", flush=True)
        with concurrent.futures.ProcessPoolExecutor(min(jobs, n)) as ex:
            archives = list(ex.map(write_archive, [OUT / f"part{k + 1}.tar.xz" for k in range(n)], bins))
        print(f"pack: {time.perf_counter() - t0:.1f} s", flush=True)
        if all(a["size"] <= limit for a in archives) or n >= len(sizes):
            break
        print(f"  an archive is over the limit ({[mib(a['size']) for a in archives]}); trying {n + 1}")
        for a in archives:
            (OUT / a["file"]).unlink()
        n += 1
    manifest = {
        "what": "SGLang 0.5.17 site tree for Python 3.12 / x86_64 (unpack every part into one folder)",
        "compression": "tar (pax, sorted, mtime 0) + xz preset 9|PRESET_EXTREME",
        "limit_bytes": limit,
        "static_libs_dropped": drop_static,
        "wheels": [facts[k] for k in sorted(facts)],
        "archives": archives,
    }
    for a in archives:
        a["wheels"] = sorted(f["file"] for f in facts.values() if set(f["top_level"]) & set(a["entries"]))
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return check(limit)


# ------------------------------------------------------------------------------------------ check
def check(limit: int) -> int:
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
    ap.add_argument("--check", action="store_true", help="only check .sglwheels/ against MANIFEST.json")
    ap.add_argument("--limit-mib", type=float, default=LIMIT_MIB, help="largest archive (default 50)")
    ap.add_argument("--drop-static-libs", action="store_true",
                    help=f"leave out link-time-only files ({', '.join(p for v in STATIC_DROP.values() for p in v)})")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compression processes")
    args = ap.parse_args()
    limit = int(args.limit_mib * MIB)
    if args.check:
        return check(limit)
    t0 = time.perf_counter()
    files = download()
    facts = unpack(files, args.drop_static_libs)
    rc = pack(facts, limit, max(1, args.jobs), args.drop_static_libs)
    print(f"\ndone in {time.perf_counter() - t0:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
