"""Where one load-generator process spends its CPU per streamed chunk, and where a request's time goes
before its first chunk is recorded: the client in this process (one event loop, as one worker), the
schedule server (benchmarks/loadgen_server.py) in others.

    python benchmarks/loadgen_profile.py                       # full speed: C=64, 512 chunks, 3 rounds
    python benchmarks/loadgen_profile.py --itl-ms 5 --ttft-ms 20 -c 150 -t 128   # realistic: ~1 chunk a read
    python benchmarks/loadgen_profile.py --profile 25          # + cProfile, the 25 costliest functions
    python benchmarks/loadgen_profile.py --trace --ttft-ms 40 --itl-ms 8 -c 64 -n 394 -t 64 [--tree DIR]

Prints client CPU (user+sys of this process, getrusage) per chunk for each round, and the median.

--trace: a per-stage timestamp trace of every request (one clock, CLOCK_MONOTONIC, in the client and
the server): the client's send, the request's arrival at the server's socket (its kernel timestamp),
the server's first write, the client's read callback for the read that carried the first chunk (how
many reads of other connections the loop took in between), the time the client recorded for it, and
the end of that read's parse. `--tree DIR` runs another checkout's client (e.g. main at 70e4ce2, from
`git archive`) in the same way, so two clients can be traced in one sitting.
"""

from __future__ import annotations

import argparse
import bisect
import cProfile
import json
import pstats
import resource
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen_trees import has_workers, run_tree_cell, share_module, tree_modules  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Trace:
    """Instruments the client of the imported tree: t0 of the cell (send_one's argument) and, per read,
    (read callback entry, the time recorded for the read, parse end). Wrapping costs a function call or
    two per read; none of it is between a read and the time recorded for it."""

    def __init__(self, loadgen, http) -> None:
        self.t0: float | None = None
        self.reads: list[tuple[float, float, float]] = []
        caller = share_module(loadgen)
        send_one, perf, log = caller.send_one, time.perf_counter, self.reads.append

        def first_t0(*a):
            if self.t0 is None:
                self.t0 = a[5]
            return send_one(*a)
        caller.send_one = first_t0
        if hasattr(http, "_Raw"):  # its own socket: the read callback is _readable, then received(data, time)
            entry = [0.0]
            readable, received = http._Raw._readable, http._Raw.received

            def at_entry(self, readable=readable):
                entry[0] = perf()
                readable(self)

            def traced(self, data, now, received=received):
                received(self, data, now)
                log((entry[0], now, perf()))
            http._Raw._readable, http._Raw.received = at_entry, traced
        else:  # a transport's data_received, which takes the read's time on entry (last_rx)
            data_received = http._Conn.data_received

            def traced_dr(self, data, data_received=data_received):
                at = perf()
                data_received(self, data)
                log((at, self.last_rx, perf()))
            http._Conn.data_received = traced_dr


def trace_report(tr: Trace, recs, stats: dict, c: int) -> str:
    """Per-stage figures over the requests after the first round (whose requests open connections)."""
    srv = {g: (a, w, t) for g, a, w, t in zip(stats["tags"], stats["arrival"], stats["first_write"], stats["ttft_ms"])}
    entries = sorted(r[0] for r in tr.reads)
    by_stamp = sorted(tr.reads, key=lambda r: r[1])
    stamps = [r[1] for r in by_stamp]
    rows: dict[str, list[float]] = {k: [] for k in ("send", "server", "recorded", "callback", "others", "parse",
                                                    "paired")}
    for r in sorted((r for r in recs if r.error is None and r.ttft_ms is not None), key=lambda r: r.send_s)[c:]:
        tag = "#" + r.prompt_id[1:]
        if tag not in srv:
            continue
        arrival, write, ttft = srv[tag]
        sent = tr.t0 + r.send_s
        first = sent + r.ttft_ms / 1000.0
        i = bisect.bisect_left(stamps, first)  # the read whose time the first chunk got (nearest: float rounding)
        i = min((k for k in (i - 1, i) if 0 <= k < len(stamps)), key=lambda k: abs(stamps[k] - first))
        entry, _, end = by_stamp[i]
        rows["send"].append((arrival - sent) * 1e3)
        rows["server"].append(ttft)
        rows["callback"].append((entry - write) * 1e3)
        rows["others"].append(bisect.bisect_left(entries, entry) - bisect.bisect_right(entries, write))
        rows["recorded"].append((first - write) * 1e3)
        rows["parse"].append((end - entry) * 1e3)
        rows["paired"].append(r.ttft_ms - ttft)

    def q(v, fmt="{:+8.3f}"):
        v = sorted(v)
        return " ".join(fmt.format(v[int(p * (len(v) - 1))]) for p in (0.5, 0.9, 0.99)) if v else "-"
    return "\n".join([
        f"per request after the first round (n={len(rows['send'])}), ms:  p50      p90      p99",
        f"  client send -> arrival at the server's socket    {q(rows['send'])}",
        f"  arrival -> server's first write (its TTFT)       {q(rows['server'], '{:8.3f}')}",
        f"  first write -> client's read callback            {q(rows['callback'])}",
        f"    reads of other connections the loop took first {q(rows['others'], '{:8.0f}')}",
        f"  first write -> the time recorded for the chunk   {q(rows['recorded'])}",
        f"  read callback -> its parse done                  {q(rows['parse'])}",
        f"  client TTFT - server TTFT (paired)               {q(rows['paired'])}",
    ])


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
    ap.add_argument("--trace", action="store_true", help="per-stage timestamps of every request (see above)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose client runs (default: this one)")
    ap.add_argument("--usage", action="store_true", help="per-chunk usage in every chunk (the server's --always-usage)")
    a = ap.parse_args()
    sys.path.insert(0, str(a.tree.resolve()))
    loadgen, http = tree_modules()
    try:
        from toolkit.schema.records import Prompt
    except ImportError:  # a tree from before toolkit/schema
        from toolkit.bench.records import Prompt
    sys.path.insert(0, str(ROOT))  # the launcher of this checkout (a tree may be only its toolkit/)
    from toolkit.serve import ProcessLauncher, free_port  # noqa: E402

    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="loadgen-profile-"))
    servers = []
    for i in range(a.server_procs):
        sp = free_port()
        cmd = [sys.executable, str(ROOT / "benchmarks" / "loadgen_server.py"), "--port", str(port), "--reuse-port",
               "--stats-port", str(sp), "--ttft-ms", str(a.ttft_ms), "--itl-ms", str(a.itl_ms)]
        cmd += ["--always-usage"] if a.usage or not a.trace else []
        cmd += ["--vary", "0.5"] if not a.trace else []
        servers.append(ProcessLauncher(cmd, log_path=tmp / f"srv{i}.log", port=sp))
    try:
        for srv in servers:
            srv.wait_healthy(60)
        tagged = a.trace  # distinct prompts: the server's requests pair with the client's
        prompts = ([Prompt(id=f"p{i}", domain="d", prompt=f"hi #{i}") for i in range(a.requests)] if tagged else
                   [Prompt(id="p0", domain="d", prompt="hi")])
        url = f"http://127.0.0.1:{port}"
        kw = dict(concurrency=a.concurrency, requests=a.requests, output_len=a.output_len, model="m")
        if a.trace:
            kw["request_params"] = {"stream_options": None, "temperature": None}  # the CLI's plain body
        if has_workers(loadgen):
            kw["workers"] = 1
        per_chunk = []
        prof = None
        for r in range(a.rounds):
            tr = Trace(loadgen, http) if a.trace and r == a.rounds - 1 else None
            for srv in servers:
                urllib.request.urlopen(srv.base_url + "/reset", timeout=10).read()
            if a.profile and r == a.rounds - 1:
                prof = cProfile.Profile(time.process_time)  # CPU time: a wait in epoll costs nothing
                prof.enable()
            c0, w0 = cpu(), time.perf_counter()
            recs = run_tree_cell(loadgen, url, "chat", prompts, **kw)
            c1, w1 = cpu(), time.perf_counter()
            if prof is not None:
                prof.disable()
            chunks = sum(len(x.chunk_ms) for x in recs)
            errors = sum(x.error is not None for x in recs)
            per_chunk.append((c1 - c0) / chunks * 1e6)
            print(f"round {r}: {chunks} chunks in {w1 - w0:.2f} s ({chunks / (w1 - w0):.0f}/s), "
                  f"{per_chunk[-1]:.2f} us/chunk{' (profiled)' if prof is not None else ''}"
                  f"{' (traced)' if tr is not None else ''}, errors {errors}", flush=True)
        plain = per_chunk[:-1] if (prof is not None or a.trace) and len(per_chunk) > 1 else per_chunk
        print(f"median {statistics.median(plain):.2f} us/chunk (unprofiled, untraced rounds)")
        if prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)
        if a.trace:
            (srv,) = servers  # one server process: its stats pair with the records
            stats = json.loads(urllib.request.urlopen(srv.base_url + "/stats", timeout=30).read())
            print(f"trace of {a.tree}: C={a.concurrency}, {a.requests} requests, server {a.ttft_ms:g} ms to the first "
                  f"chunk then {a.itl_ms:g} ms gaps, {a.output_len} chunks")
            print(trace_report(tr, recs, stats, a.concurrency))
    finally:
        for srv in servers:
            srv.stop()


if __name__ == "__main__":
    main()
