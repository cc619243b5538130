"""Trace replay (toolkit/schema/trace.py): a Mooncake-style trace of 300 timestamped requests, converted and
replayed against the truth server (benchmarks/loadgen_server.py), each request sent at its scheduled time.

The timing error is stated and measured two ways: the client's own send stamps against the schedule
(`lag_ms`: median < 5 ms, p99 < 20 ms; measured here 0.6 / 3.4 ms on the shared 2-core machine), and the
truth server's arrival stamps (the kernel's receive time, same CLOCK_MONOTONIC) against the same schedule,
request by request through the prompt tag ` #i`, each arrival's spacing from request 0's against the
schedule's (median < 10 ms). The bounds are generous: this machine is
shared and slow; docs/loadgen.md#traces has the figures."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from toolkit.errors import ToolkitError
from toolkit.loadgen import CellLoad, run, run_cell
from toolkit.schema.records import Prompt
from toolkit.schema.trace import arrivals, from_mooncake, prompt_text, read_trace
from tests.helpers import BusyHost
from tests.loadgen.test_loadgen_workers import ROOT, reset, start_server, stats

N, RATE = 300, 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("trace"), ttft_ms=20, itl_ms=2)
    yield srv
    srv.stop()


def mooncake(path, n: int = N, rate: float = RATE, seed: int = 1):
    """A trace in Mooncake's shape: integer ms timestamps, lengths, 512-token prefix blocks (hash_ids)."""
    rng, t, lines = random.Random(seed), 1000, []
    for i in range(n):
        t += int(rng.expovariate(rate) * 1000)
        lines.append(json.dumps({"timestamp": t, "input_length": rng.randint(50, 1500),
                                 "output_length": rng.randint(2, 8), "hash_ids": [i % 3, 1000 + i]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_mooncake_converts_to_seconds_and_prompts_keep_shared_prefixes(tmp_path):
    src = mooncake(tmp_path / "moon.jsonl", n=6)
    with pytest.raises(ToolkitError, match="looks like a Mooncake trace"):  # its ms would replay 1000x slower
        read_trace(src)
    assert from_mooncake(src, tmp_path / "t.jsonl") == 6
    trace = read_trace(tmp_path / "t.jsonl")
    raw = [json.loads(x) for x in src.read_text().splitlines()]
    assert [r.timestamp for r in trace] == [x["timestamp"] / 1000 for x in raw]
    assert arrivals(trace, 2.0) == pytest.approx([(x["timestamp"] - raw[0]["timestamp"]) / 2000 for x in raw])
    texts = [prompt_text(r, i) for i, r in enumerate(trace)]
    # requests 0 and 3 share block 0 (512 tokens): the same leading text; 0 and 1 do not
    k = min(trace[0].input_length, trace[3].input_length, 512) - 2
    assert texts[0].split()[:k] == texts[3].split()[:k] and texts[0].split()[:40] != texts[1].split()[:40]
    assert all(abs(len(t.split()) - r.input_length) <= 2 for t, r in zip(texts, trace))
    assert texts[4].endswith(" #4")


def test_bad_traces_name_the_line(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0.0, "input_length": 5}\n{"timestamp": -1, "input_length": 5}\n')
    with pytest.raises(ToolkitError) as e:
        read_trace(f)
    assert e.value.line == 2 and "timestamp" in e.value.message
    f.write_text('{"timestamp": 0.5}\n')
    with pytest.raises(ToolkitError, match="neither `prompt` nor `input_length`"):
        read_trace(f)
    with pytest.raises(ToolkitError, match="must be > 0"):
        f.write_text('{"timestamp": 0.5, "prompt": "hi"}\n')
        arrivals(read_trace(f), 0.0)


@pytest.mark.slow
def test_a_trace_of_300_requests_replays_on_schedule(server, tmp_path):
    from_mooncake(mooncake(tmp_path / "moon.jsonl"), tmp_path / "trace.jsonl")
    trace = read_trace(tmp_path / "trace.jsonl")
    times = arrivals(trace)
    prompts = [Prompt(id=f"t{i}", domain="trace", prompt=prompt_text(r, i), target_output_len=r.output_length)
               for i, r in enumerate(trace)]
    load = CellLoad(concurrency=N, requests=N, workers=1, arrivals=tuple(times), output_from_prompt=True,
                    request_params={"stream_options": None, "temperature": None})
    reset(server)
    with BusyHost() as host:
        recs = run(run_cell(server.base_url, load, prompts, model="m"))
    busy = host.busy
    assert len(recs) == N and all(r.error is None for r in recs)
    by_id = {r.prompt_id: r for r in recs}
    # every request asked for the trace's output length, and got it
    assert [by_id[f"t{i}"].output_tokens for i in range(N)] == [r.output_length for r in trace]
    # the client's own send stamps against the schedule
    lag = np.array([by_id[f"t{i}"].lag_ms for i in range(N)])
    why = (np.median(lag), np.percentile(lag, 99), lag[0], busy and busy.message)
    assert np.median(lag) < 5.0, why
    # the tail is the host's where other processes wanted more CPU than was free (measured over the replay: p99
    # 27-182 ms under two busy loops on a loaded 2-core box, the median still < 2 ms), or where one pause of the
    # client's process made it: every request beyond the bound scheduled within one stretch no longer than the
    # worst lateness (p99 40 ms seen on a host not busy on average). A client that cannot keep the rate falls
    # behind all along. (In a matrix a cell that late is flagged `late`, and no verdict uses it: late_check.)
    over = np.flatnonzero(lag >= 20.0)
    one_pause = over.size > 0 and times[over[-1]] - times[over[0]] <= lag[over].max() / 1000
    assert np.percentile(lag, 99) < 20.0 or busy is not None or one_pause, (why, [(times[i], lag[i]) for i in over])
    # the send times are the trace's (scheduled = send - lag, on the cell's one clock), to 1e-6 s
    sched = np.array([by_id[f"t{i}"].send_s - by_id[f"t{i}"].lag_ms / 1000 for i in range(N)])
    assert np.max(np.abs((sched - sched[0]) - np.array(times))) < 1e-6
    # the truth server's arrival stamps (kernel receive time) against the same schedule, request by request
    s = stats(server)
    arrival = {tag: at for tag, at in zip(s["tags"], s["arrival"])}
    assert len(arrival) == N
    # the server's clock is the client's (CLOCK_MONOTONIC) but the records carry no absolute start: measured
    # against request 0's arrival, each request's arrival spacing against the schedule's
    late = np.array([(arrival[f"#{i}"] - arrival["#0"]) - times[i] for i in range(N)]) * 1000
    if busy is not None:  # from their median instead: on a busy host request 0 once reached the server 14 ms later
        late -= np.median(late)  # than its own lag (0.35 ms) says, which shifted every other request by as much
    assert np.median(np.abs(late)) < 10.0, (np.median(late), np.percentile(late, 99), why)


@pytest.mark.slow
def test_the_command_line_replays_a_trace_faster(server, tmp_path):
    from_mooncake(mooncake(tmp_path / "moon.jsonl", n=80), tmp_path / "trace.jsonl")
    reset(server)
    res = subprocess.run([sys.executable, "-m", "toolkit.loadgen", server.base_url, "--trace",
                          str(tmp_path / "trace.jsonl"), "--speed", "4"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["n_requests"] == 80 and out["n_errors"] == 0 and out["lag_ms"]["p50"] < 5.0
    span = out["duration_s"]
    trace_span = arrivals(read_trace(tmp_path / "trace.jsonl"))[-1]
    assert span < trace_span / 4 + 2.0  # at 4x speed it ends about a quarter of the trace's span in
    bad = subprocess.run([sys.executable, "-m", "toolkit.loadgen", server.base_url, "--trace",
                          str(tmp_path / "moon.jsonl")], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and "moon.jsonl:1" in bad.stderr and "trace-import" in bad.stderr


@pytest.mark.slow
def test_two_worker_processes_keep_the_trace_schedule(server, tmp_path):
    """Worker w sends the trace's requests i = w (mod 2), as it does the Poisson schedule's: together, the
    trace's send times, each request once."""
    from_mooncake(mooncake(tmp_path / "moon.jsonl", n=120), tmp_path / "trace.jsonl")
    trace = read_trace(tmp_path / "trace.jsonl")
    times = arrivals(trace)
    prompts = [Prompt(id=f"t{i}", domain="trace", prompt=prompt_text(r, i), target_output_len=r.output_length)
               for i, r in enumerate(trace)]
    load = CellLoad(concurrency=120, requests=120, workers=2, arrivals=tuple(times), output_from_prompt=True)
    recs = run(run_cell(server.base_url, load, prompts, model="m"))
    assert sorted(r.prompt_id for r in recs) == sorted(p.id for p in prompts) and all(r.error is None for r in recs)
    by_id = {r.prompt_id: r for r in recs}
    sched = np.array([by_id[f"t{i}"].send_s - by_id[f"t{i}"].lag_ms / 1000 for i in range(120)])
    assert np.max(np.abs((sched - sched[0]) - np.array(times))) < 1e-6
    assert np.median([r.lag_ms for r in recs]) < 5.0
