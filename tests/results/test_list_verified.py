"""`results list` shows the verified state (issue 43): it used to read summary.json only, so a run with a tampered
file or one killed before finalize listed as complete. Each run's SHA256SUMS is checked (toolkit.results.verify
verify_sums): a file that does not match makes the status `UNVERIFIED (tampered: FILE)`; a run never finalized
lists as interrupted."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.synthetic import manifest_for, write_run
from toolkit.results.archive import ArchiveWriter
from toolkit.results.facts import list_runs
from toolkit.schema.keys import cell_key

ONE = {"n": 12, "domains": ("chat",), "concurrency": (1,)}


def test_list_names_a_tampered_file_and_an_interrupted_run(tmp_path: Path, cli) -> None:
    good = write_run(tmp_path, seed=1, **ONE)
    bad = write_run(tmp_path, seed=2, **ONE)
    rec = bad / "cells" / f"{cell_key('eagle3', 'chat', 1)}.jsonl.gz"
    lines = gzip.decompress(rec.read_bytes()).decode().splitlines()
    first = json.loads(lines[-1])
    first["ttft_ms"] *= 10  # the tamper: one record's figure moved, summary.json untouched
    rec.write_bytes(gzip.compress(("\n".join([*lines[:-1], json.dumps(first)]) + "\n").encode()))
    killed = ArchiveWriter.create(tmp_path, "killed", manifest_for({"baseline": ["python"]})).path  # never finalized
    rows = {r["run_id"]: r for r in list_runs(tmp_path)}
    assert rows[good.name]["unverified"] == [] and rows[killed.name]["unverified"] == []
    assert rows[bad.name]["status"] == "complete"  # what summary.json says ...
    assert rows[bad.name]["unverified"][0].startswith(f"cells/{rec.name}: sha256 differs")  # ... and what it is
    out = cli("results", "list", "--root", str(tmp_path))
    assert out.returncode == 0
    line = {ln.split()[0].split("/")[-1]: ln for ln in out.stdout.splitlines() if "/" in ln.split(" ")[0]}
    assert f"UNVERIFIED (tampered: cells/{rec.name}) complete" in line[bad.name]
    assert "UNVERIFIED" not in line[good.name] and " complete " in line[good.name]
    assert "incomplete (interrupted)" in line[killed.name]
    rows = {r["run_id"]: r for r in json.loads(cli("results", "list", "--root", str(tmp_path), "--json").stdout)}
    assert rows[bad.name]["unverified"] and not rows[good.name]["unverified"]


def test_the_committed_runs_list_verified_and_the_check_is_cheap() -> None:
    start = time.perf_counter()
    rows = list_runs(ROOT / "results")
    took = time.perf_counter() - start
    assert rows and all(r.get("unverified") == [] for r in rows), [r["run_id"] for r in rows if r.get("unverified")]
    assert took < 10, f"results list took {took:.1f} s"  # ~0.7 s of hashing measured on a loaded 2-core box
