"""`warmup_launch: true` end to end on the real embedded engine: each arm's server is started once before
the first round, runs the cells of its first measured launch, and is stopped; nothing of it is measured
(the archive holds the same cells and requests as without it), and the warm-up is archived as a launch
record of its own, before the measured launch, with its time in the timing line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.test_launches_e2e import SMALL, small_quickstart
from tests.conftest import run_cli
from toolkit.results import compact


@pytest.mark.slow
def test_a_warm_up_launch_runs_first_and_is_not_measured(tmp_path: Path) -> None:
    spec = small_quickstart(tmp_path, "warmup_launch: true\n")
    r = run_cli("bench", "matrix", str(spec), "--results", str(tmp_path / "results"), "--json", timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    assert "warm-up launch" in r.stderr
    summary = json.loads(compact.read_text(run / "summary.json"))
    d = summary["derived"]
    assert sorted(p.name for p in compact.glob(run / "cells", "*.json")) == ["baseline__coding__c1__r0.json",
                                                                      "ngram__coding__c1__r0.json"]
    for c in summary["cells"]:  # the warm-up's requests are not among the measured ones
        assert c["status"] == "ok" and c["n_requests"] == int(SMALL["requests"])
    assert sorted(d["warmup_launches"]) == ["baseline", "ngram"]
    for arm, w in d["warmup_launches"].items():
        assert w["warmup"] and w["ok"] and w["startup_s"] > 0 and w["stop_s"] is not None
        assert w["cells"] == [f"{arm}__coding__c1__r0"]
        measured = d["launches"][arm]
        assert len(measured) == 1 and not measured[0].get("warmup")
        assert w["started_at"] < measured[0]["started_at"]  # before its arm's measured launch
        assert d["timing"]["warmup_launch_s"][arm] >= w["startup_s"]
    # every warm-up comes before the first measured launch of the run (the first round's order)
    assert max(w["started_at"] for w in d["warmup_launches"].values()) < min(
        r["started_at"] for recs in d["launches"].values() for r in recs)
    assert "warm-up launches (discarded)" in run_cli("results", "show", str(run)).stdout
