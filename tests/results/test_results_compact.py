"""Compacted archives (toolkit.results.compact): large text files stored as NAME.gz read exactly as before,
SHA256SUMS lists the stored bytes (sha256sum -c still works) and an edited .gz fails verify, even with its
sums rewritten (SHA256SUMS.orig keeps the original digests)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.synthetic import write_run
from toolkit.checksums import write_sums
from toolkit.errors import ToolkitError
from toolkit.results.compact import compact
from toolkit.results.verify import errors, verify_folder


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """The same finished run twice: as written, and compacted."""
    run = write_run(tmp_path / "a", seed=3, n=40)
    (run / "logs" / "eagle3.log").write_text("".join(f"[2026-12-06] decode batch {i}, #token: {i}\n" for i in range(2000)))
    write_sums(run)  # the log written before finalize, as the runner does
    other = tmp_path / "b" / run.relative_to(tmp_path / "a")
    shutil.copytree(run, other)
    assert compact(other) and not compact(other)  # a second pass finds nothing to do
    return run, other


def test_a_compacted_archive_reads_and_verifies_as_before(pair) -> None:
    a, b = pair
    assert (b / "summary.json.gz").is_file() and (b / "logs" / "eagle3.log.gz").is_file()
    assert not (b / "summary.json").exists() and (b / "manifest.json").is_file()
    assert gzip.decompress((b / "logs" / "eagle3.log.gz").read_bytes()) == (a / "logs" / "eagle3.log").read_bytes()
    assert verify_folder(b) == []
    for args in (["show"], ["show", "--json"], ["slo", "--slo", "ttft_ms.p90=500"]):
        ra = run_cli("results", *args, a.name, "--root", ".", cwd=a.parents[1])  # the same relative paths
        rb = run_cli("results", *args, b.name, "--root", ".", cwd=b.parents[1])
        assert ra.returncode == rb.returncode == 0 and ra.stdout == rb.stdout, (args, ra.stderr, rb.stderr)
    if shutil.which("sha256sum"):
        assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=b).returncode == 0


def test_an_edited_gz_fails_verify_even_with_its_sums_rewritten(pair) -> None:
    _, b = pair
    gz = b / "logs" / "eagle3.log.gz"
    gz.write_bytes(gzip.compress(gzip.decompress(gz.read_bytes()).replace(b"#token: 7", b"#token: 9"), mtime=0))
    assert any(p.file == "logs/eagle3.log.gz" for p in errors(verify_folder(b)))
    write_sums(b)  # the edit hidden from SHA256SUMS: the original digest still names it
    assert [(p.file, "original sha256" in p.message) for p in errors(verify_folder(b))] == [("logs/eagle3.log.gz", True)]
    gz.write_bytes(gz.read_bytes()[:-9])  # truncated
    write_sums(b)
    assert "not a valid gzip" in errors(verify_folder(b))[0].message


def test_a_folder_that_does_not_verify_is_not_compacted(tmp_path: Path) -> None:
    run = write_run(tmp_path, seed=4, n=20)
    (run / "summary.json").write_text((run / "summary.json").read_text().replace('"complete"', '"partial"'))
    with pytest.raises(ToolkitError, match="does not verify"):
        compact(run)
    assert (run / "summary.json").is_file() and not (run / "summary.json.gz").exists()


def test_an_interrupted_run_is_not_compacted(tmp_path: Path) -> None:
    import json

    run = write_run(tmp_path, seed=5, n=20, status="partial")
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "interrupted": True}))
    write_sums(run)  # as finalize(interrupted=True) leaves it: resume may still complete it
    with pytest.raises(ToolkitError, match="interrupted"):
        compact(run)


def test_a_run_tarball_packs_the_same_bytes_verifies_and_imports(pair, tmp_path: Path) -> None:
    """`results pack`: one .tar.gz per run, the same bytes each time; `results verify` reads it as it is and
    names an edited member; `results import --format toolkit` unpacks it under --root once it verifies."""
    import tarfile

    from toolkit.results.bundle import pack

    _, b = pair
    r = run_cli("results", "pack", str(b), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    tgz = tmp_path / "out" / f"{b.name}.tar.gz"
    assert pack(b, tmp_path / "again").read_bytes() == tgz.read_bytes()  # deterministic
    with tarfile.open(tgz) as tar:
        assert all(n == f"{b.parent.name}/{b.name}" or n.startswith(f"{b.parent.name}/{b.name}/") for n in tar.getnames())
    v = run_cli("results", "verify", str(tgz))
    assert v.returncode == 0 and f"ok   {tgz}:{b.parent.name}/{b.name}" in v.stdout, v.stdout + v.stderr
    i = run_cli("results", "import", str(tgz), "--format", "toolkit", "--root", str(tmp_path / "res"))
    assert i.returncode == 0, i.stderr
    dest = tmp_path / "res" / b.parent.name / b.name
    assert verify_folder(dest) == [] and (dest / "summary.json.gz").is_file()
    again = run_cli("results", "import", str(tgz), "--format", "toolkit", "--root", str(tmp_path / "res"))
    assert again.returncode == 2 and "never overwritten" in again.stderr

    edited = tmp_path / "edited"  # one member edited, SHA256SUMS left: verify of the tarball names it
    shutil.copytree(b, edited / b.parent.name / b.name)
    report = edited / b.parent.name / b.name / "report.md"
    report.write_text(report.read_text() + "edited\n")
    bad = pack(edited / b.parent.name / b.name, tmp_path / "bad")
    v = run_cli("results", "verify", str(bad))
    assert v.returncode == 1 and "report.md" in v.stdout
    i = run_cli("results", "import", str(bad), "--format", "toolkit", "--root", str(tmp_path / "res2"))
    assert i.returncode == 2 and "does not verify" in i.stderr and not (tmp_path / "res2").exists()
