"""Telemetry: the CSV parser on REAL query output captured on the H200 (200 ms interval, during
`toolkit gpu validate` and a bf16 matmul load), and the background sampler driven by a process
that replays those captured lines at the set interval."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest

from toolkit.errors import ToolFailure
from toolkit.gpu import telemetry as tm

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu"
CSV = (DATA / "h200-telemetry.csv").read_text()


def test_query_matches_the_captured_columns():
    first = CSV.splitlines()[0]
    assert len(first.split(",")) == len(tm.FIELDS)
    cmd = tm.query_command(0.2)
    assert cmd[1] == f"--query-gpu={tm.QUERY}" and cmd[-1] == "-lms=200"
    # a sample has a field per column, in the query's order, after this host's clock
    assert [f.name for f in dataclasses.fields(tm.GpuSample)] == ["t", *(key for _, key, _ in tm.FIELDS)]


def test_parse_real_capture():
    samples = tm.parse_query_output(CSV)
    assert len(samples) == len(CSV.splitlines()) == 161
    s0 = samples[0]
    assert s0.gpu == 0 and s0.uuid == "GPU-8bb3f560-524d-977f-fea3-528d57df7555"
    assert s0.mem_total_mib == 143771 and s0.power_w == pytest.approx(77.78)
    assert s0.sm_clock_mhz == 345 and s0.smi_time == "2026/12/02 11:15:36.770"
    # the load is visible: the SM clock went to its 1980 MHz maximum and utilisation to 100 %
    assert max(s.sm_clock_mhz for s in samples) == 1980
    assert max(s.util_gpu_pct for s in samples) == 100
    assert all(0 < s.power_w < 800 for s in samples)


def test_na_and_foreign_lines():
    line = "2026/12/02 11:15:36.770, 0, GPU-x, [N/A], 0, 10, 143771, [Not Supported], 345, 3201, 39"
    s = tm.parse_query_line(line, t=5.0)
    assert s.util_gpu_pct is None and s.power_w is None and s.mem_used_mib == 10 and s.t == 5.0
    assert tm.parse_query_line("") is None
    assert tm.parse_query_line("No devices were found") is None
    assert tm.parse_query_line("a, b, c, d, e, f, g, h, i, j, k") is None  # right width, not numbers


def test_summarize():
    samples = tm.parse_query_output(CSV)
    samples = [dataclasses.replace(s, t=i * 0.2) for i, s in enumerate(samples)]
    summary = tm.summarize(samples)
    g = summary["0"]
    assert g["n"] == 161 and g["sm_clock_mhz"]["max"] == 1980
    assert g["power_w"]["mean"] == pytest.approx(sum(s.power_w for s in samples) / 161, abs=1e-3)
    assert g["span_s"] == pytest.approx(160 * 0.2)


REPLAY = """
import sys, time
lines = open(sys.argv[1]).read().splitlines()
for ln in lines:
    print(ln, flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _replay(tmp_path: Path, interval: float, limit: int | None = None) -> list[str]:
    src = tmp_path / "capture.csv"
    src.write_text("\n".join(CSV.splitlines()[:limit]) + "\n")
    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    return [sys.executable, str(script), str(src), str(interval)]


def _wait_for(cond, deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_sampler_collects_in_background_and_stops(tmp_path):
    tel = tm.Telemetry(0.01, command=_replay(tmp_path, 0.01)).start()
    assert tel.wait_first(20)
    assert _wait_for(lambda: len(tel.snapshot()) >= 20, 20)
    assert tel.running
    samples = tel.stop()
    assert not tel.running
    assert 20 <= len(samples) <= 161
    ts = [s.t for s in samples]
    assert ts == sorted(ts) and ts[-1] - ts[0] > 0
    assert [s.smi_time for s in samples] == [s.smi_time for s in tm.parse_query_output(CSV)[:len(samples)]]
    assert not tel._thread.is_alive()  # reader joined: nothing more can arrive after stop()
    assert len(tel.snapshot()) == len(samples)


def test_sampler_as_context_manager_ends_with_the_source(tmp_path):
    with tm.Telemetry(0.01, command=_replay(tmp_path, 0.0, limit=5)) as tel:
        assert _wait_for(lambda: not tel.running and len(tel.snapshot()) == 5, 20)
    assert len(tel.samples) == 5


def test_inert_without_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    tel = tm.Telemetry(0.5).start()
    assert tel.reason and "not on PATH" in tel.reason
    assert tel.stop() == []


def test_sampler_that_dies_is_an_error(tmp_path):
    tel = tm.Telemetry(0.1, command=[sys.executable, "-c", "import sys; sys.exit('no driver')"]).start()
    assert _wait_for(lambda: not tel.running, 20)
    assert tel.stop() == []
    assert "no driver" in tel.error
    with pytest.raises(ToolFailure, match="no driver"):
        tel.check()


def test_bad_interval():
    with pytest.raises(ValueError):
        tm.Telemetry(0)


def test_gpu_present_follows_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tm.gpu_present() is False
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert tm.gpu_present() is True
