"""`python -m toolkit.loadgen.step CELL.json` (what a Slurm job step runs: toolkit.slurm.step) against guidellm's
mock server, as its own process talking through files only: records stream out as they complete, the step
stops between warmup and the measured phase until the runner answers (nothing in flight), and its records file
holds the cell's records in run_cell's order, the ones the events carried."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.helpers import wait_for
from toolkit.loadgen import CellLoad
from toolkit.loadgen.step import paths
from toolkit.schema.records import Prompt, RequestRecord

pytestmark = pytest.mark.slow


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_cell_as_its_own_process_through_files(mock, tmp_path):
    load = CellLoad(api="chat", concurrency=2, requests=5, warmup=2, output_len=32, workers=1)
    prompts = [Prompt(id=f"p{i}", domain="d", prompt=f"hello {i}") for i in range(4)]
    cell = tmp_path / "job-7.cell0.json"
    cell.write_text(json.dumps({"url": mock.base_url, "load": dataclasses.asdict(load),
                                "who": {"model": "m", "arm": "a", "domain": "d", "repeat": 0},
                                "prompts": [p.model_dump(mode="json") for p in prompts]}))
    files = paths(cell)
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.loadgen.step", str(cell)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: any("measure" in e for e in _events(files.events)), 120.0, "the measure event")
        time.sleep(1.0)  # the step waits for the runner: nothing more is sent meanwhile
        before = _events(files.events)
        assert [e for e in before if "record" in e and not e["record"]["warmup"]] == []
        assert len([e for e in before if "record" in e]) == 2 and proc.poll() is None
        files.go.touch()
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    events = _events(files.events)
    assert "done" in events[-1] and events[-1]["workers"] == 1
    records = [RequestRecord.model_validate_json(line) for line in files.records.read_text().splitlines()]
    assert len(records) == 7 and sum(r.warmup for r in records) == 2 and all(r.error is None for r in records)
    assert {(r.arm, r.domain) for r in records} == {("a", "d")}
    streamed = [RequestRecord.model_validate(e["record"]) for e in events if "record" in e]
    assert sorted(r.model_dump_json() for r in streamed) == sorted(r.model_dump_json() for r in records)
