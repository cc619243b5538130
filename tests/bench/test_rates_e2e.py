"""`rates:` end to end on the real embedded engine (`transformers serve`): the quickstart-rates matrix as a fresh
clone has it runs open-loop cells keyed by rate, the archive verifies and records the target and achieved rate
and the arrival process, `results show` prints both rates, the speed-ups and crossover are per rate, and
`results slo` gives the capacity in requests per second."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.results import compact

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rated(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("rates")
    shutil.copytree(ROOT / "envs", tmp / "envs")
    r = run_cli("bench", "matrix", str(tmp / "envs" / "matrices" / "quickstart-rates.yaml"), "--results",
                str(tmp / "results"), "--json", timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    return Path(json.loads(r.stdout)["run"])


def test_cells_are_keyed_by_rate_and_record_target_and_achieved(rated: Path) -> None:
    names = sorted(p.name for p in compact.glob(rated / "cells", "*.json"))
    assert names == [f"{arm}__coding__{q}__r0.json" for arm in ("baseline", "ngram") for q in ("q0p5", "q2")]
    summary = json.loads(compact.read_text(rated / "summary.json"))
    for c in summary["cells"]:
        assert c["status"] == "ok" and c["rate"] in (0.5, 2.0) and c["concurrency"] == 4096  # no cap
        assert c["arrival"] == {"process": "poisson", "burstiness": 1.0} and "late" in c["checked"]
        # 12 Poisson arrivals: the sample rate scatters around the target, never by a factor of 3
        assert c["rate"] / 3 < c["achieved_rate"] < c["rate"] * 3 and c["lag_p99_ms"] is not None
    assert run_cli("results", "verify", str(rated)).returncode == 0
    sp = summary["derived"]["speedups"]
    assert sorted(r["rate"] for r in sp) == [0.5, 2.0] and all(r["arm"] == "ngram" and r["n_pairs"] for r in sp)
    assert all(c.get("axis") == "rate" and c["crossover_concurrency"] is None for c in summary["derived"]["crossovers"])


def test_show_prints_target_and_achieved_rate(rated: Path) -> None:
    r = run_cli("results", "show", str(rated))
    assert r.returncode == 0, r.stderr
    head = next(line for line in r.stdout.splitlines() if line.startswith("arm") and "achieved" in line)
    assert head.split()[:5] == ["arm", "domain", "rate", "achieved", "rep"]
    assert "rates (req/s, open loop)  0.5, 2" in r.stdout and "poisson; no cap on requests in flight" in r.stdout
    assert "r=0.5/s" in r.stdout or "r=2/s" in r.stdout  # the crossover and checks name levels as rates


def test_slo_capacity_is_in_requests_per_second(rated: Path) -> None:
    r = run_cli("results", "slo", str(rated), "--slo", "e2e_ms.p90=600000", "--json")
    assert r.returncode == 0, r.stderr
    an = json.loads(r.stdout)
    an = an.get("slo", an)
    assert an["axis"] == "rate"
    for cap in an["capacity"]:
        assert cap["axis"] == "rate" and cap["levels"] == [0.5, 2.0]
        if not cap.get("not_judged"):  # every cell judged: a ten-minute p90 holds at both rates
            assert cap["capacity"] == 2.0 and "at least r=2/s" in cap["note"]
    text = run_cli("results", "slo", str(rated), "--slo", "e2e_ms.p90=600000").stdout
    assert "highest rate, req/s," in text and "req/s" in text


def test_diff_and_plots_read_levels_as_rates(rated: Path, tmp_path: Path) -> None:
    d = run_cli("results", "diff", str(rated), str(rated))
    assert d.returncode == 0, d.stderr
    assert "baseline coding r=0.5/s out=32" in d.stdout and "ngram coding r=2/s out=32" in d.stdout
    r = run_cli("results", "report", str(rated), "-o", str(tmp_path / "rep"), "--no-html")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rep" / "plots" / "throughput.png").stat().st_size > 1000
