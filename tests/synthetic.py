"""Seeded synthetic runs written through the real ArchiveWriter (tests, benchmarks/diff_speed.py).

Latencies are log-normal around set medians; `slowdown` multiplies TTFT and every token gap, so a
known change can be injected and must be found by the diff with the right sign.

Two levels of noise, as on real hardware (docs/results.md#launch-noise): within a server launch every
request varies (the log-normal spread above), and between launches every latency of a cell moves by a
launch factor exp(lambda_arm,launch + eps_arm,cell,launch), lambda shared by the arm's cells and eps the
cell's own, with total sd `launch_cv` on the log scale (`launch_shared` of the variance shared). `launches`
writes that many launches per arm (cell keys `...__l<launch>`); `launch_effects` and `two_level` are the
same model as numbers only, for the thousands of simulated comparisons the acceptance tests need.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.results.archive import ArchiveWriter


def launch_effects(rng: np.random.Generator, cells: list, launches: int, cv: float, shared: float) -> dict:
    """(cell, launch) -> the launch factor of that cell's latencies: exp(lambda_launch + eps_cell,launch), sd of
    the sum `cv`, `shared` of its variance common to every cell (one arm: one server per launch)."""
    lam = rng.normal(0.0, cv * np.sqrt(shared), launches)
    return {(c, la): float(np.exp(lam[la] + rng.normal(0.0, cv * np.sqrt(1 - shared)))) for c in cells
            for la in range(launches)}


def two_level(rng: np.random.Generator, *, cells: int, launches: int, cv: float, shared: float = 0.5,
              n: int = 200, sigma: float = 0.25, median: float = 50.0, shift: float = 1.0) -> dict:
    """One arm of one run as numbers: cell -> launch -> the per-request latencies (log-normal, sd `sigma` of
    the log within a launch) around median x shift x the launch factor."""
    eff = launch_effects(rng, list(range(cells)), launches, cv, shared)
    return {c: {la: median * shift * eff[(c, la)] * rng.lognormal(0.0, sigma, n) for la in range(launches)}
            for c in range(cells)}


def make_records(rng: np.random.Generator, *, arm: str, domain: str, concurrency: int, repeat: int, n: int,
                 output_len: int = 32, ttft_ms: float = 50.0, itl_ms: float = 5.0, slowdown: float = 1.0,
                 accept: float | None = None, warmup: int = 2, chunk_every: int = 1,
                 launch: int = 0) -> list[RequestRecord]:
    recs = []
    for i in range(n + warmup):
        t = float(rng.lognormal(np.log(ttft_ms * slowdown), 0.25))
        toks = int(rng.integers(max(output_len // 2, 2), output_len + 1))
        n_chunks = max(toks // chunk_every, 1)
        gaps = rng.lognormal(np.log(itl_ms * slowdown * chunk_every), 0.3, size=n_chunks - 1)
        chunk_ms = np.concatenate([[t], t + np.cumsum(gaps)]).round(3).tolist()
        per = [chunk_every] * n_chunks
        per[-1] += toks - chunk_every * n_chunks
        acc = None if accept is None else round(float(rng.normal(accept, 0.3)), 3)
        recs.append(RequestRecord(
            arm=arm, domain=domain, concurrency=concurrency, repeat=repeat, launch=launch,
            prompt_id=f"{domain}-{i % 97}",
            warmup=i < warmup, send_s=round((i // concurrency) * (ttft_ms + itl_ms * output_len) * slowdown / 1000, 4), ttft_ms=round(t, 3), e2e_ms=round(chunk_ms[-1] + 0.5, 3),
            input_tokens=int(rng.integers(20, 200)), output_tokens=toks, chunk_ms=chunk_ms, chunk_tokens=per,
            tokens_source="usage", finish_reason="length", status=200,
            accept_length=acc, spec_verify_ct=None if acc is None else max(1, round(toks / acc))))
    return recs


def summarize(recs: list[RequestRecord], *, output_len: int, workload_hash: str, sampling: dict) -> CellSummary:
    from toolkit.schema.metrics import cell_stats

    r0 = recs[0]
    metrics, duration = cell_stats(recs)
    return CellSummary(arm=r0.arm, domain=r0.domain, concurrency=r0.concurrency, repeat=r0.repeat, launch=r0.launch,
                       output_len=output_len, workload_hash=workload_hash, sampling=sampling,
                       n_requests=len([r for r in recs if not r.warmup]), duration_s=duration, metrics=metrics)


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
              temperature: float = 0.0, status: str = "complete", chunk_every: int = 1, launches: int = 1,
              launch_cv: float = 0.0, launch_shared: float = 0.5, env_hash: str | None = None,
              purpose: str | None = None) -> Path:
    """One run with a baseline and a speculative arm; `slowdown[arm]` scales that arm's latencies. With
    `launches` > 1 (or a `launch_cv`), each arm's cells are written once per launch, moved by launch factors
    (launch_effects, drawn from their own seeded generator: the requests are the ones a single launch gets)."""
    arms = arms or {"baseline": ["python", "-m", "sglang.launch_server", "--tp", "8"],
                    "eagle3": ["python", "-m", "sglang.launch_server", "--tp", "8", "--speculative-algorithm", "EAGLE3"]}
    rng = np.random.default_rng(seed)
    lrng = np.random.default_rng([seed, 7919])
    man = manifest or manifest_for(arms)
    if env_hash:
        man = {**man, "environment": {**man["environment"], "hash": env_hash}}
    if launches > 1 or purpose:
        man = {**man, "launches": launches, "purpose": purpose}
    w = ArchiveWriter.create(root, name, man)
    sampling = {"api": "chat", "temperature": temperature, "output_len": output_len, "seed": 0, "warmup": 2}
    for arm in arms:
        cells = [(d, c) for d in domains for c in concurrency]
        effect = launch_effects(lrng, cells, launches, launch_cv, launch_shared) if launch_cv else {}
        for launch in range(launches):
            for d, c in cells:
                recs = make_records(rng, arm=arm, domain=d, concurrency=c, repeat=0, n=n, output_len=output_len,
                                    ttft_ms=40.0 + 3 * c, chunk_every=chunk_every, launch=launch,
                                    # speculation: faster decoding at low concurrency, slower at high
                                    itl_ms=(4.0 + 0.2 * c) * (1.0 if arm == "baseline" else 0.6 if c <= 4 else 1.1),
                                    slowdown=(slowdown or {}).get(arm, 1.0) * effect.get(((d, c), launch), 1.0),
                                    accept=(2.8 if d == "chat" else 3.4) if arm != "baseline" else None)
                w.write_cell(summarize(recs, output_len=output_len, workload_hash=("w" if d == "chat" else "c") * 64,
                                       sampling=sampling), recs)
    w.finalize(status, derived={}, report_md="# synthetic\n", compact=False)  # the plain form: tests edit it
    return w.path
