"""A `trace:` workload in a Matrix (docs/bench.md#traces): the spec's mistakes at file:line with exit 2, and a
small Matrix replaying a trace end to end on the real embedded engine (`transformers serve`): each arm sends the
trace's requests at its times (scaled by `speed`) with its output lengths, the cell is keyed by the trace's
mean rate, the trace file is archived with the run's inputs, and the arms pair by request index.

The timing error stated for a Matrix's open-loop cells is the `late` check's bound: p99 of how late requests
left <= max(10 ms, 10% of the mean gap) (toolkit/schema/eligibility.py late_bound_ms). Here it is measured
from the archived send stamps against the trace itself, request by request."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_cli
from toolkit.schema.eligibility import late_bound_ms
from toolkit.schema.trace import offered_rate
from toolkit.results import compact

N, SPEED = 16, 2.0


def write_trace(path: Path, n: int = N, seed: int = 3) -> list[dict]:
    """n requests about 0.8 s apart (0.4 s at speed 2), lengths varied; one without output_length."""
    rng, t, rows = random.Random(seed), 5.0, []
    for i in range(n):
        row = {"timestamp": round(t, 3), "input_length": rng.randint(8, 40), "output_length": rng.randint(4, 12)}
        if i == 3:
            del row["output_length"]  # the Matrix's output_len applies
        rows.append(row)
        t += rng.uniform(0.4, 1.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


MATRIX = """\
kind: Matrix
name: trace-small
environment: ../local-cpu.yaml
arms: [baseline, ngram]
target: {kind: local}
workloads:
  - {trace: traces/small.jsonl, speed: %s}
output_len: 6
warmup: 1
seed: 0
"""


def setup(tmp: Path, speed: str = "2.0", extra: str = "") -> Path:
    shutil.copytree(ROOT / "envs", tmp / "envs")
    write_trace(tmp / "envs" / "matrices" / "traces" / "small.jsonl")
    m = tmp / "envs" / "matrices" / "trace-small.yaml"
    m.write_text(MATRIX % speed + extra)
    return m


# -- spec errors (no engine)

def test_missing_trace_is_an_error_at_its_line(tmp_path: Path) -> None:
    m = setup(tmp_path)
    m.write_text(m.read_text().replace("traces/small.jsonl", "traces/nope.jsonl"))
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"))
    assert r.returncode == 2, r.stderr
    assert f"{m}:7" in r.stderr and "nope.jsonl" in r.stderr and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "results").exists()


def test_bad_trace_line_is_an_error_at_the_trace_line(tmp_path: Path) -> None:
    m = setup(tmp_path)
    trace = m.parent / "traces" / "small.jsonl"
    lines = trace.read_text().splitlines()
    lines[4] = '{"timestamp": -1, "input_length": 5}'
    trace.write_text("\n".join(lines) + "\n")
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"))
    assert r.returncode == 2 and f"{trace}:5" in r.stderr and "timestamp" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("extra, says", [
    ("concurrency: [1]\n", "a `trace:` workload is sent open loop"),
    ("requests: 4\n", "`requests` would size nothing"),
    ("sweep: {points: 2}\n", "not at rates probes choose"),
])
def test_trace_matrix_refuses_what_does_not_apply(tmp_path: Path, extra: str, says: str) -> None:
    m = setup(tmp_path, extra=extra)
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_trace_beside_rates_keys_each_workload_by_its_own_levels(tmp_path: Path) -> None:
    from toolkit.bench.plan import plan_run
    from toolkit.specs import load_spec

    m = setup(tmp_path, speed="[1, 2]")
    m.write_text(m.read_text().replace("  - {trace:", "  - coding\n  - {trace:") + "rates: [0.5]\nrequests: 3\n")
    plan = plan_run(load_spec(m))
    times = [r["timestamp"] for r in (json.loads(x) for x in (m.parent / "traces" / "small.jsonl").open())]
    times = [t - times[0] for t in times]
    rates = [offered_rate(times, 1.0), offered_rate(times, 2.0)]
    cells = [(c.domain, c.rate) for c in plan.todo["baseline"]]
    assert cells == [("coding", 0.5), ("small", rates[0]), ("small", rates[1])]
    assert plan.cells_planned == 6
    cell = plan.todo["baseline"][2]
    load = plan.load(cell)
    assert load.arrivals == pytest.approx(tuple(t / 2.0 for t in times)) and load.requests == N
    assert [p.id for p in plan.prompts(cell)] == [f"t{i}" for i in range(N)]
    assert plan.prompts(cell)[3].target_output_len == 6  # no output_length in the trace: output_len


# -- end to end on the embedded engine

@pytest.mark.slow
def test_trace_replays_in_a_matrix_on_the_embedded_engine(tmp_path: Path) -> None:
    m = setup(tmp_path)
    rows = [json.loads(x) for x in (m.parent / "traces" / "small.jsonl").open()]
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"), "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    times = [x["timestamp"] - rows[0]["timestamp"] for x in rows]
    rate = offered_rate(times, SPEED)
    q = "q" + f"{rate:g}".replace(".", "p")
    assert sorted(p.name for p in compact.glob(run / "cells", "*.json")) == [f"{a}__small__{q}__r0.json"
                                                                     for a in ("baseline", "ngram")]
    from toolkit.results.archive import open_archive

    arch = open_archive(run)
    bound = late_bound_ms(rate)
    for c in arch.cells:
        assert c.status == "ok" and c.rate == rate and c.n_requests == N, c
        assert (c.arrival.process, c.arrival.speed, c.arrival.requests) == ("trace", SPEED, N)
        recs = sorted((x for x in arch.iter_records(c.key) if not x.warmup), key=lambda x: int(x.prompt_id[1:]))
        assert [x.prompt_id for x in recs] == [f"t{i}" for i in range(N)]  # request i is trace line i, every arm
        # the stated error: each request's send time, from the first's, against the trace's / speed
        err = np.abs([(x.send_s - recs[0].send_s) * 1000 - t / SPEED * 1000 for x, t in zip(recs, times)])
        assert float(np.percentile(err, 99)) <= bound, (err, bound)
        assert c.lag_p99_ms is not None and c.lag_p99_ms <= bound and "late" not in [k.check for k in c.checks]
        # each request asked for its own output length (max tokens); the dummy model may stop sooner
        assert all(x.output_tokens <= (row.get("output_length") or 6) for x, row in zip(recs, rows))
    files = {f.ref: f for f in arch.manifest.inputs.files}
    trace_in = files["matrix:workloads[0].trace"]
    assert trace_in.role == "workload" and trace_in.archived
    assert (run / "inputs" / "files" / trace_in.path).read_bytes() == (m.parent / "traces" / "small.jsonl").read_bytes()
    assert run_cli("results", "verify", str(run)).returncode == 0
    sp = arch.derived.speedups
    assert len(sp) == 1 and sp[0].arm == "ngram" and sp[0].domain == "small" and sp[0].n_pairs == N
    show = run_cli("results", "show", str(run))
    assert show.returncode == 0 and "small" in show.stdout and "trace" in show.stdout, show.stdout


def test_the_workload_hash_covers_the_times_and_tune_refuses_a_trace(tmp_path: Path) -> None:
    from toolkit.errors import ToolkitError
    from toolkit.specs import load_spec
    from toolkit.specs.matrix import Workload
    from toolkit.tune.space import check_space
    from toolkit.bench.plan import load_environment
    from toolkit.workloads import load_workload

    m = setup(tmp_path)
    trace = m.parent / "traces" / "small.jsonl"
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.results.envdiff import env_diff

    ref = Workload(trace="traces/small.jsonl")
    before = load_workload(ref, base_dir=m.parent, seed=0)
    was = run_manifest(plan_run(load_spec(m)), {})
    rows = [json.loads(x) for x in trace.open()]
    rows[5]["timestamp"] += 0.01  # only a time changes: the same prompts, another schedule
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    after = load_workload(ref, base_dir=m.parent, seed=0)
    assert before.name == "small" and [p.prompt for p in before.prompts] == [p.prompt for p in after.prompts]
    assert before.hash != after.hash
    rows = [r for r in env_diff(was, run_manifest(plan_run(load_spec(m)), {})) if r["section"] == "workloads"]
    assert [r["field"] for r in rows] == ["small"] and rows[0]["a"] != rows[0]["b"]  # the env diff shows it
    m.write_text(m.read_text() + "tune: {space: {ngram: {prompt_lookup_num_tokens: [2, 4]}}}\n")
    spec = load_spec(m)
    with pytest.raises(ToolkitError, match="replays traces"):
        check_space(spec, load_environment(spec), "ngram")
