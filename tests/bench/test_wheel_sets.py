"""benchmarks/sglang_h200/wheels.py's set tables and strip logic, offline (no download: fake wheels)."""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import json
import re
import sys
import tarfile
import zipfile
from dataclasses import asdict, replace
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[2] / "benchmarks" / "sglang_h200"
sys.path.insert(0, str(HERE))
wheels = importlib.import_module("wheels")
wheelsets = importlib.import_module("wheelsets")
unpack_py = importlib.import_module("unpack")

# sha256 of the SGLang set's table (json, sorted keys) as it built .sglwheels/ before the sets existed:
# the table is the whole input of a build besides the cached wheels, so the same digest means the same
# archives. Change it only together with the SGLang pins (and say so in docs/lab/h200.md).
SGLANG_TABLE_SHA256 = "deccd21880f46432786a34587787f15b3095b7cac095b87c5eacdf220cf0111a"


def table_digest(ws) -> str:
    return hashlib.sha256(json.dumps(asdict(ws), sort_keys=True).encode()).hexdigest()


def test_sglang_set_is_the_one_docs_cite():
    ws = wheelsets.SETS["sglang-0.5.17"]
    assert (ws.out, ws.cache, ws.limit_mib) == (".sglwheels", ".cache/sglang-0.5.17-wheels", 50)
    assert len(ws.wheels) == 56 and ("sglang", "0.5.17") in ws.wheels
    assert ws.what == "SGLang 0.5.17 site tree for Python 3.12 / x86_64 (unpack every part into one folder)"
    assert table_digest(ws) == SGLANG_TABLE_SHA256


def test_default_set_is_sglang(monkeypatch):
    seen = {}
    monkeypatch.setattr(wheels, "check", lambda w, limit: seen.update(w=w, limit=limit) or 0)
    monkeypatch.setattr(sys, "argv", ["wheels.py", "--check"])
    assert wheels.main() == 0
    assert seen["w"].ws.name == "sglang-0.5.17" and seen["limit"] == 50 * wheels.MIB
    monkeypatch.setattr(sys, "argv", ["wheels.py", "--set", "vllm-0.24.0", "--check"])
    wheels.main()
    assert seen["w"].out.name == ".vllmwheels" and seen["limit"] == 36 * wheels.MIB


def norm(n: str) -> str:
    return re.sub(r"[-_.]+", "_", n).lower()


def test_vllm_set_carries_no_torch_and_no_cuda_runtime():
    ws = wheelsets.SETS["vllm-0.24.0"]
    names = [norm(n) for n, _ in ws.wheels]
    assert len(names) == len(set(names)), "one wheel per distribution"
    # torch 2.11.0+cu130's own requirements are on the GPU machine; carrying them would shadow them
    on_machine = {"torch", "triton", "sympy", "networkx", "jinja2", "fsspec", "filelock", "setuptools",
                  "cuda_bindings", "cuda_toolkit", "nvidia_cublas", "nvidia_cudnn_cu13", "nvidia_nccl_cu13",
                  "nvidia_cusparselt_cu13", "nvidia_nvshmem_cu13", "nvidia_cuda_runtime", "nvidia_cuda_nvrtc"}
    assert not on_machine & set(names)
    assert not set(ws.notes) & set(names), "a distribution declared not carried is in the pins"
    assert dict(ws.wheels)["vllm"] == "0.24.0"
    for key in [*ws.drop, *ws.keep]:
        assert key in names, f"strip rule for {key}, which the set does not carry"
    assert all(reason.strip() for reason in ws.notes.values())


# ----------------------------------------------------------------------------- strip, pack, unpack
def fake_wheel(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    rows = [[p, "sha256=x", str(len(b))] for p, b in files.items()] + [[f"{dist}/RECORD", "", ""]]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    with zipfile.ZipFile(path, "w") as z:
        for p, b in files.items():
            z.writestr(p, b)
        z.writestr(f"{dist}/METADATA", f"Name: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}/RECORD", buf.getvalue())
    return path


@pytest.fixture
def fake_set(tmp_path):
    cache = tmp_path / ".cache" / "w"
    cache.mkdir(parents=True)
    files = {
        "eng": fake_wheel(cache, "eng", "1.0", {
            "eng/__init__.py": b"X = 1\n",
            "eng/_fa2.so": b"\x7fELF" + bytes(range(256)) * 40,
            "eng/_fa3.so": b"\x7fELF" + bytes(range(255, -1, -1)) * 40,
            "eng/sm100/big.h": b"//" * 3000,
            "eng-1.0.data/scripts/eng": b"#!/bin/sh\n",
        }),
        "dep": fake_wheel(cache, "dep", "2.0", {"dep/__init__.py": b"Y = 2\n"}),
    }
    ws = replace(wheelsets.SETS["vllm-0.24.0"], name="fake", wheels=[("eng", "1.0"), ("dep", "2.0")],
                 drop={"eng": ["eng/_fa2.so", "eng/sm100/*"]}, keep={"eng": ["eng/_fa3.so"]},
                 static_drop={}, cache=".cache/w", out=".fakewheels", limit_mib=1)
    return wheels.Where(ws, root=tmp_path), {k: v for k, v in files.items()}


def test_drops_are_applied_and_record_rewritten(fake_set):
    w, files = fake_set
    facts = wheels.unpack(w, files, drop_static=False)
    assert (w.tree / "eng" / "_fa3.so").exists() and (w.tree / "dep" / "__init__.py").exists()
    assert not (w.tree / "eng" / "_fa2.so").exists() and not (w.tree / "eng" / "sm100").exists()
    record = (w.tree / "eng-1.0.dist-info" / "RECORD").read_text()
    assert "_fa2.so" not in record and "sm100" not in record and "eng/_fa3.so" in record
    assert [d["path"] for d in facts["eng"]["dropped"]] == ["eng-1.0.data/scripts/eng", "eng/_fa2.so",
                                                            "eng/sm100/big.h"]


def test_a_drop_matching_nothing_or_a_lost_keep_stops_the_build(fake_set):
    w, files = fake_set
    stale = wheels.Where(replace(w.ws, drop={"eng": ["eng/_fa2_renamed.so"]}), root=w.root)
    with pytest.raises(SystemExit, match="matched nothing"):
        wheels.unpack(stale, files, drop_static=False)
    lost = wheels.Where(replace(w.ws, drop={"eng": ["eng/_fa*.so"]}), root=w.root)
    with pytest.raises(SystemExit, match="nothing kept matches"):
        wheels.unpack(lost, files, drop_static=False)


def test_pack_is_byte_reproducible_and_unpacks(fake_set, tmp_path):
    w, files = fake_set
    digests = []
    for _ in range(2):
        facts = wheels.unpack(w, files, drop_static=False)
        assert wheels.pack(w, facts, limit=1 << 20, jobs=1, drop_static=False) == 0
        digests.append([a["sha256"] for a in json.loads((w.out / "MANIFEST.json").read_text())["archives"]])
    assert digests[0] == digests[1]
    manifest = json.loads((w.out / "MANIFEST.json").read_text())
    assert manifest["what"] == w.ws.what
    dest = tmp_path / "site"
    for a in manifest["archives"]:
        assert unpack_py.verify(w.out / a["file"]) == "sha256 ok"
        unpack_py.extract(w.out / a["file"], dest)
    assert (dest / "eng" / "_fa3.so").read_bytes() == (w.tree / "eng" / "_fa3.so").read_bytes()
    assert not (dest / "eng" / "_fa2.so").exists()
    with tarfile.open(w.out / manifest["archives"][0]["file"]) as tar:
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_a_unit_over_the_limit_travels_in_pieces(fake_set, tmp_path, monkeypatch):
    """A wheel whose xz alone is over the limit (vLLM's: its _C library is already-compressed fatbins) is an
    archive of its own cut into pieces within the limit; --check checks each piece and the whole; unpack.py
    joins them from a folder holding only the pieces and the manifest, and refuses a changed or missing one."""
    import os
    import shutil

    w, files = fake_set
    noise = os.urandom(40_000)  # incompressible: the eng unit's xz is over the 24 KiB limit below
    files["eng"] = fake_wheel(w.cache, "eng", "1.0", {"eng/__init__.py": b"X = 1\n", "eng/_fa3.so": noise,
                                                      "eng/_fa2.so": b"x", "eng/sm100/big.h": b"y"})
    limit = 24 << 10
    facts = wheels.unpack(w, files, drop_static=False)
    monkeypatch.setattr(wheels, "estimate", lambda w, entries, jobs: {e: len(wheels.tar_bytes(w.tree, [e])) // 2
                                                                      if e.startswith("dep") else 50_000
                                                                      for e in entries})
    assert wheels.pack(w, facts, limit=limit, jobs=1, drop_static=False) == 0
    manifest = json.loads((w.out / "MANIFEST.json").read_text())
    plain, cut = manifest["archives"]
    assert "pieces" not in plain and "eng" in cut["entries"] and "dep" not in cut["entries"]
    assert len(cut["pieces"]) == 2 and all(p["size"] <= limit for p in cut["pieces"])
    assert not (w.out / cut["file"]).exists()  # only carry-sized files are left
    assert sorted(p.name for p in w.out.iterdir()) == sorted(["MANIFEST.json", plain["file"],
                                                             *(p["file"] for p in cut["pieces"])])
    # on the machine: the pieces arrive one call each into one folder, beside the manifest
    there = tmp_path / "there"
    there.mkdir()
    for p in ["MANIFEST.json", *(p["file"] for p in cut["pieces"])]:
        shutil.copy(w.out / p, there / p)
    archive = there / cut["file"]
    assert unpack_py.verify(archive) == "sha256 ok (2 pieces)"
    dest = tmp_path / "site"
    unpack_py.extract(archive, dest)
    assert (dest / "eng" / "_fa3.so").read_bytes() == noise
    (there / cut["pieces"][1]["file"]).write_bytes(b"changed")
    with pytest.raises(SystemExit, match="differs from MANIFEST.json"):
        unpack_py.verify(archive)
    (there / cut["pieces"][1]["file"]).unlink()
    with pytest.raises(SystemExit, match="missing"):
        unpack_py.verify(archive)
    # --check here sees a changed piece too
    (w.out / cut["pieces"][0]["file"]).write_bytes(b"changed")
    assert wheels.check(w, limit) == 1
