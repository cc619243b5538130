"""Import a sglang.bench_serving JSON lines file and a `vllm bench serve` JSON, then diff them against
a native archive. The files carry exactly the fields those tools write (sglang bench_serving.py
`result` + `--output-details`; vllm benchmarks/serve.py `result_json` + `--save-detailed`)."""

from __future__ import annotations

import json

import numpy as np

from toolkit.results.archive import cell_key, open_archive
from toolkit.results.verify import verify_run
from toolkit.results.diff import diff_runs
from tests.synthetic import write_run

ARM = {"sglang": ["python", "-m", "sglang.launch_server", "--model-path", "m", "--api-key", "k-123"]}


def _details(run, slowdown: float = 1.0) -> dict:
    """Per-request lists (seconds) from a native run's records; latencies scaled by slowdown."""
    recs = [r for r in open_archive(run).iter_records(cell_key("sglang", "chat", 8)) if not r.warmup]
    return {
        "input_lens": [r.input_tokens for r in recs],
        "output_lens": [r.output_tokens for r in recs],
        "ttfts": [r.ttft_ms * slowdown / 1000 for r in recs],
        "itls": [list(np.diff(r.chunk_ms) * slowdown / 1000) for r in recs],
        "generated_texts": ["..." for _ in recs],
        "errors": ["" for _ in recs],
    }


def _aggregates(d: dict, stem_e2e: str) -> dict:
    ttft = np.array(d["ttfts"]) * 1000
    itl = np.concatenate([np.array(x) * 1000 for x in d["itls"]])
    e2e = ttft + np.array([sum(x) * 1000 for x in d["itls"]])
    out = {"completed": len(ttft), "duration": float(e2e.sum() / 8 / 1000),
           "total_input_tokens": sum(d["input_lens"]), "total_output_tokens": sum(d["output_lens"])}
    out["request_throughput"] = out["completed"] / out["duration"]
    out["output_throughput"] = out["total_output_tokens"] / out["duration"]
    for name, x in (("ttft_ms", ttft), ("itl_ms", itl), (stem_e2e, e2e), ("tpot_ms", itl)):
        out.update({f"mean_{name}": float(x.mean()), f"median_{name}": float(np.median(x)),
                    f"std_{name}": float(x.std()), f"p99_{name}": float(np.percentile(x, 99))})
    return out


def sglang_line(details: dict | None, agg: dict) -> dict:
    line = {"tag": None, "backend": "sglang-oai-chat", "dataset_name": "random", "request_rate": float("inf"),
            "max_concurrency": 8, "sharegpt_output_len": None, "random_input_len": 128, "random_output_len": 32,
            "random_range_ratio": 0.0,
            "server_info": {"version": "0.5.23", "tp_size": 8, "speculative_algorithm": None,
                            "api_key": "k-123", "model_path": "m"},
            "total_input_text_tokens": agg["total_input_tokens"], "total_input_vision_tokens": 0,
            "total_output_tokens_retokenized": agg["total_output_tokens"], "input_throughput": 1.0,
            "total_throughput": 1.0, "p90_e2e_latency_ms": agg["p99_e2e_latency_ms"], "p95_itl_ms": agg["p99_itl_ms"],
            "concurrency": 7.6, "accept_length": None, "max_output_tokens_per_s": 1.0, "max_concurrent_requests": 8,
            **agg}
    return line | (details or {})


def vllm_doc(details: dict, agg: dict) -> dict:
    return {"date": "20261130-101500", "endpoint_type": "openai-chat", "backend": "openai-chat", "label": None,
            "model_id": "m", "tokenizer_id": "m", "num_prompts": agg["completed"], "request_rate": "inf",
            "burstiness": 1.0, "max_concurrency": 8, "failed": 0, "total_token_throughput": 1.0, **agg, **details}


def test_import_sglang_and_vllm_then_diff_against_native(tmp_path, cli):
    native = write_run(tmp_path, seed=1, n=200, arms=ARM, domains=("chat",), concurrency=(8,), name="native")
    other = write_run(tmp_path / "gen", seed=2, n=200, arms=ARM, domains=("chat",), concurrency=(8,))
    same, slow = _details(other), _details(other, slowdown=1.6)  # beyond the one-launch default floor (32 %)
    sg = tmp_path / "sglang.jsonl"
    sg.write_text(json.dumps(sglang_line(same, _aggregates(same, "e2e_latency_ms"))) + "\n")
    vl = tmp_path / "vllm.json"
    vl.write_text(json.dumps(vllm_doc(slow, _aggregates(slow, "e2el_ms"))))

    root = tmp_path / "results"
    res = cli("results", "import", str(sg), "--format", "sglang", "--root", str(root), "--arm", "sglang",
              "--domain", "chat", "--json")
    assert res.returncode == 0, res.stderr
    sg_run = json.loads(res.stdout)["run"]
    res = cli("results", "import", str(vl), "--format", "vllm", "--root", str(root), "--arm", "sglang",
              "--domain", "chat", "--output-len", "32", "--json")
    assert res.returncode == 0, res.stderr
    vl_run = json.loads(res.stdout)["run"]

    for run in (sg_run, vl_run):
        assert verify_run(run) == []
        a = open_archive(run)
        (cell,) = a.cells
        assert (cell.arm, cell.domain, cell.concurrency, cell.output_len) == ("sglang", "chat", 8, 32)
        assert cell.n_requests == 200 and len(a.columns(cell_key("sglang", "chat", 8))["ttft_ms"]) == 200
    sgm = open_archive(sg_run).manifest
    assert sgm.source.format == "sglang" and sgm.engine_versions == {"sglang": "0.5.23"}
    assert sgm.arms["sglang"].preset["api_key"] == "***"
    assert open_archive(vl_run).manifest.started_at.startswith("2026-11-30T10:15:00")

    r = diff_runs(open_archive(native), open_archive(sg_run))
    (c,) = r.cells
    assert c.comparable and any("workload identity unknown" in n for n in c.notes)
    # one launch a side (an import is one run of a server) and no calibration: within the floor, inconclusive
    assert c.metrics["ttft_ms"].verdict == "inconclusive" and c.metrics["tpot_ms"].verdict == "inconclusive"
    r = diff_runs(open_archive(native), open_archive(vl_run))
    (c,) = r.cells
    assert c.metrics["ttft_ms"].verdict == "worse" and 45 < c.metrics["ttft_ms"].delta_pct < 75
    assert c.metrics["e2e_ms"].verdict == "worse"
    res = cli("results", "diff", str(native), vl_run, "--fail-on-regression", "10")
    assert res.returncode == 1 and "sglang chat c=8 out=32 ttft_ms" in res.stderr
    env = res.stdout.split("Environment diff")[1]  # the environment diff names where B came from
    assert "source" in env and "vllm bench serve" in env and "8x NVIDIA RTX PRO 6000 Blackwell" in env


def test_summary_only_import_is_shown_but_not_tested(tmp_path, cli):
    native = write_run(tmp_path, seed=1, n=50, arms=ARM, domains=("chat",), concurrency=(8,))
    d = _details(native)
    sg = tmp_path / "sglang.jsonl"
    sg.write_text(json.dumps(sglang_line(None, _aggregates(d, "e2e_latency_ms"))) + "\n")
    res = cli("results", "import", str(sg), "--format", "sglang", "--root", str(tmp_path / "r"), "--arm", "sglang",
              "--domain", "chat", "--json")
    assert res.returncode == 0, res.stderr
    run = json.loads(res.stdout)["run"]
    r = diff_runs(open_archive(native), open_archive(run))
    m = r.cells[0].metrics["ttft_ms"]
    assert m.verdict == "no-samples" and m.p is None and m.b is not None
    assert cli("results", "diff", str(native), run, "--fail-on-regression", "1").returncode == 0
    rep = cli("results", "report", run, "--against", str(native), "-o", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    assert "| sglang chat c=8 out=32 | " in (tmp_path / "rep" / "report.md").read_text()


def test_import_refuses_a_file_of_the_wrong_format(tmp_path, cli):
    f = tmp_path / "x.json"
    f.write_text('{"hello": 1}')
    res = cli("results", "import", str(f), "--format", "vllm", "--root", str(tmp_path))
    assert res.returncode == 2 and "not a vllm serving benchmark result" in res.stderr


def test_sglang_file_of_several_runs_becomes_one_cell_each(tmp_path):
    from toolkit.results.importers import import_file

    native = write_run(tmp_path, seed=1, n=30, arms=ARM, domains=("chat",), concurrency=(8,))
    d = _details(native)
    lines = []
    for conc in (1, 8, 8):  # two runs at 8: repeats 0 and 1
        line = sglang_line(d, _aggregates(d, "e2e_latency_ms"))
        line["max_concurrency"] = conc
        lines.append(json.dumps(line))
    f = tmp_path / "sweep.jsonl"
    f.write_text("\n".join(lines) + "\n")
    run = import_file(f, "sglang", tmp_path / "r", arm="sglang", domain="chat")
    a = open_archive(run)
    assert sorted((c.concurrency, c.repeat) for c in a.cells) == [(1, 0), (8, 0), (8, 1)]
    r = diff_runs(open_archive(native), a)
    (c,) = r.cells  # repeats pooled: 30 native vs 60 imported requests at c=8
    assert (c.concurrency, c.metrics["ttft_ms"].a_n, c.metrics["ttft_ms"].b_n) == (8, 30, 60)
    assert r.only_b == ["sglang chat c=1 out=32"]
