"""Archive: write once, read back, resume, refuse rewrites, scrub secrets, verify names damage."""

from __future__ import annotations

from tests.helpers import archive_bytes

import gzip
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from toolkit.errors import ToolkitError
from toolkit.results.archive import SCHEMA_VERSION, ArchiveWriter, cell_key, open_archive
from toolkit.results.facts import list_runs
from toolkit.results.verify import verify_run
from toolkit.results.records import load_recoded, plain_lines, read_records, records_path
from tests.synthetic import make_records, manifest_for, summarize, write_run

ARMS = {"baseline": ["python", "-m", "sglang.launch_server"]}


def _cell(rng, arm="baseline", domain="chat", c=1, n=30):
    recs = make_records(rng, arm=arm, domain=domain, concurrency=c, repeat=0, n=n)
    return summarize(recs, output_len=32, workload_hash="w" * 64, sampling={"temperature": 0.0}), recs


def test_roundtrip_records_columns_and_checksums(tmp_path):
    rng = np.random.default_rng(0)
    w = ArchiveWriter.create(tmp_path, "m", manifest_for(ARMS))
    summary, recs = _cell(rng)
    key = w.write_cell(summary, recs)
    assert key == cell_key("baseline", "chat", 1, 0) and w.done_cells() == {key}
    w.write_file("logs/baseline.log", "server started\n")
    w.finalize("complete", derived={"speedups": []}, report_md="# r\n")

    a = open_archive(w.path)
    assert a.status == "complete" and a.manifest.schema_version == SCHEMA_VERSION
    assert list(a.iter_records(key)) == recs  # warmup included, flagged
    cols = a.columns(key)
    measured = [r for r in recs if not r.warmup]
    assert len(cols["ttft_ms"]) == len(measured) == 30
    assert np.allclose(cols["e2e_ms"], [r.e2e_ms for r in measured], rtol=1e-6)
    sums = (w.path / "SHA256SUMS").read_text()
    for rel in ("manifest.json", "summary.json", "report.md", "logs/baseline.log", f"cells/{key}.rec.xz",
                f"cells/{key}.npz", f"cells/{key}.json"):
        assert f"  {rel}\n" in sums or f"  {rel}.gz\n" in sums  # compacted at finalize: the stored bytes
    assert "  summary.json.gz\n" in sums and verify_run(w.path) == []
    # records at the microsecond are written in the records codec at finalize, exactly (RECODED.json says so)
    assert not (w.path / f"cells/{key}.jsonl.gz").exists()
    assert [f.exact for f in load_recoded(w.path).files.values()] == [True]


def test_concurrent_creates_never_collide(tmp_path):
    paths, lock = [], threading.Lock()

    def make():
        p = ArchiveWriter.create(tmp_path, "m", {}).path
        with lock:
            paths.append(p)

    threads = [threading.Thread(target=make) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 16


def test_cells_written_once_resume_partial_and_complete_is_final(tmp_path):
    rng = np.random.default_rng(1)
    w = ArchiveWriter.create(tmp_path, "m", manifest_for(ARMS))
    s1, r1 = _cell(rng, c=1)
    w.write_cell(s1, r1)
    with pytest.raises(ToolkitError, match="already"):
        w.write_cell(s1, r1)
    w.finalize("partial", derived={})
    before = (w.path / f"cells/{cell_key('baseline', 'chat', 1)}.jsonl.gz").read_bytes()

    r = ArchiveWriter.resume(w.path)
    assert r.done_cells() == {cell_key("baseline", "chat", 1)}
    s2, r2 = _cell(rng, c=8)
    r.write_cell(s2, r2)
    r.finalize("complete", derived={})
    a = open_archive(w.path)
    assert a.status == "complete" and len(a.summary.cells) == 2
    key1 = cell_key("baseline", "chat", 1)  # resume kept its records; finalize stored them in the codec, exactly
    assert plain_lines(read_records(records_path(w.path / "cells", key1))) == gzip.decompress(before)
    assert verify_run(w.path) == []

    with pytest.raises(ToolkitError, match="complete"):
        ArchiveWriter.resume(w.path)
    with pytest.raises(ToolkitError, match="complete"):
        r.write_file("logs/x.log", "late")
    with pytest.raises(ToolkitError):
        r.finalize("complete")


def test_write_file_stays_inside_and_off_reserved_names(tmp_path):
    w = ArchiveWriter.create(tmp_path, "m", {})
    for bad in ("../escape.txt", "/etc/x", "summary.json", "cells/x.json"):
        with pytest.raises(ToolkitError):
            w.write_file(bad, "x")


def test_secrets_never_land_in_the_archive(tmp_path):
    secret = "hf_" + "Q" * 30
    manifest = manifest_for({"baseline": ["python", "-m", "sglang.launch_server", "--api-key", "s3cr3t-value",
                                          "--port", "30000"]})
    manifest["environment"]["resolved"]["env"] = {"HF_TOKEN": secret, "CUDA_VISIBLE_DEVICES": "0"}
    manifest["notes"] = f"launched with HF_TOKEN={secret} and password=hunter2"
    w = ArchiveWriter.create(tmp_path, "m", manifest)
    w.write_file("logs/baseline.log", "ServerArgs(model_path='m', api_key='s3cr3t-value', port=30000)\n")
    summary, recs = _cell(np.random.default_rng(0))
    w.write_cell(summary.model_copy(update={"status": "failed", "reason": "server died",
                                            "log_tail": f"env HF_TOKEN={secret}\nTraceback ..."}), recs)
    w.finalize("complete", derived={"cmd": "curl -H 'Authorization: Bearer abc.def' ..."})
    blob = archive_bytes(w.path)
    for s in (secret, "s3cr3t-value", "hunter2", "abc.def"):
        assert s.encode() not in blob
    assert b"model_path='m'" in blob and b"server died" in blob  # the rest is kept
    m = open_archive(w.path).manifest
    assert m.arms["baseline"].command[4] == "***" and m.arms["baseline"].command[6] == "30000"
    assert m.environment.resolved["env"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_newer_schema_is_refused_with_a_clear_message(tmp_path, cli):
    run = write_run(tmp_path, seed=0, n=12, domains=("chat",), concurrency=(1,))
    m = json.loads((run / "manifest.json").read_text())
    m["schema_version"] = SCHEMA_VERSION + 1
    (run / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ToolkitError, match="newer than this toolkit reads"):
        open_archive(run)
    res = cli("results", "show", str(run))
    assert res.returncode == 2 and "newer than this toolkit reads" in res.stderr and "Traceback" not in res.stderr


def test_verify_names_a_truncated_request_file_and_an_edited_summary(tmp_path, cli):
    good = write_run(tmp_path, seed=1, n=30, domains=("chat",), concurrency=(1, 8))
    bad = write_run(tmp_path, seed=2, n=30, domains=("chat",), concurrency=(1, 8))
    key = cell_key("eagle3", "chat", 8)
    gz = bad / "cells" / f"{key}.jsonl.gz"
    gz.write_bytes(gz.read_bytes()[: len(gz.read_bytes()) // 2])
    summary = json.loads((bad / "summary.json").read_text())
    summary["cells"][0]["metrics"]["ttft_ms"]["p50"] = 1.0  # a flattering edit
    (bad / "summary.json").write_text(json.dumps(summary, indent=2))

    problems = {(p.file, p.message.split(" ")[0]) for p in verify_run(bad)}
    files = {f for f, _ in problems}
    assert f"cells/{key}.jsonl.gz" in files and "summary.json" in files
    assert any("cannot be decompressed" in p.message for p in verify_run(bad))
    assert any("differs from cells/" in p.message for p in verify_run(bad))  # caught even without checksums

    res = cli("results", "verify", "--root", str(tmp_path))
    assert res.returncode == 1
    assert f"FAIL {bad}" in res.stdout and f"ok   {good}" in res.stdout
    assert f"cells/{key}.jsonl.gz: " in res.stdout and "summary.json: sha256 differs" in res.stdout
    res = cli("results", "verify", str(good))
    assert res.returncode == 0


def test_a_corrupt_archive_is_named_and_the_others_still_list_and_diff(tmp_path, cli):
    a = write_run(tmp_path, seed=3, n=20, domains=("chat",), concurrency=(1,))
    b = write_run(tmp_path, seed=4, n=20, domains=("chat",), concurrency=(1,))
    broken = write_run(tmp_path, seed=5, n=20, domains=("chat",), concurrency=(1,))
    (broken / "manifest.json").write_text('{"format": "toolkit-run-arch')
    rows = {r["run_id"]: r for r in list_runs(tmp_path)}
    assert rows[broken.name]["status"] == "corrupt" and "manifest.json" in rows[broken.name]["error"]
    assert rows[a.name]["status"] == rows[b.name]["status"] == "complete"
    res = cli("results", "list", "--root", str(tmp_path))
    assert res.returncode == 0 and "CORRUPT" in res.stdout and a.name in res.stdout
    res = cli("results", "diff", str(a), str(b))
    assert res.returncode == 0 and "ttft_ms" in res.stdout


def test_records_file_is_gzip_json_lines(tmp_path):
    run = write_run(tmp_path, seed=6, n=10, domains=("chat",), concurrency=(1,))
    with gzip.open(run / "cells" / f"{cell_key('baseline', 'chat', 1)}.jsonl.gz", "rt") as f:
        first = json.loads(f.readline())
    assert first["warmup"] is True and first["arm"] == "baseline" and isinstance(first["chunk_ms"], list)


def test_unknown_run_reference_is_a_clear_error(tmp_path, cli):
    res = cli("results", "show", "nope", "--root", str(tmp_path))
    assert res.returncode == 2 and "no run 'nope'" in res.stderr
    assert Path(tmp_path).exists()


def test_list_and_show_json(tmp_path, cli):
    run = write_run(tmp_path, seed=7, n=12, domains=("chat",), concurrency=(1,))
    rows = json.loads(cli("results", "list", "--root", str(tmp_path), "--json").stdout)
    assert [(r["run_id"], r["status"], r["arms"], r["gpu"]) for r in rows] == [
        (run.name, "complete", ["baseline", "eagle3"], "8x NVIDIA RTX PRO 6000 Blackwell")]
    doc = json.loads(cli("results", "show", run.name, "--root", str(tmp_path), "--json").stdout)
    assert doc["facts"]["cells"] == 2 and set(doc["cells"]) == {cell_key("baseline", "chat", 1),
                                                                 cell_key("eagle3", "chat", 1)}


def test_a_cell_interrupted_before_its_summary_is_written_again_on_resume(tmp_path):
    rng = np.random.default_rng(8)
    w = ArchiveWriter.create(tmp_path, "m", manifest_for(ARMS))
    summary, recs = _cell(rng, c=4)
    key = cell_key("baseline", "chat", 4)
    (w.path / "cells" / f"{key}.jsonl.gz").write_bytes(b"\x1f\x8b half a file")  # killed mid-cell
    (w.path / "cells" / f".{key}.json.x1y2.tmp").write_text("{")  # and mid-rename
    assert any("left-over temporary file" in p.message for p in verify_run(w.path))
    r = ArchiveWriter.resume(w.path)  # removes the temp file
    assert r.done_cells() == set()
    r.write_cell(summary, recs)
    r.finalize("complete", derived={})
    assert verify_run(w.path) == [] and len(list(open_archive(w.path).iter_records(key))) == len(recs)


def _rewrite_records(run: Path, key: str, edit) -> None:
    """An edit of one cell's records, then SHA256SUMS written again over it: what checksums cannot catch."""
    from toolkit.checksums import write_sums

    gz = run / "cells" / f"{key}.jsonl.gz"
    recs = [json.loads(ln) for ln in gzip.decompress(gz.read_bytes()).splitlines()]
    gz.write_bytes(gzip.compress(b"".join(json.dumps(edit(r)).encode() + b"\n" for r in recs)))
    write_sums(run)


def _faster(r: dict) -> dict:
    return r if r.get("warmup") else {**r, "e2e_ms": r["e2e_ms"] / 2}


def test_verify_catches_a_records_edit_with_rewritten_checksums(tmp_path, cli):
    from toolkit.checksums import write_sums
    from toolkit.schema.columns import columns_from_records, save_columns
    from toolkit.schema.records import RequestRecord

    run = write_run(tmp_path, seed=11, n=30, domains=("chat",), concurrency=(1,))
    key = cell_key("eagle3", "chat", 1)
    _rewrite_records(run, key, _faster)
    problems = verify_run(run)
    assert not [p for p in problems if "SHA256SUMS" in p.message]  # the checksums were forged
    assert any(p.file == f"cells/{key}.npz" and "column e2e_ms" in p.message for p in problems), problems
    # columns forged too: the summary's medians are not the columns' any more
    recs = [RequestRecord.model_validate_json(ln) for ln in gzip.decompress(
        (run / "cells" / f"{key}.jsonl.gz").read_bytes()).splitlines()]
    (run / "cells" / f"{key}.npz").write_bytes(save_columns(columns_from_records(recs)))
    write_sums(run)
    problems = verify_run(run)
    assert [p for p in problems if p.file.endswith(".npz")] == []
    assert any(p.file == f"cells/{key}.json" and p.message.startswith("e2e_ms: p50") for p in problems), problems
    assert any(p.file == f"cells/{key}.json" and p.message.startswith("output_tok_s is") for p in problems)

    res = cli("results", "verify", str(run))
    assert res.returncode == 1 and f"FAIL {run}" in res.stdout and f"cells/{key}.json: e2e_ms: p50" in res.stdout
    # the readers refuse it, naming the problem and the way out
    for args in (["show", str(run)], ["diff", str(run), str(run)], ["slo", str(run), "--slo", "e2e_ms.p90=100"],
                 ["report", str(run), "-o", str(tmp_path / "rep")]):
        res = cli("results", *args)
        assert res.returncode == 2 and "does not verify" in res.stderr and "Traceback" not in res.stderr, args
        assert "--allow-unverified" in res.stderr and f"cells/{key}" in res.stderr
    assert not (tmp_path / "rep").exists()
    res = cli("results", "show", str(run), "--allow-unverified")
    assert res.returncode == 0 and "WARNING: run" in res.stderr and f"cells/{key}.json: e2e_ms" in res.stderr


def test_plain_verify_checks_the_runs_nested_in_a_tune_session(tmp_path, cli):
    import shutil

    from toolkit.results.compact import glob

    src = next((Path(__file__).resolve().parents[2] / "results" / "quickstart-tune").iterdir())
    session = tmp_path / "quickstart-tune" / src.name
    shutil.copytree(src, session)
    nested = sorted(p.parent for p in session.glob("*/*/manifest.json"))
    assert len(nested) == 16
    bad = nested[3]
    key = sorted(p.name[: -len(".json")] for p in glob(bad / "cells", "*.json"))[0]  # .json.gz: compacted
    _rewrite_records(bad, key, _faster)
    res = cli("results", "verify", "--root", str(tmp_path))
    assert res.returncode == 1
    assert f"FAIL {bad}" in res.stdout and f"cells/{key}.npz: column e2e_ms" in res.stdout
    assert sum(f"ok   {p}" in res.stdout for p in nested) == 15
    # the session itself was written before sessions were checksummed: a warning, not a failure
    assert f"warn {session}" in res.stdout and "no SHA256SUMS: written before" in res.stdout
    # naming the session checks it and its runs
    res = cli("results", "verify", str(session), "--json")
    got = {x["run"]: x for x in json.loads(res.stdout)}
    assert res.returncode == 1 and not got[str(bad)]["ok"] and got[str(session)]["ok"] and len(got) == 17


def test_verify_reads_a_sessions_state_as_its_readers_do(tmp_path):
    """A tune session's tune.json is checked through load_tune_state: valid JSON that is not a session's
    state (another format, a rung without its requests) is named, as the tuner would refuse it."""
    from toolkit.results.verify import verify_folder

    src = next((Path(__file__).resolve().parents[2] / "results" / "quickstart-tune").iterdir())
    session = tmp_path / src.name
    session.mkdir()
    raw = json.loads((src / "tune.json").read_text())
    (session / "tune.json").write_text(json.dumps(raw))
    assert [p.severity for p in verify_folder(session)] == ["warning"]  # the committed state reads
    raw["rungs"][0].pop("requests")
    (session / "tune.json").write_text(json.dumps(raw))
    got = [p for p in verify_folder(session) if p.severity == "error"]
    assert [p.file for p in got] == ["tune.json"] and "rungs.0.requests" in got[0].message
    (session / "tune.json").write_text(json.dumps({**raw, "format": "toolkit-run"}))
    assert "not a tune session's state" in verify_folder(session)[0].message
    (session / "tune.json").write_text("{truncated")
    assert verify_folder(session)[0].message.startswith("not valid JSON")


def test_capture_folders_are_checked_by_their_checksums(tmp_path, cli):
    from toolkit.checksums import write_sums
    from toolkit.results.verify import verify_folder

    cap = tmp_path / "gpu-validation" / "h200-x"
    (cap / "sub").mkdir(parents=True)
    (cap / "validate.json").write_text('{"ok": true}\n')
    (cap / "sub" / "log.txt").write_text("fine\n")
    assert [p.severity for p in verify_folder(cap)] == ["warning"]  # no SHA256SUMS: nothing can be checked
    assert cli("results", "verify", "--root", str(tmp_path)).returncode == 0
    write_sums(cap)
    assert verify_folder(cap) == []
    (cap / "sub" / "log.txt").write_text("edited\n")
    (cap / "extra.txt").write_text("added\n")
    found = {(p.file, p.message.split(":")[0]) for p in verify_folder(cap)}
    assert found == {("sub/log.txt", "sha256 differs from SHA256SUMS"),
                     ("extra.txt", "not covered by SHA256SUMS (added after the folder was finished)")}
    res = cli("results", "verify", "--root", str(tmp_path))
    assert res.returncode == 1 and f"FAIL {cap}" in res.stdout
