"""Seeded synthetic runs written through the real ArchiveWriter (tests, benchmarks/diff_speed.py).

Latencies are log-normal around set medians; `slowdown` multiplies TTFT and every token gap, so a
known change can be injected and must be found by the diff with the right sign.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolkit.schema.records import CellSummary, RequestRecord, Stat
from toolkit.results.archive import ArchiveWriter


def make_records(rng: np.random.Generator, *, arm: str, domain: str, concurrency: int, repeat: int, n: int,
                 output_len: int = 32, ttft_ms: float = 50.0, itl_ms: float = 5.0, slowdown: float = 1.0,
                 accept: float | None = None, warmup: int = 2, chunk_every: int = 1) -> list[RequestRecord]:
    recs = []
    for i in range(n + warmup):
        t = float(rng.lognormal(np.log(ttft_ms * slowdown), 0.25))
        toks = int(rng.integers(max(output_len // 2, 2), output_len + 1))
        n_chunks = max(toks // chunk_every, 1)
        gaps = rng.lognormal(np.log(itl_ms * slowdown * chunk_every), 0.3, size=n_chunks - 1)
        chunk_ms = np.concatenate([[t], t + np.cumsum(gaps)]).round(3).tolist()
        per = [chunk_every] * n_chunks
        per[-1] += toks - chunk_every * n_chunks
        recs.append(RequestRecord(
            arm=arm, domain=domain, concurrency=concurrency, repeat=repeat, prompt_id=f"{domain}-{i % 97}",
            warmup=i < warmup, send_s=round((i // concurrency) * (ttft_ms + itl_ms * output_len) * slowdown / 1000, 4), ttft_ms=round(t, 3), e2e_ms=round(chunk_ms[-1] + 0.5, 3),
            input_tokens=int(rng.integers(20, 200)), output_tokens=toks, chunk_ms=chunk_ms, chunk_tokens=per,
            tokens_source="usage", finish_reason="length", status=200,
            accept_length=None if accept is None else round(float(rng.normal(accept, 0.3)), 3)))
    return recs


def summarize(recs: list[RequestRecord], *, output_len: int, workload_hash: str, sampling: dict) -> CellSummary:
    from toolkit.schema.columns import columns_from_records

    r0 = recs[0]
    cols = columns_from_records(recs)
    metrics = {}
    for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "accept_length"):
        x = cols[m][np.isfinite(cols[m])].astype(float)
        if len(x):
            p50, p90, p99 = np.percentile(x, [50, 90, 99])
            metrics[m] = Stat(mean=float(x.mean()), p50=float(p50), p90=float(p90), p99=float(p99), n=len(x),
                              unreliable=[p for p, need in (("p90", 10), ("p99", 100)) if len(x) < need])
    measured = [r for r in recs if not r.warmup]
    duration = max((r.send_s + r.e2e_ms / 1000 for r in measured), default=0) - min((r.send_s for r in measured),
                                                                                   default=0)
    tput = sum(r.output_tokens for r in measured) / duration if duration else None
    metrics["output_tok_s"] = Stat(mean=tput, p50=tput, n=1)
    metrics["request_s"] = Stat(mean=len(measured) / duration if duration else None, n=1)
    return CellSummary(arm=r0.arm, domain=r0.domain, concurrency=r0.concurrency, repeat=r0.repeat,
                       output_len=output_len, workload_hash=workload_hash, sampling=sampling,
                       n_requests=len(measured), duration_s=duration, metrics=metrics)


def manifest_for(arms: dict[str, list[str]], *, patch_sha: str = "a" * 64, image_id: str = "sha256:" + "1" * 64,
                 gpu: str = "NVIDIA RTX PRO 6000 Blackwell", driver: str = "580.82.07", cuda: str = "13.0") -> dict:
    """A manifest in the shape the matrix runner writes (toolkit/bench/plan.py run_manifest), argv per arm."""
    env = {"kind": "Environment", "name": "synthetic-env", "engine": "sglang", "cuda": cuda,
           "base_image": "nvidia/cuda:13.0.1-devel-ubuntu24.04",
           "sglang": {"version": "0.5.23", "patches": [{"path": "patches/threshold.patch", "sha256": patch_sha}]},
           "packages": [{"name": "torch", "version": "2.14.1"}]}
    gpu_fp = {"driver_version": driver, "cuda_version": cuda, "count": 8,
              "gpus": [{"index": i, "name": gpu, "uuid": f"GPU-{i:04d}"} for i in range(8)]}
    return {
        "toolkit": {"version": "0.1.0", "git_sha": "0" * 40},
        "matrix": {"name": "synthetic", "hash": "m" * 64,
                   "resolved": {"kind": "Matrix", "name": "synthetic", "arms": list(arms), "concurrency": [1, 8]}},
        "environment": {"name": "synthetic-env", "hash": "e" * 64, "resolved": env},
        "build": {"image_id": image_id, "labels": {"org.toolkit.env-hash": "e" * 64}},
        "arms": {a: {"command": argv, "preset": {}} for a, argv in arms.items()},
        "host": {"controller": {"hostname": "gpu-host-1", "kernel": "6.8.0", "cpu_count": 128,
                                "engines": {"sglang": "0.5.23"}, "gpu": gpu_fp}, "hosts": {}},
        "workloads": {"chat": {"hash": "w" * 64, "n_prompts": 97}, "code": {"hash": "c" * 64, "n_prompts": 97}},
    }


def write_run(root: Path, *, seed: int, n: int = 200, slowdown: dict[str, float] | None = None,
              domains=("chat", "code"), concurrency=(1, 8), arms: dict[str, list[str]] | None = None,
              output_len: int = 32, manifest: dict | None = None, name: str = "synthetic",
              temperature: float = 0.0, status: str = "complete", chunk_every: int = 1) -> Path:
    """One run with a baseline and a speculative arm; `slowdown[arm]` scales that arm's latencies."""
    arms = arms or {"baseline": ["python", "-m", "sglang.launch_server", "--tp", "8"],
                    "eagle3": ["python", "-m", "sglang.launch_server", "--tp", "8", "--speculative-algorithm", "EAGLE3"]}
    rng = np.random.default_rng(seed)
    w = ArchiveWriter.create(root, name, manifest or manifest_for(arms))
    sampling = {"api": "chat", "temperature": temperature, "output_len": output_len, "seed": 0, "warmup": 2}
    for arm in arms:
        for d in domains:
            for c in concurrency:
                recs = make_records(rng, arm=arm, domain=d, concurrency=c, repeat=0, n=n, output_len=output_len,
                                    ttft_ms=40.0 + 3 * c, chunk_every=chunk_every,
                                    # speculation: faster decoding at low concurrency, slower at high
                                    itl_ms=(4.0 + 0.2 * c) * (1.0 if arm == "baseline" else 0.6 if c <= 4 else 1.1),
                                    slowdown=(slowdown or {}).get(arm, 1.0),
                                    accept=(2.8 if d == "chat" else 3.4) if arm != "baseline" else None)
                w.write_cell(summarize(recs, output_len=output_len, workload_hash=("w" if d == "chat" else "c") * 64,
                                       sampling=sampling), recs)
    w.finalize(status, derived={}, report_md="# synthetic\n")
    return w.path
