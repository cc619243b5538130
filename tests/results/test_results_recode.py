"""Re-encoded records (toolkit.results.records, `toolkit results recode`): the codec round-trips times at the
microsecond; a re-encoded run verifies and reads as before, within the rounding RECODED.json states, and says
it was re-encoded; an edited re-encoding, or one not recorded, fails verify."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.synthetic import make_records, write_run
from toolkit.checksums import write_sums
from toolkit.errors import ToolkitError
from toolkit.results.archive import open_archive
from toolkit.results.recode import recode
from toolkit.results.records import (COMPACT, RECODED, decode_one, encode, encode_one, load_recoded, plain_lines,
                                     read_records)
from toolkit.results.verify import errors, verify_run


def _recs(micro: bool, arm: str = "eagle3", domain: str = "code", seed: int = 5):
    """Records at the microsecond (as the load generator writes them since 2026-12-06), or with the float
    digits below it that older records carry."""
    recs = make_records(np.random.default_rng(seed), arm=arm, domain=domain, concurrency=8, repeat=0, n=30,
                        output_len=16, ttft_ms=40.0, itl_ms=4.3, chunk_every=2, accept=2.5)
    if micro:
        return recs
    rng = np.random.default_rng(seed + 1)
    out = []
    for r in recs:
        jit = rng.uniform(-4.9e-4, 4.9e-4, len(r.chunk_ms) + 2)
        chunks = [t + j for t, j in zip(r.chunk_ms, jit)]
        out.append(r.model_copy(update={"send_s": r.send_s + jit[-1] * 1e-3, "ttft_ms": chunks[0],
                                        "e2e_ms": r.e2e_ms + jit[-2], "chunk_ms": chunks}))
    return out


def _run(root: Path, micro: bool) -> Path:
    from tests.synthetic import manifest_for, summarize
    from toolkit.results.archive import ArchiveWriter

    w = ArchiveWriter.create(root, "rec", manifest_for({"baseline": ["python", "-m", "sglang.launch_server"]}))
    for i, domain in enumerate(("chat", "code")):
        recs = _recs(micro, arm="baseline", domain=domain, seed=i)
        w.write_cell(summarize(recs, output_len=16, workload_hash="c" * 64, sampling={}), recs)
    w.finalize("complete", derived={}, report_md="# x\n", compact=False)
    return w.path


def test_the_codec_round_trips_microsecond_times_exactly_and_rounds_finer_ones(tmp_path: Path) -> None:
    exact = _recs(micro=True)
    path = tmp_path / f"c{COMPACT}"
    path.write_bytes(encode(exact))
    assert read_records(path) == exact and plain_lines(read_records(path)) == plain_lines(exact)
    fine = _recs(micro=False)
    back = [decode_one(encode_one(r)) for r in fine]
    assert back != fine  # 15 significant digits do not survive: that is why recode records it
    for a, b in zip(fine, back):
        assert abs(a.ttft_ms - b.ttft_ms) <= 0.0005 and abs(a.send_s - b.send_s) <= 5e-7
        assert max(abs(x - y) for x, y in zip(a.chunk_ms, b.chunk_ms)) <= 0.0005 + 1e-9
        assert (a.output_tokens, a.chunk_tokens, a.accept_length) == (b.output_tokens, b.chunk_tokens, b.accept_length)
    assert "chunk_dus" in encode_one(fine[0]) and "chunk_ms" not in encode_one(fine[0])


def test_a_records_file_without_the_codec_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"c{COMPACT}"
    path.write_bytes(lzma.compress(b'{"arm": "x"}\n'))
    with pytest.raises(ToolkitError, match="header"):
        read_records(path)
    path.write_bytes(encode(_recs(True))[:-20])
    with pytest.raises(ToolkitError, match="truncated"):
        read_records(path)


@pytest.fixture
def recoded(tmp_path: Path) -> tuple[Path, Path]:
    """The same finished run twice: as written (full float digits), and re-encoded."""
    import shutil

    run = _run(tmp_path / "a", micro=False)
    other = tmp_path / "b" / run.relative_to(tmp_path / "a")
    shutil.copytree(run, other)
    sums = dict(reversed(ln.split("  ", 1)) for ln in (run / "SHA256SUMS").read_text().splitlines())
    done = recode(other)
    assert done and recode(other) == []  # a second pass finds nothing to do
    rec = load_recoded(other)
    for rel in done:
        f = rec.files[rel.replace(".jsonl.gz", COMPACT)]
        assert f.source == rel and f.source_sha256 == sums[rel] and not f.exact and not (other / rel).exists()
    return run, other


def test_a_recoded_run_verifies_says_so_and_reads_within_its_rounding(recoded) -> None:
    a, b = recoded
    problems = verify_run(b)
    assert errors(problems) == [] and [p.file for p in problems] == [RECODED]
    assert "rounded to 0.001 ms" in problems[0].message
    arch_a, arch_b = open_archive(a), open_archive(b)
    for key in arch_a.cell_map:
        ra, rb = list(arch_a.iter_records(key)), list(arch_b.iter_records(key))
        assert len(ra) == len(rb) and all(abs(x.e2e_ms - y.e2e_ms) <= 0.0005 for x, y in zip(ra, rb))
    for args in (["show"], ["show", "--json"]):  # what show reads (columns, summaries) is the run's own
        out_a = run_cli("results", *args, a.name, "--root", ".", cwd=a.parents[1])
        out_b = run_cli("results", *args, b.name, "--root", ".", cwd=b.parents[1])
        assert out_a.returncode == out_b.returncode == 0 and out_a.stdout == out_b.stdout, out_b.stderr
        assert "re-encoded" not in out_a.stderr and "note: run" in out_b.stderr and "re-encoded" in out_b.stderr
    r = run_cli("results", "verify", str(b))
    assert r.returncode == 0 and "re-encoded" in r.stdout


def _edit_first_record(path: Path, field: str, delta: int) -> None:
    """Move `field` of the first measured (not warmup) record by delta."""
    lines = lzma.decompress(path.read_bytes()).decode().splitlines()
    i = next(i for i, ln in enumerate(lines[1:], 1) if not json.loads(ln).get("warmup"))
    d = json.loads(lines[i])
    d[field] += delta
    lines[i] = json.dumps(d)
    path.write_bytes(lzma.compress(("\n".join(lines) + "\n").encode()))


def test_an_edited_recoded_file_fails_verify_even_with_its_sums_rewritten(recoded) -> None:
    _, b = recoded
    rx = sorted((b / "cells").glob(f"*{COMPACT}"))[0]
    _edit_first_record(rx, "e2e_us", 5)  # 5 us: beyond the rounding of 1 us
    assert any(p.file == f"cells/{rx.name}" for p in errors(verify_run(b)))
    write_sums(b)
    bad = errors(verify_run(b))
    assert bad and all("within their rounding" in p.message for p in bad), bad


def test_a_recoding_that_is_not_recorded_is_never_read_as_the_original(recoded) -> None:
    _, b = recoded
    (b / RECODED).unlink()
    write_sums(b)  # RECODED.json removed and the sums rewritten: the records are checked as the run's own
    bad = errors(verify_run(b))
    assert bad and any("not what the records give" in p.message for p in bad)


def test_both_forms_of_one_cell_is_a_problem(recoded) -> None:
    a, b = recoded
    src = sorted((a / "cells").glob("*.jsonl.gz"))[0]
    (b / "cells" / src.name).write_bytes(src.read_bytes())
    write_sums(b)
    assert any(p.file == f"cells/{src.name}" and "beside its re-encoding" in p.message for p in errors(verify_run(b)))


def test_an_exact_recoding_keeps_the_chain_to_the_runs_sums(tmp_path: Path) -> None:
    run = _run(tmp_path, micro=True)
    assert recode(run)
    rec = load_recoded(run)
    assert all(f.exact for f in rec.files.values()) and verify_run(run) == []  # nothing lost: no warning
    rx = sorted((run / "cells").glob(f"*{COMPACT}"))[0]
    _edit_first_record(rx, "input_tokens", 1)
    write_sums(run)
    assert any("original lines" in p.message for p in errors(verify_run(run)))


def test_a_run_that_does_not_verify_is_not_recoded(tmp_path: Path) -> None:
    run = write_run(tmp_path, seed=1, n=20)
    gz = sorted((run / "cells").glob("*.jsonl.gz"))[0]
    gz.write_bytes(gzip.compress(gzip.decompress(gz.read_bytes()).replace(b'"chat"', b'"code"', 1), mtime=0))
    with pytest.raises(ToolkitError, match="does not verify"):
        recode(run)
    assert gz.exists() and not (run / RECODED).exists()
    r = run_cli("results", "recode", str(run))
    assert r.returncode == 1 and "refused" in r.stderr


def test_a_recoded_run_travels_as_a_tarball(recoded, tmp_path: Path) -> None:
    from toolkit.results.bundle import import_tarball, pack

    _, b = recoded
    tarball = pack(b, tmp_path / "packs")
    dest = import_tarball(tarball, tmp_path / "imported")
    assert sorted(p.name for p in (dest / "cells").glob(f"*{COMPACT}")) == sorted(
        p.name for p in (b / "cells").glob(f"*{COMPACT}"))
    assert errors(verify_run(dest)) == [] and load_recoded(dest) == load_recoded(b)
