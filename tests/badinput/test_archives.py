"""Issue 43, archives: what does not verify is not read. A record multiplied by 10 with SHA256SUMS rewritten
failed `verify`, yet `show` printed the run and `diff` compared it, exit 0. The one loader of show, diff,
report and slo (toolkit.results.verify.open_verified) makes every check `verify` makes, records included,
and refuses (exit 2, the archive and its first problem) unless --force, which says UNVERIFIED in every output.
A --root that is not there is said so (it was "no runs found"); a diff with no cell in common is exit 2 (it
was "no significant regression", exit 0)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.conftest import run_cli
from tests.synthetic import write_run
from toolkit.checksums import write_sums
from toolkit.schema.keys import cell_key


def _times_ten(run: Path, key: str) -> None:
    """Every measured record of one cell 10x slower, SHA256SUMS written again: what checksums cannot catch."""
    gz = run / "cells" / f"{key}.jsonl.gz"
    recs = [json.loads(ln) for ln in gzip.decompress(gz.read_bytes()).splitlines()]
    recs = [r if r.get("warmup") else {**r, "e2e_ms": r["e2e_ms"] * 10} for r in recs]
    gz.write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in recs)))
    write_sums(run)


def test_an_archive_that_does_not_verify_is_refused_by_every_reader_unless_forced(tmp_path: Path) -> None:
    good = write_run(tmp_path / "a", seed=3, n=12, domains=("chat",), concurrency=(1,))
    bad = write_run(tmp_path / "b", seed=4, n=12, domains=("chat",), concurrency=(1,))
    key = cell_key("eagle3", "chat", 1)
    _times_ten(bad, key)
    for args in (["show", str(bad)], ["diff", str(good), str(bad), "--fail-on-regression", "5"]):
        r = run_cli("results", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.returncode, r.stderr)
        assert f"run {bad.name} does not verify: cells/{key}" in r.stderr and "--force" in r.stderr, r.stderr
    # --force reads it, and every output says so: the text, the JSON, the written report
    r = run_cli("results", "show", str(bad), "--force")
    assert r.returncode == 0 and r.stdout.startswith(f"UNVERIFIED: run {bad}") and "WARNING" in r.stderr
    r = run_cli("results", "diff", str(good), str(bad), "--force", "--json")
    assert r.returncode == 0 and list(json.loads(r.stdout)["unverified"]) == [str(bad)], r.stderr
    r = run_cli("results", "report", str(bad), "--force", "--no-html", "-o", str(tmp_path / "rep"))
    assert r.returncode == 0 and "UNVERIFIED: run" in (tmp_path / "rep" / "report.md").read_text()


def test_a_missing_root_is_said_so(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for args in (["list"], ["show", "latest"]):
        r = run_cli("results", *args, "--root", str(missing))
        assert r.returncode == 2 and f"error: {missing}: no such folder" in r.stderr, (args, r.stderr)
        assert "no runs found" not in r.stdout


def test_a_diff_with_no_cell_in_common_is_bad_input(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", seed=5, n=12, domains=("chat",), concurrency=(1,))
    b = write_run(tmp_path / "b", seed=6, n=12, domains=("code",), concurrency=(1,))
    r = run_cli("results", "diff", str(a), str(b), "--fail-on-regression", "5")
    assert r.returncode == 2 and "have no cell in common" in r.stderr, (r.returncode, r.stderr)
    assert "no significant regression" not in r.stderr and "A has baseline chat" in r.stderr
