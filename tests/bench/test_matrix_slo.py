"""A matrix with an `slo` block, end to end through the real CLI against real `transformers serve`
engines: the runner prints goodput and capacity per arm and domain, stores the analysis in
summary.json, and `results slo` recomputes exactly that from the archive without changing a byte."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.bench.test_matrix_runner import ENV, tree_digest
from tests.conftest import run_cli
from toolkit.schema.slo import SloAnalysis

pytestmark = pytest.mark.slow


def test_matrix_with_objectives_prints_goodput_and_capacity(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(ENV)
    m = tmp_path / "m.yaml"
    m.write_text(textwrap.dedent("""\
        kind: Matrix
        name: t
        environment: env.yaml
        arms: [baseline, ngram]
        workloads: [coding]
        concurrency: [1, 2]
        output_len: 8
        requests: 10
        warmup: 1
        slo:
          ttft_ms: {p90: 60000}
          e2e_ms: {per_request: 120000}
        """))
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "Objectives: ttft_ms p90 <= 60000 ms; e2e_ms <= 120000 ms per request" in out
    cap = out.split("Capacity per arm and domain")[1].split("\n\n")[0]
    for arm in ("baseline", "ngram"):  # generous objectives: every level holds
        assert re.search(rf"^{arm}\s+coding\s+c=2\s+[\d,.]+\s+-\s+none through c=2$", cap, re.M), cap
    run = Path(out.split("run complete: ")[1].split()[0])
    summary = json.loads((run / "summary.json").read_text())
    slo = summary["derived"]["slo"]
    assert {(c["arm"], c["domain"], c["capacity"]) for c in slo["capacity"]} == {("baseline", "coding", 2),
                                                                                  ("ngram", "coding", 2)}
    assert all(c["met"] == c["n"] == 10 and c["holds"] for c in slo["cells"])
    (adv,) = slo["advice"]
    speed = {s["concurrency"]: s for s in summary["derived"]["speedups"]}
    for x in adv["levels"]:  # both arms hold everywhere: the raw rule (significantly slower) decides
        sp = speed[x["concurrency"]]
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
    assert all(c["capacity"] is None and c["first_failure"] == 1 for c in tight["capacity"])
    assert tree_digest(run) == before
