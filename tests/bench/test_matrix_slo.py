"""A matrix with an `slo` block, end to end through the real CLI against real `transformers serve`
engines: the runner prints goodput and capacity per arm and domain, stores the analysis in
summary.json, and `results slo` recomputes exactly that from the archive without changing a byte."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.bench.test_matrix_runner import tree_digest
from tests.helpers import write_matrix
from tests.conftest import run_cli
from toolkit.schema.slo import SloAnalysis
from toolkit.results import compact

pytestmark = pytest.mark.slow


def test_matrix_with_objectives_prints_goodput_and_capacity(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, """\
        arms: [baseline, ngram]
        workloads: [coding]
        concurrency: [1, 2]
        output_len: 8
        requests: 10
        warmup: 1
        slo:
          ttft_ms: {p90: 60000}
          e2e_ms: {per_request: 120000}
        """)
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "Objectives: ttft_ms p90 <= 60000 ms; e2e_ms <= 120000 ms per request" in out
    cap = out.split("Capacity per arm and domain")[1].split("\n\n")[0]
    run = Path(out.split("run complete: ")[1].split()[0])
    summary = json.loads(compact.read_text(run / "summary.json"))
    slo = summary["derived"]["slo"]
    assert all(c["met"] == c["n"] == 10 and c["holds"] for c in slo["cells"])  # generous: every level holds
    # the embedded engine runs one request at a time (no continuous batching): at c=2 the second request
    # queues, so that level is never judged; the capacity is the level below it (or none, where the c=1
    # cell of this shared machine is one no verdict may use either, e.g. a stall: its note says so)
    c1 = {c["arm"]: c for c in slo["cells"] if c["concurrency"] == 1}
    for c in slo["capacity"]:
        assert c["not_judged"][-1] == 2 and c.get("first_failure") is None, c
        if c1[c["arm"]].get("excluded"):
            # c=2 is always capped here, so with c=1 left out no level is judged: the note names both once
            assert c.get("capacity") is None and c["note"].startswith("no capacity: ") and "c=1 " in c["note"], (c, c1)
            assert c["note"].count("c=2") == 1, c["note"]
        else:
            assert c["capacity"] == 1 and "c=2 is not judged (capped (c=2 above the 1 request the server" in c["note"], c
            assert re.search(rf"^{c['arm']}\s+coding\s+c=1\s+[\d,.]+\s+-\s+c=2 not judged\s+c=2$", cap, re.M), cap
    assert "test higher levels" not in cap
    (adv,) = slo["advice"]
    speed = {s["concurrency"]: s for s in summary["derived"]["speedups"]}
    for x in adv["levels"]:  # both arms hold everywhere: the raw rule (significantly slower) decides
        sp = speed[x["concurrency"]]
        # a level is out of the rule where its speed-up is, or where either arm's SLO cell is: e.g. a bundled c=1
        # cell (answers in one chunk on a loaded box) leaves TTFT, and so the objectives, unjudged there while its
        # throughput speed-up stands (CI once saw it)
        slo_out = [c for c in slo["cells"] if c["concurrency"] == x["concurrency"] and c.get("excluded")]
        if sp["excluded"] or slo_out:
            assert x["choice"] == "excluded" and (x["concurrency"] == 2 or c1["ngram"].get("excluded")
                                                  or c1["baseline"].get("excluded")), (x, sp)
            continue
        slower = sp["throughput_ratio"] < 1 and sp["ci_high"] is not None and sp["ci_high"] < 1
        assert x["choice"] == ("baseline" if slower else "speculative"), (x, sp)
    assert "## Service-level objectives" in (run / "report.md").read_text()
    before = tree_digest(run)
    again = run_cli("results", "slo", str(run), "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    # the runner's analysis is what `results slo` recomputes
    assert SloAnalysis.model_validate({k: doc[k] for k in SloAnalysis.model_fields}) == SloAnalysis.model_validate(slo)
    tight = json.loads(run_cli("results", "slo", str(run), "--slo", "ttft_ms.p90=0.001", "--json").stdout)
    for c in tight["capacity"]:  # nothing holds; c=1 fails first unless a stall left it out of every verdict
        assert c["capacity"] is None and c["first_failure"] == (None if c1[c["arm"]].get("excluded") else 1), c
    assert tree_digest(run) == before
