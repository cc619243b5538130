"""Diff speed and archive size: two archives of N requests each (default 1M), written by the real
ArchiveWriter, then `diff_runs` over every metric, and the `toolkit results diff` command end to end.

    .venv/bin/python benchmarks/diff_speed.py [--requests 1000000] [--tokens 32] [--keep DIR]

Prints seconds for the diff (goal: < 5 s for 1M vs 1M), bytes per request on disk by file kind, and
what the same records would cost in other encodings (measured on one cell).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.schema.records import RequestRecord  # noqa: E402
from toolkit.results.archive import ArchiveWriter, cell_key, open_archive  # noqa: E402
from toolkit.schema.columns import columns_from_records  # noqa: E402
from toolkit.results.diff import diff_runs  # noqa: E402
from toolkit.results.records import records_path  # noqa: E402
from tests.synthetic import manifest_for, summarize  # noqa: E402

ARMS = {"baseline": ["python", "-m", "sglang.launch_server", "--tp", "8"],
        "eagle3": ["python", "-m", "sglang.launch_server", "--tp", "8", "--speculative-algorithm", "EAGLE3"]}
DOMAINS = ("chat", "code", "math", "rag")
CONCURRENCY = (1, 8, 32, 64)


def cell_records(rng, arm, domain, conc, n, tokens, slowdown) -> list[RequestRecord]:
    """Vectorised generation: one chunk per token, log-normal TTFT and gaps (as a streaming server)."""
    ttft = rng.lognormal(np.log((40 + 2 * conc) * slowdown), 0.25, n)
    gaps = rng.lognormal(np.log((4 + 0.1 * conc) * slowdown), 0.3, (n, tokens - 1))
    chunks = np.round(np.concatenate([ttft[:, None], ttft[:, None] + np.cumsum(gaps, axis=1)], axis=1), 3)
    inp = rng.integers(20, 2000, n)
    acc = np.round(rng.normal(3.0, 0.3, n), 3) if arm != "baseline" else None
    ones = [1] * tokens
    recs = []
    for i in range(n):
        ch = chunks[i].tolist()
        recs.append(RequestRecord.model_construct(
            arm=arm, domain=domain, concurrency=conc, repeat=0, prompt_id=f"{domain}-{i}", warmup=False,
            send_s=round(i / conc * 0.3, 4), ttft_ms=ch[0], e2e_ms=round(ch[-1] + 0.4, 3), input_tokens=int(inp[i]),
            output_tokens=tokens, chunk_ms=ch, chunk_tokens=ones, tokens_source="usage", finish_reason="length",
            error=None, status=200, spec_verify_ct=None, accept_length=None if acc is None else float(acc[i])))
    return recs


def write_archive(root: Path, seed: int, n_total: int, tokens: int, slowdown: float) -> Path:
    rng = np.random.default_rng(seed)
    cells = [(a, d, c) for a in ARMS for d in DOMAINS for c in CONCURRENCY]
    per = n_total // len(cells)
    w = ArchiveWriter.create(root, "diffspeed", manifest_for(ARMS))
    sampling = {"api": "chat", "temperature": 0.0, "output_len": tokens, "seed": 0, "warmup": 0}
    for arm, d, c in cells:
        recs = cell_records(rng, arm, d, c, per, tokens, slowdown if arm == "eagle3" else 1.0)
        w.write_cell(summarize(recs, output_len=tokens, workload_hash=d * 8, sampling=sampling), recs)
    w.finalize("complete", derived={}, report_md="# diff speed\n")
    return w.path


def sizes(run: Path, n: int) -> dict[str, float]:
    kinds = {"records": 0, "npz": 0, "other": 0}  # records: .jsonl.gz, or .rec.xz once finalized
    for p in run.rglob("*"):
        if p.is_file():
            k = ("records" if p.name.endswith((".jsonl.gz", ".rec.xz")) else "npz"
                 if p.name.endswith((".npz", ".npz.gz")) else "other")
            kinds[k] += p.stat().st_size
    return {k: v / n for k, v in kinds.items()} | {"total": sum(kinds.values()) / n}


def alternatives(run: Path) -> list[tuple[str, float, float]]:
    """(encoding, bytes/request, seconds to read one cell's numbers back) on one cell."""
    a = open_archive(run)
    key = cell_key("baseline", "chat", 8)
    recs = list(a.iter_records(key))
    n = len(recs)
    lines = b"".join(r.model_dump_json(exclude_defaults=True).encode() + b"\n" for r in recs)
    out = []
    for level in (1, 6, 9):
        blob = gzip.compress(lines, compresslevel=level, mtime=0)
        t = time.perf_counter()
        for line in gzip.decompress(blob).splitlines():
            json.loads(line)
        out.append((f"JSON lines, gzip -{level} (per-request records)", len(blob) / n, time.perf_counter() - t))
    t = time.perf_counter()
    columns_from_records(list(a.iter_records(key)))
    out.append(("records as stored + pydantic + derive columns (diff without .npz)",
                records_path(run / "cells", key).stat().st_size / n, time.perf_counter() - t))
    cols = columns_from_records(recs)
    for name, save, gz in (("npz (numpy columns, uncompressed; a run being written)", np.savez, False),
                           ("npz compressed (np.savez_compressed)", np.savez_compressed, False),
                           ("npz, gzip -9 (.npz.gz: a finished run, what diff reads)", np.savez, True)):
        buf = io.BytesIO()
        save(buf, **cols)
        raw = gzip.compress(buf.getvalue(), compresslevel=9, mtime=0) if gz else buf.getvalue()
        t = time.perf_counter()
        with np.load(io.BytesIO(gzip.decompress(raw) if gz else raw)) as z:
            {k: z[k] for k in z.files}
        out.append((name, len(raw) / n, time.perf_counter() - t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests per archive")
    ap.add_argument("--tokens", type=int, default=32, help="output tokens (= streamed chunks) per request")
    ap.add_argument("--keep", type=Path, help="write the archives here and keep them (a later run with the same "
                                              "--keep reuses them)")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="diffspeed-"))
    try:
        t = time.perf_counter()
        existing = sorted(root.glob("diffspeed/*/SHA256SUMS"))
        if args.keep and len(existing) == 2:  # reuse the archives a previous --keep run left
            a, b = (p.parent for p in existing)
            if open_archive(a).manifest.started_at > open_archive(b).manifest.started_at:
                a, b = b, a
            print(f"reusing the archives in {root}")
        else:
            with ProcessPoolExecutor(2) as pool:  # the two archives side by side (2 cores)
                fa = pool.submit(write_archive, root, 1, args.requests, args.tokens, 1.0)
                fb = pool.submit(write_archive, root, 2, args.requests, args.tokens, 1.03)
                a, b = fa.result(), fb.result()
            print(f"wrote 2 archives ({args.tokens} streamed tokens per request, 32 cells) in "
                  f"{time.perf_counter() - t:.1f} s")
        n = sum(c.n_requests for c in open_archive(a).cells)

        t = time.perf_counter()
        result = diff_runs(open_archive(a), open_archive(b))
        lib_s = time.perf_counter() - t
        worse = sum(m.verdict == "worse" for c in result.cells for m in c.metrics.values())
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "toolkit.cli", "results", "diff", str(a), str(b)],
                              capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
        cli_s = time.perf_counter() - t
        print(f"\ndiff {n:,} vs {n:,} requests, {len(result.metrics)} metrics, 32 cells "
              f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}):")
        print(f"  library diff_runs           {lib_s:6.2f} s   (goal < 5 s; {worse} cell-metrics flagged worse, "
              f"the 3% slowdown of eagle3)")
        print(f"  `toolkit results diff` CLI  {cli_s:6.2f} s   (exit {proc.returncode}, incl. interpreter start)")

        print("\nbytes per request on disk (archive A):")
        for k, v in sizes(a, n).items():
            print(f"  {k:10s} {v:8.1f}")
        print(f"  ({sizes(a, n)['records'] / args.tokens:.2f} bytes per output token in the records)")

        print("\nencodings of one cell (baseline chat c=8):")
        print(f"  {'encoding':68s} {'B/request':>10s} {'read s':>8s}")
        for name, bpr, secs in alternatives(a):
            print(f"  {name:68s} {bpr:10.1f} {secs:8.3f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
