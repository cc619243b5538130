"""A chunk's time is when its bytes reached the client's socket (the kernel's receive timestamp), not
when the client's process got round to reading and parsing them. Shown on every path that reads a
socket (one process; each worker process) and every API (chat, completions, /generate): the processes
that read the sockets are stopped (SIGSTOP) from just after the requests reach the truth server
(benchmarks/loadgen_server.py) until well after it wrote the first chunks. A time taken by the read
callback would be late by the stop (hundreds of ms); the recorded TTFT is the server's own, request by
request (prompt tags pair them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.loadgen.test_loadgen_workers import reset, start_server, stats, worker_pids

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TTFT_MS = 800    # from the requests' arrival to their first chunk
LATE_S = 0.6     # how long after the first chunks were written the readers go on


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("first-chunk"), ttft_ms=TTFT_MS, itl_ms=2)
    yield srv
    srv.stop()


@pytest.mark.parametrize("api", ["chat", "completions", "generate"])
@pytest.mark.parametrize("workers", [1, 2])
def test_first_chunk_time_is_its_arrival_not_the_read(server, tmp_path, api, workers):
    reset(server)
    n = workers  # one request per reading process
    out = tmp_path / "records.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "toolkit.loadgen", server.base_url, "--api", api,
                          "--concurrency", str(n), "--requests", str(n), "--output-len", "3",
                          "--prompts", "2",  # tagged prompts ("hi #i"): the server's TTFT pairs with the record
                          "--workers", str(workers), "--records", str(out)],
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    readers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while stats(server)["requests"] < n:  # every request has reached the server
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() else "timeout"
            time.sleep(0.005)
        readers = [p.pid] if workers == 1 else sorted(worker_pids(p.pid))
        assert len(readers) == workers
        stopped = time.perf_counter()
        for pid in readers:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(TTFT_MS / 1000 + LATE_S)  # the server writes the first chunks meanwhile
        resumed = time.perf_counter()
    finally:
        for pid in readers:
            os.kill(pid, signal.SIGCONT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    s = stats(server)
    # what the test is about happened: every first chunk was written while its reader was stopped, a
    # good while before it could read it (same clock: perf_counter is CLOCK_MONOTONIC in every process)
    assert all(stopped < w < resumed - LATE_S / 2 for w in s["first_write"]), (stopped, s["first_write"], resumed)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == n and all(r["error"] is None for r in recs), recs
    truth = dict(zip(s["tags"], s["ttft_ms"]))
    for r in recs:
        added = r["ttft_ms"] - truth["#" + r["prompt_id"][1:]]
        # read at least LATE_S / 2 after the chunk came; stamped when it came (the rest of the short
        # stream, 2 ms a chunk, may share its read and its time)
        assert abs(added) < 100, (api, workers, r["ttft_ms"], truth, added)
