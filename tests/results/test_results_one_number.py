"""One cell, one number: for every archived run under results/, every metric of every single-repeat
cell reads the same median in `results show --json` and `results diff RUN RUN --json` (the CLI, as a
user runs it). Older archives read through the registry without being rewritten."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.results.archive import open_archive, stored_columns
from toolkit.schema.metrics import METRICS, describe, chunk_itls, successful

RUNS = sorted(p.parent.relative_to(ROOT).as_posix() for p in ROOT.glob("results/*/*/manifest.json"))


def test_there_are_archived_runs_to_check():
    assert len(RUNS) >= 4, RUNS


@pytest.mark.parametrize("run", RUNS)
def test_show_and_diff_read_the_same_median(run: str) -> None:
    show = run_cli("results", "show", run, "--json")
    diff = run_cli("results", "diff", run, run, "--json")
    assert show.returncode == 0 and diff.returncode == 0, show.stderr + diff.stderr
    cells, dcells = json.loads(show.stdout)["cells"], json.loads(diff.stdout)["cells"]
    by_group = {(c["arm"], c["domain"], c["concurrency"], c["output_len"]): c for c in dcells}
    repeats = Counter((c["arm"], c["domain"], c["concurrency"], c["output_len"]) for c in cells.values())
    compared = 0
    for key, c in cells.items():
        g = (c["arm"], c["domain"], c["concurrency"], c["output_len"])
        if repeats[g] != 1:
            continue
        dm = by_group[g]["metrics"]
        assert set(c["metrics"]) == set(dm), (key, set(c["metrics"]) ^ set(dm))
        for name, stat in c["metrics"].items():
            assert name in METRICS, name
            assert dm[name]["a"] == stat["p50"] == dm[name]["b"], (key, name, stat["p50"], dm[name]["a"])
            if METRICS[name].kind == "request":
                assert (dm[name]["a_low"], dm[name]["a_high"]) == (stat["ci_low"], stat["ci_high"]), (key, name)
            compared += 1
    ok_cells = [c for c in cells.values() if c["status"] == "ok" and repeats[(c["arm"], c["domain"],
                                                                            c["concurrency"], c["output_len"])] == 1]
    if not ok_cells:  # failed runs; several launches or repeats a group: diff reads the group, show each cell
        pytest.skip(f"{run}: no ok cell alone in its group (every cell failed, or launches/repeats)")
    assert compared >= 6 * len(ok_cells)  # at least the latencies and throughputs of every measured cell


def test_old_archives_read_under_registry_names_untouched() -> None:
    """Archives written before the registry stored the per-request mean ITL as `itl_ms` and the
    per-request rate as `output_tok_s`: they read as itl_req_mean_ms and req_output_tok_s, and their
    stored pooled ITL is what the registry computes from the records."""
    run = ROOT / "results/h200-transformers/20261202T113835Z-de6da8"
    key = "baseline-cb__coding__c16__r0"
    raw = stored_columns(run / "cells" / f"{key}.npz")  # the arrays as written (stored as .npz.gz, compacted)
    assert "itl_ms" in raw and "itl_req_mean_ms" not in raw
    a = open_archive(run)
    cols = a.columns(key)
    assert {"itl_req_mean_ms", "req_output_tok_s", "req_accept_length"} <= set(cols) and "itl_ms" not in cols
    recs = successful(a.iter_records(key))
    pooled = describe([g for r in recs for g in chunk_itls(r)], ci=False)
    assert a.cell_map[key].metrics["itl_ms"].p50 == pooled.p50  # the stored figure is the registry's itl_ms
    assert pooled.p50 != describe(cols["itl_req_mean_ms"]).p50  # and differs from the per-request view
    assert run_cli("results", "verify", "--root", "results").returncode == 0  # nothing was rewritten


def test_the_issue_cell_reads_one_itl_everywhere() -> None:
    """Issue 14: show said 146.1 ms, diff 176.4 ms for baseline-cb / coding / c=16. Now itl_ms is the
    pooled figure in both, and the per-request view has its own name in both."""
    run = "results/h200-transformers/20261202T113835Z-de6da8"
    show = json.loads(run_cli("results", "show", run, "--json").stdout)["cells"]["baseline-cb__coding__c16__r0"]
    diff = json.loads(run_cli("results", "diff", run, run, "--json", "-m", "itl_ms", "-m", "itl_req_mean_ms").stdout)
    (d,) = [c for c in diff["cells"] if (c["arm"], c["domain"], c["concurrency"]) == ("baseline-cb", "coding", 16)]
    assert round(show["metrics"]["itl_ms"]["p50"], 1) == round(d["metrics"]["itl_ms"]["a"], 1) == 146.1
    assert round(show["metrics"]["itl_req_mean_ms"]["p50"], 1) == round(d["metrics"]["itl_req_mean_ms"]["a"], 1) \
        == 176.4
