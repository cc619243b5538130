"""A finished run's per-request columns (cells/<key>.npz) and archived inputs (inputs/files/<path>) stored
gzipped as NAME.gz (toolkit.results.compact), at finalize and by `results compact`: the readers get the very
arrays and bytes the run wrote (show, verify, reproduce's layout, --training-data's reload), SHA256SUMS.orig
keeps the run's own digests and verify checks the stored bytes against them, so an edited .npz.gz fails even
with SHA256SUMS rewritten; a run resume may still complete, or one never finalized, stays plain."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_cli
from tests.helpers import USER_PROMPTS, quickstart_with_user_workload
from tests.synthetic import make_records, summarize
from toolkit.checksums import NAME as SUMS, ORIG, write_sums
from toolkit.errors import ToolkitError
from toolkit.results.compact import compact
from toolkit.schema.columns import COLUMNS, columns_from_records, save_columns
from toolkit.results.verify import errors, verify_run

PROMPTS = USER_PROMPTS
SAMPLE = ROOT / "benchmarks" / "pair_gpu" / "draft-sample.jsonl"
CELLS = [("baseline", "coding"), ("ngram", "mine")]


def _run(tmp: Path, *, compact_at_finalize: bool = True, interrupted: bool | None = None,
         finalize: bool = True) -> tuple[Path, dict]:
    """A matrix run as the runner writes it: its inputs archived at create (archive_run: the Matrix spec, its
    Environment, the user's workload data/mine.jsonl), two cells, then finalize. (run, {key: records})."""
    from toolkit.bench.inputs import archive_run
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.specs import load_spec

    plan = plan_run(load_spec(quickstart_with_user_workload(tmp)))
    w = archive_run(tmp / "results", plan, run_manifest(plan, {}))
    rng = np.random.default_rng(11)
    records = {}
    sampling = {"api": "chat", "temperature": 0.0, "output_len": 32, "seed": 0, "warmup": 2}
    for arm, domain in CELLS:
        recs = make_records(rng, arm=arm, domain=domain, concurrency=1, repeat=0, n=60,
                            accept=3.0 if arm == "ngram" else None)
        records[w.write_cell(summarize(recs, output_len=32, workload_hash="w" * 64, sampling=sampling), recs)] = recs
    if finalize:
        w.finalize("partial" if interrupted else "complete", derived={}, report_md="# run\n", interrupted=interrupted,
                   compact=compact_at_finalize)
    return w.path, records


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, dict]:
    """(a run finalized plain as toolkit versions before wrote it, the same run compacted by `results compact`,
    its records by cell key)."""
    tmp = tmp_path_factory.mktemp("npz")
    plain, records = _run(tmp, compact_at_finalize=False)
    other = tmp / "compacted" / plain.relative_to(tmp)
    shutil.copytree(plain, other)
    done = compact(other)
    assert {f"cells/{k}.npz" for k in records} | {"inputs/files/data/mine.jsonl"} <= set(done), done
    assert compact(other) == []  # a second pass finds nothing to do
    return plain, other, records


def _sums(folder: Path, name: str = SUMS) -> dict[str, str]:
    return {rel: d for d, rel in (ln.split("  ", 1) for ln in (folder / name).read_text().splitlines())}


def test_a_run_finalized_now_stores_its_columns_and_inputs_gzipped(tmp_path: Path) -> None:
    from toolkit.bench.inputs import check_inputs, materialize
    from toolkit.results.archive import open_archive

    run, records = _run(tmp_path)
    for key, recs in records.items():
        gz = run / "cells" / f"{key}.npz.gz"
        assert gz.is_file() and not (run / "cells" / f"{key}.npz").exists()
        assert gzip.decompress(gz.read_bytes()) == save_columns(columns_from_records(recs))  # np.savez's bytes
    inp = run / "inputs" / "files" / "data" / "mine.jsonl.gz"
    assert inp.is_file() and not inp.with_suffix("").exists() and gzip.decompress(inp.read_bytes()) == PROMPTS.encode()
    orig = _sums(run, ORIG)
    assert orig["inputs/files/data/mine.jsonl"] == hashlib.sha256(PROMPTS.encode()).hexdigest()
    assert {f"cells/{k}.npz" for k in records} <= set(orig)
    assert verify_run(run) == []
    a = open_archive(run)
    for key, recs in records.items():
        want = columns_from_records(recs)
        got = a.columns(key)
        assert set(got) == set(COLUMNS) and all(np.array_equal(got[c], want[c], equal_nan=True) for c in COLUMNS)
    assert check_inputs(a) == []
    materialize(a, tmp_path / "tree")
    assert (tmp_path / "tree" / "data" / "mine.jsonl").read_bytes() == PROMPTS.encode()


def test_compact_restores_a_plain_run_losslessly(runs) -> None:
    """`results compact` of a run written plain: the original digests kept (the run's own SHA256SUMS lines),
    every reader's output the same, the arrays the same."""
    from toolkit.results.archive import open_archive, stored_columns

    plain, other, records = runs
    before, orig = _sums(plain), _sums(other, ORIG)
    for rel in [f"cells/{k}.npz" for k in records] + ["inputs/files/data/mine.jsonl"]:
        assert orig[rel] == before[rel] and (other / (rel + ".gz")).is_file() and not (other / rel).exists()
    assert verify_run(plain) == [] and verify_run(other) == []
    for key in records:
        a, b = stored_columns(plain / "cells" / f"{key}.npz"), stored_columns(other / "cells" / f"{key}.npz")
        assert list(a) == list(b) and all(np.array_equal(a[c], b[c], equal_nan=True) for c in a)
        pa, pb = open_archive(plain).columns(key), open_archive(other).columns(key)
        assert all(np.array_equal(pa[c], pb[c], equal_nan=True) for c in COLUMNS)
    for args in (["show", "--json"], ["show"]):
        ra = run_cli("results", *args, plain.name, "--root", ".", cwd=plain.parents[1])
        rb = run_cli("results", *args, other.name, "--root", ".", cwd=other.parents[1])
        assert ra.returncode == rb.returncode == 0 and ra.stdout == rb.stdout, (args, ra.stderr, rb.stderr)
    if shutil.which("sha256sum"):
        import subprocess

        assert subprocess.run(["sha256sum", "-c", "--quiet", SUMS], cwd=other).returncode == 0


def _edit_columns(npz_gz: Path, factor: float) -> None:
    with np.load(io.BytesIO(gzip.decompress(npz_gz.read_bytes())), allow_pickle=False) as z:
        cols = {c: z[c] for c in z.files}
    cols["e2e_ms"] = cols["e2e_ms"] * np.float32(factor)
    buf = io.BytesIO()
    np.savez(buf, **cols)
    npz_gz.write_bytes(gzip.compress(buf.getvalue(), compresslevel=9, mtime=0))


def _copy_compacted(runs, tmp_path: Path) -> tuple[Path, str, Path]:
    """A copy of the compacted run to damage, one of its cells' keys and that cell's stored columns."""
    _, compacted, records = runs
    run = tmp_path / "quickstart" / compacted.name
    shutil.copytree(compacted, run)
    key = next(iter(records))
    return run, key, run / "cells" / f"{key}.npz.gz"


def test_an_edited_npz_gz_fails_verify_even_with_its_sums_rewritten(runs, tmp_path: Path) -> None:
    run, key, gz = _copy_compacted(runs, tmp_path)
    _edit_columns(gz, 2.0)
    assert any(p.file == f"cells/{key}.npz.gz" and SUMS in p.message for p in errors(verify_run(run)))
    write_sums(run)  # the edit hidden from SHA256SUMS: the run's own digest in SHA256SUMS.orig still names it
    found = errors(verify_run(run))
    assert any(p.file == f"cells/{key}.npz.gz" and f"differs from the original sha256 in {ORIG}" in p.message
               for p in found), found
    assert any(p.file == f"cells/{key}.npz" and "column e2e_ms" in p.message for p in found), found
    shown = run_cli("results", "show", run.name, "--root", ".", cwd=tmp_path)
    assert shown.returncode == 2 and "does not verify" in shown.stderr and "Traceback" not in shown.stderr

    orig = (run / ORIG).read_text()  # the chain rewritten too: the records still disagree with the columns
    want = hashlib.sha256(gzip.decompress(gz.read_bytes())).hexdigest()
    (run / ORIG).write_text(re.sub(rf"^\w+  cells/{re.escape(key)}\.npz$", f"{want}  cells/{key}.npz", orig,
                                   flags=re.M))
    write_sums(run)
    found = errors(verify_run(run))
    assert {p.file for p in found} <= {f"cells/{key}.npz", f"cells/{key}.json"}, found  # no checksum problem left
    assert any(p.file == f"cells/{key}.npz" and "column e2e_ms" in p.message and "disagree" in p.message
               for p in found), found


def test_a_truncated_npz_gz_is_named_not_a_traceback(runs, tmp_path: Path) -> None:
    from toolkit.results.archive import stored_columns

    run, key, gz = _copy_compacted(runs, tmp_path)
    gz.write_bytes(gz.read_bytes()[:-40])
    write_sums(run)
    found = errors(verify_run(run))
    assert any(p.file == f"cells/{key}.npz.gz" and "not a valid gzip" in p.message for p in found), found
    assert any(p.file == f"cells/{key}.npz" and "cannot decompress the request columns" in p.message
               for p in found), found
    with pytest.raises(ToolkitError, match="cannot decompress the request columns"):
        stored_columns(run / "cells" / f"{key}.npz")


def test_a_run_resume_may_still_complete_keeps_its_columns_and_inputs_plain(tmp_path: Path) -> None:
    """Interrupted (finalize(interrupted=True)): resume appends to it, so it stays plain and `results compact`
    refuses it; killed before finalize (no SHA256SUMS): refused too."""
    run, records = _run(tmp_path / "a", interrupted=True)
    key = next(iter(records))
    assert (run / "cells" / f"{key}.npz").is_file() and (run / "inputs" / "files" / "data" / "mine.jsonl").is_file()
    with pytest.raises(ToolkitError, match="interrupted"):
        compact(run)
    killed, records = _run(tmp_path / "b", finalize=False)
    with pytest.raises(ToolkitError, match=f"no {SUMS}"):
        compact(killed)
    for r in (run, killed):
        assert not list(r.rglob("*.npz.gz")) and not list((r / "inputs").rglob("*.gz"))
    r = run_cli("results", "compact", str(run))
    assert r.returncode == 1 and "interrupted" in r.stderr and not list(run.rglob("*.npz.gz"))


def test_training_data_reloads_a_workload_from_gzipped_inputs(runs) -> None:
    """`show --training-data` reloads the run's own workload files from its archived inputs: read through
    compact.read_bytes, so a compacted run's workload (inputs/files/data/mine.jsonl.gz) reloads as before."""
    from toolkit.results.archive import open_archive
    from toolkit.results.represent import from_training

    plain, other, _ = runs
    got = {}
    for run in (plain, other):
        reps, notes = from_training(open_archive(run), SAMPLE)
        got[run] = ({r["workload"]: r["divergence"] for r in reps}, notes)
    assert "mine" in got[other][0] and got[plain] == got[other], got
