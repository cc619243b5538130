"""A compacted tune session (toolkit.results.compact, issue 44 item 5): its prompt split (prompts/*.jsonl) and
its input store's blobs (inputs/sha256/<sha256>) of 1 KiB or more are stored once, as NAME.gz; the session and
its runs verify, reproduce lays out the very bytes the runs read, an edited .gz fails verify (even with the
session's SHA256SUMS rewritten over it), compacting again changes nothing, and a session resume could still
go on with is left plain."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.helpers import USER_PROMPTS, quickstart_with_user_workload
from toolkit.checksums import ORIG, write_sums
from toolkit.errors import ToolkitError
from toolkit.results.compact import compact
from toolkit.results.verify import errors, verify_folder, verify_run

# a committed complete session's state: a valid tune.json (verify reads it; compaction never touches it)
STATE = ROOT / "results" / "quickstart-tune" / "20261203T083318Z-598b59" / "tune.json"
PROMPTS = USER_PROMPTS


def _session(tmp: Path, status: str = "complete") -> tuple[Path, list[Path]]:
    """A finished tune session as the tune leaves it before compaction: tune.json, its prompt split, two runs
    archived in it (their inputs in the session's store) and the session's SHA256SUMS."""
    from toolkit.bench.inputs import archive_run
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.specs import load_spec

    plan = plan_run(load_spec(quickstart_with_user_workload(tmp)))
    session = tmp / "results" / "quickstart-tune" / "20261207T000000Z-abcdef"
    session.mkdir(parents=True)
    state = json.loads(STATE.read_text())
    (session / "tune.json").write_text(json.dumps({**state, "status": status}, indent=2, sort_keys=True) + "\n")
    (session / "prompts").mkdir()
    (session / "prompts" / "mine.all.jsonl").write_text(PROMPTS)
    (session / "prompts" / "mine.tune.jsonl").write_text("".join(PROMPTS.splitlines(True)[:40]))
    (session / "prompts" / "tiny.tune.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')  # under 1 KiB: kept
    runs = []
    for _ in range(2):
        w = archive_run(session, plan, run_manifest(plan, {}))
        w.finalize("complete")
        runs.append(w.path)
    write_sums(session)  # as TuneSession._finish does before it compacts
    return session, runs


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _laid_out(run: Path, tree: Path) -> dict[str, bytes]:
    from toolkit.bench.inputs import materialize
    from toolkit.results.archive import open_archive

    materialize(open_archive(run), tree)
    return _tree(tree)


@pytest.fixture
def compacted(tmp_path: Path):
    """(session, its runs, the inputs a replay laid out before compaction)."""
    session, runs = _session(tmp_path)
    before = _laid_out(runs[0], tmp_path / "before")
    assert compact(session)
    return session, runs, before


def test_a_compacted_session_stores_prompts_and_inputs_once_and_verifies(compacted) -> None:
    session, runs, _ = compacted
    store = session / "inputs" / "sha256"
    blobs = sorted(p.name for p in store.iterdir())
    assert any(b.endswith(".gz") for b in blobs)
    for b in store.iterdir():  # 1 KiB or more: .gz only, never both; smaller ones plain
        if b.suffix == ".gz":
            assert not (store / b.stem).exists() and len(gzip.decompress(b.read_bytes())) >= 1024
        else:
            assert b.stat().st_size < 1024
    mine = store / (__import__("hashlib").sha256(PROMPTS.encode()).hexdigest() + ".gz")
    assert gzip.decompress(mine.read_bytes()) == PROMPTS.encode()
    assert sorted(p.name for p in (session / "prompts").iterdir()) == [
        "mine.all.jsonl.gz", "mine.tune.jsonl.gz", "tiny.tune.jsonl"]
    assert gzip.decompress((session / "prompts" / "mine.all.jsonl.gz").read_bytes()) == PROMPTS.encode()
    orig = (session / ORIG).read_text()
    assert "  prompts/mine.all.jsonl\n" in orig and f"  inputs/sha256/{mine.stem}\n" in orig
    assert verify_folder(session) == []
    assert all(verify_run(r) == [] for r in runs)
    v = run_cli("results", "verify", "--root", str(session.parents[1]))
    assert v.returncode == 0, v.stdout + v.stderr


def test_a_run_of_a_compacted_session_lays_out_the_same_bytes(compacted, tmp_path: Path) -> None:
    session, runs, before = compacted
    after = _laid_out(runs[0], tmp_path / "after")
    assert after == before and after["data/mine.jsonl"] == PROMPTS.encode()
    assert _laid_out(runs[1], tmp_path / "after1") == before


def test_an_edited_blob_gz_fails_verify_and_replay(compacted, tmp_path: Path) -> None:
    from toolkit.bench.inputs import materialize
    from toolkit.results.archive import open_archive

    session, runs, _ = compacted
    digest = __import__("hashlib").sha256(PROMPTS.encode()).hexdigest()
    gz = session / "inputs" / "sha256" / f"{digest}.gz"
    gz.write_bytes(gzip.compress(PROMPTS.replace("number 7", "number 8").encode(), compresslevel=9, mtime=0))
    write_sums(session)  # the edit hidden from the session's SHA256SUMS: the digest still names it
    rel = f"../../inputs/sha256/{digest}.gz"
    assert all(rel in [p.file for p in errors(verify_run(r))] for r in runs)
    assert any(p.file == f"inputs/sha256/{digest}.gz" and "original sha256" in p.message
               for p in errors(verify_folder(session)))
    with pytest.raises(ToolkitError, match="edited"):
        materialize(open_archive(runs[0]), tmp_path / "tree")
    gz.write_bytes(gz.read_bytes()[:-9])  # truncated
    assert any("not a valid gzip" in p.message for p in errors(verify_run(runs[0])))


def test_an_edited_prompts_gz_fails_verify(compacted) -> None:
    session, _, _ = compacted
    gz = session / "prompts" / "mine.tune.jsonl.gz"
    gz.write_bytes(gzip.compress(gzip.decompress(gz.read_bytes()).replace(b"p3", b"p9"), compresslevel=9, mtime=0))
    assert any(p.file == "prompts/mine.tune.jsonl.gz" for p in errors(verify_folder(session)))
    write_sums(session)
    assert [(p.file, "original sha256" in p.message) for p in errors(verify_folder(session))] == [
        ("prompts/mine.tune.jsonl.gz", True)]
    assert run_cli("results", "verify", str(session)).returncode == 1


def test_compacting_again_changes_nothing(compacted) -> None:
    session, _, _ = compacted
    before = _tree(session)
    assert compact(session) == []
    assert _tree(session) == before
    r = run_cli("results", "compact", "--root", str(session.parents[1]))
    assert r.returncode == 0 and _tree(session) == before, r.stderr


def test_a_new_run_in_a_compacted_store_does_not_store_a_blob_twice(compacted, tmp_path: Path) -> None:
    """A run archived into a session whose store is compacted reuses <sha256>.gz: no plain copy beside it."""
    from toolkit.bench.inputs import archive_run
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.specs import load_spec

    session, _, _ = compacted
    store = session / "inputs" / "sha256"
    names = sorted(p.name for p in store.iterdir())
    w = archive_run(session, plan_run(load_spec(tmp_path / "envs" / "matrices" / "quickstart.yaml")),
                    run_manifest(plan_run(load_spec(tmp_path / "envs" / "matrices" / "quickstart.yaml")), {}))
    w.finalize("complete")
    assert sorted(p.name for p in store.iterdir()) == names
    assert verify_run(w.path) == []


def test_a_session_resume_may_still_complete_is_not_compacted(tmp_path: Path) -> None:
    session, _ = _session(tmp_path, status="partial")
    before = _tree(session)
    with pytest.raises(ToolkitError, match="did not finish"):
        compact(session)
    assert _tree(session) == before and (session / "prompts" / "mine.all.jsonl").is_file()
