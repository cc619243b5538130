"""Run status and exit codes (README "Exit codes"): the status a run's cells give, how archives written
before `interrupted` existed read, what resume accepts, and the one mapping from a command to its exit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer

from tests.conftest import run_cli
from tests.synthetic import make_records, manifest_for, summarize
from toolkit.errors import ToolFailure, ToolkitError
from toolkit.exits import BAD_INPUT, FAILED, INTERRUPTED, OK, run_command, run_exit
from toolkit.results.archive import ArchiveWriter, open_archive
from toolkit.schema.keys import run_status

ARMS = {"baseline": ["python", "-m", "sglang.launch_server"]}


@pytest.mark.parametrize("ok, failed, missing, interrupted, status", [
    (4, 0, 0, False, "complete"),
    (3, 1, 0, False, "partial"),   # a failed cell: not complete
    (3, 0, 1, False, "partial"),   # a cell never archived (a slot thread died): not complete either
    (0, 4, 0, False, "failed"),    # no cell succeeded
    (0, 0, 4, False, "failed"),
    (1, 0, 3, True, "partial"),    # interrupted: partial whatever it holds, --resume completes it
    (0, 1, 3, True, "partial"),
])
def test_run_status_from_cells(ok, failed, missing, interrupted, status) -> None:
    assert run_status(ok, failed, missing, interrupted) == status


@pytest.mark.parametrize("status, interrupted, allow, strict, code", [
    ("complete", False, False, False, OK),
    ("complete", False, False, True, FAILED),      # --strict with methodology errors
    ("partial", False, False, False, FAILED),      # failed cells without --allow-failed-cells
    ("partial", False, True, False, OK),
    ("failed", False, True, False, FAILED),        # no successful cell: --allow-failed-cells does not cover it
    ("partial", True, True, False, INTERRUPTED),
])
def test_exit_of_a_run(status, interrupted, allow, strict, code) -> None:
    assert run_exit(status, interrupted, allow_failed_cells=allow, strict_errors=strict) == code


def test_one_mapping_for_every_entry_point(capsys) -> None:
    """`toolkit` and `python -m toolkit.gpu` both exit through run_command: Ctrl-C is 130 in each."""
    app = typer.Typer()

    @app.command()
    def go(what: str) -> None:
        raise {"ctrl-c": KeyboardInterrupt(), "bad": ToolkitError("bad input", hint="fix it"),
               "tool": ToolFailure("the engine died"), "ok": typer.Exit(0)}[what]

    assert run_command(app, ["ctrl-c"], "t") == INTERRUPTED
    assert run_command(app, ["bad"], "t") == BAD_INPUT
    assert run_command(app, ["tool"], "t") == FAILED
    assert run_command(app, ["ok"], "t") == OK
    assert run_command(app, ["--nope"], "t") == BAD_INPUT  # a usage error
    assert "Traceback" not in capsys.readouterr().err
    import toolkit.cli
    import toolkit.gpu.__main__

    for mod in (toolkit.cli, toolkit.gpu.__main__):
        assert "run_command" in mod.main.__code__.co_names, mod  # neither keeps a copy of the mapping
    r = run_cli("gpu", "validate", "--no-such-option")
    assert r.returncode == BAD_INPUT and "Traceback" not in r.stderr


def _run(tmp_path, cells: list[tuple[int, bool]], status: str, raw_summary: dict | None = None):
    """A run with one cell per (concurrency, ok); finalized with `status` as an older writer did (no
    `interrupted` field), or with `raw_summary` keys replaced."""
    rng = np.random.default_rng(0)
    w = ArchiveWriter.create(tmp_path, "m", manifest_for(ARMS))
    for c, ok in cells:
        recs = make_records(rng, arm="baseline", domain="chat", concurrency=c, repeat=0, n=8, output_len=16,
                            ttft_ms=40.0, itl_ms=4.0)
        s = summarize(recs, output_len=16, workload_hash="w" * 64, sampling={"api": "chat"})
        if not ok:
            s = s.model_copy(update={"status": "failed", "reason": "server died: exited with code 1"})
        w.write_cell(s, recs)
    w.finalize(status, derived={"cells_planned": len(cells)}, compact=False)  # an older toolkit's plain form
    summary = json.loads((w.path / "summary.json").read_text())
    summary.pop("interrupted", None)
    summary.update(raw_summary or {})
    (w.path / "summary.json").write_text(json.dumps(summary))  # as an older toolkit wrote it
    from toolkit.checksums import write_sums

    write_sums(w.path)  # ... and checksummed: an intact old archive, which the readers' verify gate lets through
    return w.path


def test_old_archives_read_sensibly(tmp_path) -> None:
    # before issue 23 a run whose every cell failed said `complete`: it reads as failed now
    a = open_archive(_run(tmp_path / "a", [(1, False), (2, False)], "complete"))
    assert a.status == "failed" and not a.interrupted and a.why.startswith("no cell succeeded")
    b = open_archive(_run(tmp_path / "b", [(1, True), (2, False)], "complete"))
    assert b.status == "partial" and not b.interrupted and b.why == "1 of 2 cells failed"
    c = open_archive(_run(tmp_path / "c", [(1, True), (2, True)], "complete"))
    assert c.status == "complete" and c.why == ""
    # `partial` meant interrupted: still resumable
    d = _run(tmp_path / "d", [(1, True)], "partial", {"derived": {"cells_planned": 2}})
    assert open_archive(d).interrupted and "interrupted" in open_archive(d).why
    ArchiveWriter.resume(d)
    # `results list` and `results show --json` say the same
    rows = {r["run_id"]: r for r in json.loads(run_cli("results", "list", "--root", str(tmp_path / "a"),
                                                       "--json").stdout)}
    assert [r["status"] for r in rows.values()] == ["failed"]
    shown = json.loads(run_cli("results", "show", str(b.path), "--json").stdout)
    assert shown["facts"]["status"] == "partial" and shown["facts"]["why"] == "1 of 2 cells failed"


def test_resume_refuses_a_run_that_was_not_interrupted(tmp_path) -> None:
    """Every planned cell of a partial (failed cells) run is archived: resume would run nothing."""
    path = _run(tmp_path, [(1, True), (2, False)], "partial", {"interrupted": False})
    with pytest.raises(ToolkitError, match="was not interrupted") as exc:
        ArchiveWriter.resume(path)
    assert "start a new run" in exc.value.hint


def test_verify_says_a_failed_run_failed(tmp_path) -> None:
    rng = np.random.default_rng(0)
    w = ArchiveWriter.create(tmp_path, "m", manifest_for(ARMS))
    recs = make_records(rng, arm="baseline", domain="chat", concurrency=1, repeat=0, n=4, output_len=16,
                        ttft_ms=40.0, itl_ms=4.0)
    s = summarize(recs, output_len=16, workload_hash="w" * 64, sampling={"api": "chat"})
    w.write_cell(s.model_copy(update={"status": "failed", "reason": "connection refused"}), recs)
    w.finalize("failed", derived={"cells_planned": 1}, interrupted=False)
    r = run_cli("results", "verify", str(w.path))
    assert r.returncode == 0  # the archive is intact ...
    assert "run failed (no cell succeeded: 1 of 1 cells failed)" in r.stdout  # ... and says the run failed
    doc = json.loads(run_cli("results", "verify", str(w.path), "--json").stdout)[0]
    assert doc["ok"] and doc["status"] == "failed" and doc["why"].startswith("no cell succeeded")
