"""The tracked tree stays under its budget, model weights and committed archives included
(docs/results.md, "Compacted archives, and which runs live in git": the GPU sittings copy the tree, with a
64 MiB limit). Measured as `git ls-files -z | xargs -0 stat -c %s` sums it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUDGET_MIB = 30.0


def tracked_sizes() -> dict[str, int]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no tracked tree to measure")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    out = {}
    for n in filter(None, names.decode().split("\0")):
        p = REPO / n
        out[n] = p.stat().st_size if p.is_file() else 0
    return out


def test_the_tracked_tree_is_under_its_budget() -> None:
    sizes = tracked_sizes()
    total = sum(sizes.values()) / 2**20
    top: dict[str, int] = {}
    for n, s in sizes.items():
        head = "/".join(n.split("/")[:3])
        top[head] = top.get(head, 0) + s
    biggest = ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(top.items(), key=lambda kv: -kv[1])[:5])
    assert total < BUDGET_MIB, (
        f"the tracked tree is {total:.1f} MiB, over its {BUDGET_MIB:.0f} MiB budget (largest: {biggest}); "
        "re-encode old records (`toolkit results recode RUN`) or publish the run as a tarball "
        "(`toolkit results pack RUN`) and untrack it (docs/results.md, which runs live in git)")


def test_the_records_of_committed_runs_are_compact_unless_pinned() -> None:
    """A committed run's raw records are re-encoded (cells/<key>.rec.xz, RECODED.json), except the runs
    whose records tests read exactly (golden outputs, a figure compared with ==), kept as written
    (PLAIN_PINNED)."""
    plain = sorted({n.rsplit("/cells/", 1)[0] for n in tracked_sizes() if n.startswith("results/")
                    and "/cells/" in n and n.endswith(".jsonl.gz")})
    unpinned = [p for p in plain if not any(pin in p for pin in PLAIN_PINNED)]
    assert unpinned == [], (f"{unpinned[0]} and {len(unpinned) - 1} more keep their records plain: "
                            "`toolkit results recode RUN` before committing (docs/results.md)")
    assert len(plain) > 1  # the pinned ones are there (and so the check above saw the tree)


def test_committed_finished_runs_hold_nothing_left_to_compact() -> None:
    """Every committed run archive with SHA256SUMS stores what compaction stores gzipped as NAME.gz (logs, JSON
    of 1 KiB or more, per-request columns cells/<key>.npz, inputs/files/): a run copied in from a machine with an
    older toolkit is compacted (`toolkit results compact RUN`) before it is committed. A run resume may still
    complete (interrupted) is left as it is, as compaction leaves it."""
    from toolkit.checksums import folder_files, is_run_archive
    from toolkit.results.archive import open_archive
    from toolkit.results.compact import GZ, compactable

    sizes = tracked_sizes()
    runs = sorted({(REPO / n).parent for n in sizes if n.startswith("results/") and n.endswith("/SHA256SUMS")})
    runs = [r for r in runs if is_run_archive(r)]
    left = []
    for run in runs:
        if open_archive(run).interrupted:
            continue
        base = run.relative_to(REPO).as_posix()
        left += [f"{base}/{rel}" for rel in folder_files(run)
                 if f"{base}/{rel}" in sizes and compactable(rel, sizes[f"{base}/{rel}"])
                 and not (run / (rel + GZ)).exists()]
    assert left == [], (f"{left[0]} and {len(left) - 1} more are stored plain in a finished run: "
                        "`toolkit results compact RUN` before committing (docs/results.md, compacted archives)")
    assert len(runs) > 10  # the committed runs were seen


PLAIN_PINNED = ("sglang-h200/20261202T190515Z-52c8f2",  # tests/results/golden/*-52c8f2.*
                "quickstart-tune/20261203T083318Z-598b59",  # tests/results/golden/tune-quickstart-598b59.*
                # tests/results/test_results_one_number.py: an archive older than the metric registry, whose
                # stored pooled ITL equals what its records give, exactly
                "h200-transformers/20261202T113835Z-de6da8")
