"""Where one load-generator process spends its CPU per streamed chunk: the client in this process (one
event loop, as one worker), the schedule server (benchmarks/loadgen_server.py) in others.

    python benchmarks/loadgen_profile.py                       # full speed: C=64, 512 chunks, 3 rounds
    python benchmarks/loadgen_profile.py --itl-ms 5 --ttft-ms 20 -c 150 -t 128   # realistic: ~1 chunk a read
    python benchmarks/loadgen_profile.py --profile 25          # + cProfile, the 25 costliest functions

Prints client CPU (user+sys of this process, getrusage) per chunk for each round, and the median.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.loadgen import CellLoad, run, run_cell  # noqa: E402
from toolkit.schema.records import Prompt  # noqa: E402
from toolkit.serve import ProcessLauncher, free_port  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-c", "--concurrency", type=int, default=64)
    ap.add_argument("-n", "--requests", type=int, default=256)
    ap.add_argument("-t", "--output-len", type=int, default=512)
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--itl-ms", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-procs", type=int, default=1)
    ap.add_argument("--profile", type=int, default=0, help="cProfile (CPU time) the last round; print this many functions")
    a = ap.parse_args()
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="loadgen-profile-"))
    servers = []
    for i in range(a.server_procs):
        sp = free_port()
        srv = ProcessLauncher([sys.executable, str(ROOT / "benchmarks" / "loadgen_server.py"), "--port", str(port),
                               "--reuse-port", "--stats-port", str(sp), "--ttft-ms", str(a.ttft_ms), "--itl-ms",
                               str(a.itl_ms), "--always-usage", "--vary", "0.5"], log_path=tmp / f"srv{i}.log", port=sp)
        servers.append(srv)
    try:
        for srv in servers:
            srv.wait_healthy(60)
        prompts = [Prompt(id="p0", domain="d", prompt="hi")]
        url = f"http://127.0.0.1:{port}"
        per_chunk = []
        prof = None
        for r in range(a.rounds):
            if a.profile and r == a.rounds - 1:
                prof = cProfile.Profile(time.process_time)  # CPU time: a wait in epoll costs nothing
                prof.enable()
            c0, w0 = cpu(), time.perf_counter()
            recs = run(run_cell(url, CellLoad(concurrency=a.concurrency, requests=a.requests, output_len=a.output_len,
                                         workers=1), prompts, model="m"))
            c1, w1 = cpu(), time.perf_counter()
            if prof is not None:
                prof.disable()
            chunks = sum(len(x.chunk_ms) for x in recs)
            errors = sum(x.error is not None for x in recs)
            per_chunk.append((c1 - c0) / chunks * 1e6)
            print(f"round {r}: {chunks} chunks in {w1 - w0:.2f} s ({chunks / (w1 - w0):.0f}/s), "
                  f"{per_chunk[-1]:.2f} us/chunk{' (profiled)' if prof is not None else ''}, errors {errors}",
                  flush=True)
        plain = per_chunk[:-1] if prof is not None and len(per_chunk) > 1 else per_chunk
        print(f"median {statistics.median(plain):.2f} us/chunk (unprofiled rounds)")
        if prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)
    finally:
        for srv in servers:
            srv.stop()


if __name__ == "__main__":
    main()
