"""Worker processes, measured: sustained chunk rate, client CPU per chunk and timing fidelity of the load
generator with 1, 2, 4, 8 workers, side by side in one run with sglang.bench_serving and the raw
reference client, against a streaming server that records when it wrote each chunk
(benchmarks/loadgen_server.py: SGLang's chunk shape with per-chunk usage, batch-synchronous steps).

    python benchmarks/loadgen_workers.py --json out.json              # H200 host: 16 cores, ~5 min
    python benchmarks/loadgen_workers.py --quick                      # 2 cores: smaller, ~3 min
    ... --baseline ../main                                            # + another checkout's client (capacity)
    ... --solo                                                        # + N independent one-process clients

The server runs as `--server-procs` processes on one port (SO_REUSEPORT), so it is not the bottleneck
(its CPU use is printed). Every client runs as its own process.

1. Capacity: the server at full speed (no TTFT, a step per event-loop turn), C=512, 256-768 chunks per
   request (512 on average), every client the same requests (1024 x the largest worker count / 2:
   sglang.bench_serving's cost per chunk grows with the run's length, so unequal work is no comparison).
   Chunk rate = chunks / (first request's arrival -> last write), both read off the server.
   Client CPU is what its process tree used in that same window (sampled from /proc every 20 ms),
   so start-up and shutdown are left out alike for every client.
2. Fidelity sweep: TTFT 20 ms, a step every 5 ms, 64-192 chunks per request (128 on average, so
   that requests which started together do not end together), 4 rounds; concurrency raised by 1.25x a
   step (96 .. 2183), so the offered chunk rate goes from ~18k to ~400k/s. At each step a client is faithful when
   its TTFT p50 and its per-chunk-gap ITL p50 are within 1 ms of the server's own (first write -
   arrival, gaps between one request's writes). Arrival is when the request reached the server's
   socket (the kernel's receive timestamp), not when the server read it: a busy server reads late, and
   a client rightly counts that wait as TTFT (the server's read delay and the TTFT from the read, the
   earlier truth, are printed beside it). Our client sends distinct prompts ('hi #i') and writes its
   records, so its TTFT is also paired with the server's request by request (`paired`: what the
   client added to each request's TTFT). `allowed` is what the server's own timing allows C
   streams (the last round's drain keeps every client below it); a client's sweep stops after two
   unfaithful steps in a row, or below 60% of it. Its sustained chunk rate is the rate it carried
   (chunks / first arrival -> last write, read off the server) at its highest faithful step. CPU per chunk there is taken the same way as in part 1.

sglang.bench_serving runs from its wheel unpacked (--sglang DIR, deps in --sglang-deps; the shim
benchmarks/sglang_bench_shim.py stubs the server-side imports); without it that column is skipped
with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.serve import ProcessLauncher, free_port  # noqa: E402

PY = sys.executable
TMP = Path(tempfile.mkdtemp(prefix="loadgen-workers-"))
START = time.monotonic()
PEERS = ("ref", "sglang")
FIRST = ("ref", "sglang", "ours-1", "ours-4")  # the sweep's order: the peers and the acceptance figures first


class Farm:
    """`procs` server processes sharing one port; each has its own stats port for /stats and /reset."""

    def __init__(self, procs: int, ttft_ms: float, itl_ms: float, always_usage: bool = True, vary: float = 0.5):
        self.port = free_port()
        self.servers = []
        for i in range(procs):
            sp = free_port()
            cmd = [PY, str(ROOT / "benchmarks" / "loadgen_server.py"), "--port", str(self.port), "--reuse-port",
                   "--stats-port", str(sp), "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--vary", str(vary)]
            cmd += ["--always-usage"] if always_usage else []
            srv = ProcessLauncher(cmd, log_path=TMP / f"server-{self.port}-{i}.log", port=sp)
            srv.name = "schedule server"
            self.servers.append(srv)
        for srv in self.servers:
            srv.wait_healthy(60)
        self.url = f"http://127.0.0.1:{self.port}"

    def _get(self, path: str) -> list[dict]:
        return [json.loads(urllib.request.urlopen(s.base_url + path, timeout=30).read()) for s in self.servers]

    def reset(self) -> None:
        self._get("/reset")

    def stats(self) -> dict:
        parts = self._get("/stats")
        hist: dict[int, int] = {}
        for p in parts:
            for b, c in zip(p["gap_hist_us"]["bins"], p["gap_hist_us"]["counts"]):
                hist[b] = hist.get(b, 0) + c
        firsts = [p["first_arrival"] for p in parts if p["first_arrival"] is not None]
        lasts = [p["last_write"] for p in parts if p["last_write"] is not None]
        ttfts = [t for p in parts for t in p["ttft_ms"]]
        reads = [t for p in parts for t in p["ttft_read_ms"]]
        waits = sorted(a - b for a, b in zip(ttfts, reads))  # read - arrival: the server's own read delay
        span = (max(lasts) - min(firsts)) if firsts else 0.0
        med = lambda v: statistics.median(v) if v else None  # noqa: E731
        return {"requests": sum(p["requests"] for p in parts), "chunks": sum(p["chunks"] for p in parts),
                "span_s": span, "first": min(firsts) if firsts else None, "last": max(lasts) if lasts else None,
                "ttft_p50": med(ttfts), "ttft_p99": quantile(ttfts, 0.99), "itl_p99": _hist_quantile(hist, 0.99),
                "ttft_read_p50": med(reads), "wait_p50": med(waits),
                "read_arrivals": sum(p.get("read_arrivals", 0) for p in parts),
                "wait_p90": waits[int(0.9 * (len(waits) - 1))] if waits else None,
                "ttft_by_tag": {g: t for p in parts for g, t in zip(p["tags"], p["ttft_ms"]) if g},
                "itl_p50": _hist_median(hist), "cpu_s": sum(p["cpu_s"] for p in parts),
                "max_inflight_sum": sum(p["max_inflight"] for p in parts)}

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


def _hist_median(hist: dict[int, int]) -> float | None:
    return _hist_quantile(hist, 0.5)


def _hist_quantile(hist: dict[int, int], q: float) -> float | None:
    """The q-quantile (ms) of the server's 1-us gap histogram."""
    n = sum(hist.values())
    if not n:
        return None
    acc = 0
    for b in sorted(hist):
        acc += hist[b]
        if acc >= q * n:
            return (b + 0.5) / 1000.0  # 1-us bins -> ms
    return None


def quantile(values, q: float) -> float | None:
    """The q-quantile by rank (the lower of the two around it), the same for every client and the server."""
    v = sorted(values)
    return v[int(q * (len(v) - 1))] if v else None


# -- clients: command + parser of (ttft_p50 ms, itl_p50 ms) -----------------------------------------

def ours(workers: int, tree: Path = ROOT, pair: bool = True):
    """The load generator of `tree` (this one, or a baseline checkout). pair: distinct prompts ('hi #i')
    and every record written, so each request's TTFT pairs with the server's for the same request."""
    module = "toolkit.loadgen" if (tree / "toolkit" / "loadgen").is_dir() else "toolkit.bench.loadgen"  # older trees

    def make(url, c, n, t, d):
        cmd = [PY, "-m", module, url, "--concurrency", str(c), "--requests", str(n),
               "--output-len", str(t), "--workers", str(workers)]
        if pair:
            cmd += ["--prompts", str(n), "--records", str(d / "records.jsonl")]

        def parse(o):
            j = json.loads(o)
            per_req = None
            if pair:
                per_req = {}
                with open(d / "records.jsonl") as f:
                    for line in f:
                        r = json.loads(line)
                        if r["error"] is None and r["ttft_ms"] is not None:
                            per_req["#" + r["prompt_id"][1:]] = (r["ttft_ms"], r["send_s"])
            return j["metrics"]["ttft_ms"]["p50"], j["itl_chunk_p50"], per_req
        return cmd, parse
    make.tree = tree
    return make


SOLO = """import subprocess, sys
n, out, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
share = lambda total, w: total // n + (1 if w < total % n else 0)
c, r = int(cmd[cmd.index("--concurrency") + 1]), int(cmd[cmd.index("--requests") + 1])
procs = []
for w in range(n):
    argv = list(cmd)
    argv[argv.index("--concurrency") + 1], argv[argv.index("--requests") + 1] = str(share(c, w)), str(share(r, w))
    procs.append(subprocess.Popen(argv, stdout=open(f"{out}.{w}", "wb")))
codes = [p.wait() for p in procs]
sys.stdout.write(open(f"{out}.0").read())
sys.exit(max(codes))
"""


def solo(workers: int):
    """`workers` independent single-process clients started together, each with its share of the
    concurrency and the requests (as a worker's): what the same load costs without the worker machinery
    (shared counter, records shipped to a parent), on the same cores. ours-N / solo-N is that machinery."""
    inner = ours(1, pair=False)

    def make(url, c, n, t, d):
        cmd, parse = inner(url, c, n, t, d)
        return [PY, "-c", SOLO, str(workers), str(d / "solo-out"), *cmd], parse
    make.tree = ROOT
    return make


def ref(url, c, n, t, d):
    return [PY, str(ROOT / "benchmarks" / "reference_client.py"), url, str(c), str(n), str(t)], \
        lambda o: (json.loads(o)["ttft_p50"], json.loads(o)["itl_p50"], None)


def sglang_client(sgl_dir: Path, deps: Path, tokenizer: Path):
    def make(url, c, n, t, d):
        out = d / "sglang.jsonl"

        def parse(_):
            j = json.loads(out.read_text().splitlines()[-1])
            return j["median_ttft_ms"], j["median_itl_ms"], None, {"ttft_p99": j.get("p99_ttft_ms"),
                                                                  "itl_p99": j.get("p99_itl_ms")}
        return [PY, str(ROOT / "benchmarks" / "sglang_bench_shim.py"), str(sgl_dir), str(deps), "--", "--backend",
                "sglang-oai-chat", "--base-url", url, "--dataset-name", "random-ids", "--model", "m", "--tokenizer",
                str(tokenizer), "--num-prompts", str(n), "--max-concurrency", str(c), "--random-input-len", "16",
                "--random-output-len", str(t), "--random-range-ratio", "1.0", "--output-file", str(out),
                "--warmup-requests", "0", "--disable-tqdm"], parse
    return make


TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> tuple[float, float]:
    """CPU seconds (user+sys) of `root` and every live descendant, and of `root` alone, from /proc."""
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kids.setdefault(int(f[1]), []).append(int(d))
            cpu[int(d)] = (int(f[11]) + int(f[12])) / TICK
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += kids.get(pid, [])
    return total, cpu.get(root, 0.0)


def window_cpu(samples: list[tuple[float, float]], a: float, b: float) -> float:
    """CPU used between perf_counter times a and b, interpolated from (time, cumulative CPU) samples."""
    def at(t: float) -> float:
        prev = samples[0]
        for cur in samples:
            if cur[0] >= t:
                span = cur[0] - prev[0]
                return prev[1] + (cur[1] - prev[1]) * ((t - prev[0]) / span if span else 1.0)
            prev = cur
        return samples[-1][1]
    return at(b) - at(a)


def run_client(name: str, make, farm: Farm, c: int, n: int, t: int) -> dict:
    """One client run; its CPU is what its process tree used while the server streamed (first request's
    arrival -> last write), sampled from /proc every 20 ms: start-up and shutdown left out alike."""
    d = TMP / f"{name}-c{c}-n{n}-{time.monotonic_ns()}"
    d.mkdir()
    cmd, parse = make(farm.url, c, n, t, d)
    env = dict(os.environ, NO_COLOR="1", HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(getattr(make, "tree", ROOT)), os.environ.get("PYTHONPATH")) if p))
    farm.reset()
    t0 = time.time()
    out, err = open(d / "stdout", "w+b"), open(d / "stderr", "w+b")
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=d)
    samples = []
    while p.poll() is None:
        samples.append((time.perf_counter(), tree_cpu(p.pid)))
        if time.time() - t0 > 300:
            p.kill()
        time.sleep(0.02)
    wall = time.time() - t0
    out.seek(0), err.seek(0)
    stdout, stderr = out.read(), err.read()
    if p.returncode:
        raise RuntimeError(f"{name} failed ({p.returncode}): {(stderr or stdout).decode(errors='replace')[-800:]}")
    lines = [ln for ln in stdout.decode().splitlines() if ln.startswith("{")]
    ttft, itl, per_req, *extra = parse(lines[-1] if lines else "")  # extra: a dict of more figures
    s = farm.stats()
    cpu = root_cpu = float("nan")
    if samples and s["first"]:
        cpu = window_cpu([(t, c[0]) for t, c in samples], s["first"], s["last"])
        root_cpu = window_cpu([(t, c[1]) for t, c in samples], s["first"], s["last"])
    paired = None
    if per_req:  # client TTFT - server TTFT, request by request: what the client added. The first round
        # (the first c sent) opens its connections, which the client's clock includes and the server's
        # cannot; the figures are over the later requests, on kept-alive connections.
        later = sorted(per_req.items(), key=lambda kv: kv[1][1])[c:]
        diffs = sorted(v[0] - s["ttft_by_tag"][k] for k, v in later if k in s["ttft_by_tag"])
        if diffs:
            paired = {"n": len(diffs), "p50": statistics.median(diffs), "p90": diffs[int(0.9 * (len(diffs) - 1))],
                      "p99": diffs[int(0.99 * (len(diffs) - 1))]}
    del s["ttft_by_tag"]
    return {"ttft": ttft, "itl": itl, "wall": wall, "cpu": cpu, "root_cpu": root_cpu, "server": s, "paired": paired,
            **(extra[0] if extra else {})}


def capacity(clients: dict, farm: Farm, c: int, t: int, base_n: int, log, equal: bool = True) -> dict:
    """equal: every client runs the same requests (the most any needs: base_n x workers // 2), because a
    client's cost per chunk may depend on the run's length (sglang.bench_serving's grows with it); else
    each runs base_n x its own workers // 2 (before 2026-12-05: the peers ran half of ours-4's requests)."""
    rows = {}
    most = max(max(1, w // 2) for _, w in clients.values())
    for name, (make, workers) in clients.items():
        n = base_n * (most if equal else max(1, workers // 2))
        try:
            big = run_client(name, make, farm, c, n, t)
        except (RuntimeError, OSError, KeyError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
            log(f"capacity {name}: FAILED {exc}")
            rows[name] = {"error": str(exc)[:400]}
            continue
        s = big["server"]
        rate = s["chunks"] / s["span_s"] if s["span_s"] else 0.0
        cpu_chunk = big["cpu"] / max(1, s["chunks"])
        rows[name] = {"chunk_rate": rate, "cpu_us_per_chunk": cpu_chunk * 1e6, "chunks": s["chunks"], "requests": n,
                      "span_s": s["span_s"], "server_cpu_util": s["cpu_s"] / s["span_s"] / len(farm.servers),
                      "client_cpu_s": big["cpu"], "client_cores": big["cpu"] / s["span_s"], "wall_s": big["wall"],
                      # a parent of workers (solo-N's is only a launcher): its own share
                      "parent_us_per_chunk": big["root_cpu"] / max(1, s["chunks"]) * 1e6
                      if workers > 1 and name[:5] in ("ours-", "base-") else None}
        log(f"capacity {name:8} {rate:9.0f} chunks/s  {cpu_chunk * 1e6:5.2f} us/chunk  client {rows[name]['client_cores']:.2f}"
            f" cores  server CPU {rows[name]['server_cpu_util']:.0%} per process" +
            (f"  (parent {rows[name]['parent_us_per_chunk']:.2f} us/chunk)"
             if rows[name]["parent_us_per_chunk"] is not None else ""))
    return rows


def sweep(clients: dict, farm: Farm, steps: list[int], t: int, rounds: int, deadline: float, log,
          extra_from: int = 0) -> dict:
    out: dict[str, list] = {name: [] for name in clients}
    # the peers and the acceptance figures first, should the time budget run out
    order = sorted(clients, key=lambda k: FIRST.index(k) if k in FIRST else len(FIRST))
    for name in order:
        make = clients[name][0]
        misses = 0
        for c in steps:
            if name not in FIRST and c < extra_from:  # the other worker counts: from where it gets interesting
                continue
            if time.monotonic() > deadline:
                log(f"sweep {name}: out of time at C={c}")
                break
            try:
                r = run_client(name, make, farm, c, rounds * c, t)
            except (RuntimeError, OSError, KeyError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
                log(f"sweep {name} C={c}: FAILED {exc}")
                out[name].append({"c": c, "error": str(exc)[:400]})
                break
            s = r["server"]
            carried = s["chunks"] / s["span_s"] if s["span_s"] else 0.0
            # what the server's own timing allows: c streams, each a TTFT then t-1 gaps
            tm = s["chunks"] / max(1, s["requests"])  # the mean length (the server varies it by +-50%)
            allowed = c * tm / ((s["ttft_p50"] + (tm - 1) * s["itl_p50"]) / 1000.0)
            # truth: the server's TTFT from the request's arrival at its socket (d_ttft); beside it the
            # figure the earlier truth used, from when the server read the request (d_read)
            d_ttft, d_itl = r["ttft"] - s["ttft_p50"], r["itl"] - s["itl_p50"]
            d_read = r["ttft"] - s["ttft_read_p50"]
            ok = abs(d_ttft) <= 1.0 and abs(d_itl) <= 1.0
            pr = r["paired"] or {}
            row = {"c": c, "carried": carried, "allowed": allowed, "ttft": r["ttft"], "itl": r["itl"],
                   "srv_ttft": s["ttft_p50"], "srv_ttft_read": s["ttft_read_p50"], "srv_itl": s["itl_p50"],
                   "d_ttft": d_ttft, "d_read": d_read, "d_itl": d_itl, "wait_p50": s["wait_p50"],
                   "wait_p90": s["wait_p90"], "paired": r["paired"],
                   "ok": ok, "cpu_us_per_chunk": r["cpu"] / max(1, s["chunks"]) * 1e6,
                   "server_cpu_util": s["cpu_s"] / s["span_s"] / len(farm.servers)}
            if s["read_arrivals"]:
                row["read_arrivals"] = s["read_arrivals"]
                log(f"sweep {name} C={c}: {s['read_arrivals']} of {s['requests']} requests without a kernel receive "
                    "timestamp: their arrival is the server's read")
            out[name].append(row)
            log(f"sweep {name:8} C={c:<5} carried {carried:9.0f}/s (allowed {allowed:9.0f})  TTFT {r['ttft']:7.2f} "
                f"({d_ttft:+6.2f}; from the read {d_read:+6.2f}; server read delay p50 {s['wait_p50']:.2f} "
                f"p90 {s['wait_p90']:.2f}" + (f"; paired p50 {pr['p50']:+.2f} p90 {pr['p90']:+.2f}" if pr else "") +
                f")  ITL {r['itl']:6.3f} ({d_itl:+6.3f})  {'ok' if ok else 'NOT FAITHFUL'}")
            misses = 0 if ok else misses + 1
            if carried < 0.6 * allowed or misses == 2:  # overloaded, or twice off: higher steps only cost time
                break
    return out


def report(cap: dict, sw: dict, skipped: dict, args) -> str:
    ns = sorted({r["requests"] for r in cap.values() if "requests" in r})
    lines = [f"Capacity: server at full speed ({args.server_procs} processes), C={args.cap_c}, {args.cap_t} chunks "
             f"per request, {'/'.join(map(str, ns))} requests a client; client CPU while the server streamed",
             f"{'client':13} {'chunks/s':>10} {'CPU us/chunk':>12} {'client cores':>12} {'server CPU':>10} "
             f"{'of it the parent':>16}"]
    for name, r in cap.items():
        if "error" in r:
            lines.append(f"{name:13} failed: {r['error'][:200]}")
            continue
        parent = r.get("parent_us_per_chunk")
        lines.append(f"{name:13} {r['chunk_rate']:10.0f} {r['cpu_us_per_chunk']:12.2f} {r['client_cores']:12.2f} "
                     f"{r['server_cpu_util']:9.0%}" + (f" {parent:16.2f}" if parent is not None else ""))
    lines += ["", f"Fidelity sweep: TTFT 20 ms, step 5 ms, {args.t} chunks per request; dev = client p50 - server's own "
              "p50 (ms), TTFT from the request's arrival at the server's socket; faithful: both within 1 ms",
              "(read dev: against the server's TTFT from when it read the request, the earlier truth; srv wait: "
              "read - arrival, p50/p90; paired: client - server TTFT request by request, p50/p90, after the "
              "first round, which opens the connections)",
              f"{'client':9} {'C':>5} {'carried/s':>10} {'allowed/s':>10} {'TTFT':>8} {'dev':>7} {'read dev':>8} "
              f"{'srv wait':>11} {'paired':>13} {'ITL':>7} {'dev':>7} {'CPU us/ch':>9} {'srv CPU':>7} ok"]
    sustained, sustained_read = {}, {}
    for name, rows in sw.items():
        for r in rows:
            if "error" in r:
                lines.append(f"{name:9} {r['c']:>5} failed: {r['error'][:160]}")
                continue
            pr = r.get("paired")
            paired = f"{pr['p50']:+6.2f}/{pr['p90']:+6.2f}" if pr else "-"
            lines.append(f"{name:9} {r['c']:>5} {r['carried']:10.0f} {r['allowed']:10.0f} {r['ttft']:8.2f} {r['d_ttft']:+7.2f} "
                         f"{r['d_read']:+8.2f} {r['wait_p50']:5.2f}/{r['wait_p90']:5.2f} {paired:>13} "
                         f"{r['itl']:7.3f} {r['d_itl']:+7.3f} {r['cpu_us_per_chunk']:9.2f} "
                         f"{r['server_cpu_util']:7.0%} {'yes' if r['ok'] else 'NO'}")
        good = [r for r in rows if r.get("ok")]
        sustained[name] = max((r["carried"] for r in good), default=0.0)
        read_ok = [r for r in rows if "error" not in r and abs(r["d_read"]) <= 1.0 and abs(r["d_itl"]) <= 1.0]
        sustained_read[name] = max((r["carried"] for r in read_ok), default=0.0)
    lines += ["", "Sustained (faithful) chunk rate: " + ", ".join(f"{k} {v:.0f}/s" for k, v in sustained.items()),
              "(judged against the server's TTFT from its read, the earlier truth: " +
              ", ".join(f"{k} {v:.0f}/s" for k, v in sustained_read.items()) + ")"]
    w1, w4 = sustained.get("ours-1"), sustained.get("ours-4")
    peers = {k: v for k, v in sustained.items() if k in PEERS}
    if w1 and w4:
        lines.append(f"ours-4 / ours-1 sustained: {w4 / w1:.2f}x (goal >= 3)")
    if w4 and peers:
        lines.append("ours-4 / peer sustained: " + ", ".join(f"{k} {w4 / v:.2f}x" if v else f"{k} (never faithful)"
                                                           for k, v in peers.items()))
    c1, c4 = cap.get("ours-1", {}), cap.get("ours-4", {})
    if c1.get("chunk_rate") and c4.get("chunk_rate"):
        lines.append(f"ours-4 / ours-1 capacity: {c4['chunk_rate'] / c1['chunk_rate']:.2f}x; peers: " + ", ".join(
            f"{k} {c4['chunk_rate'] / v['chunk_rate']:.2f}x" for k, v in cap.items()
            if k in PEERS and v.get("chunk_rate")))
    sg = cap.get("sglang", {})
    if sg.get("cpu_us_per_chunk"):
        lines.append("CPU per chunk / sglang.bench_serving's (capacity run): " + ", ".join(
            f"{k} {v['cpu_us_per_chunk'] / sg['cpu_us_per_chunk']:.2f}x" for k, v in cap.items()
            if k not in PEERS and v.get("cpu_us_per_chunk")) + " (issue 30: <= 0.35 for ours-4)")
    what = {"base": "the baseline tree's client", "solo": "the worker machinery"}
    for name, b in cap.items():  # ours-N against base-N (another tree) and solo-N (independent processes)
        kind, _, w = name.partition("-")
        a = cap.get(f"ours-{w}", {}) if kind in what else {}
        if a.get("cpu_us_per_chunk") and b.get("cpu_us_per_chunk"):
            lines.append(f"ours-{w} / {name} ({what[kind]}, same run): CPU per chunk "
                         f"{a['cpu_us_per_chunk'] / b['cpu_us_per_chunk']:.2f}x, chunk rate "
                         f"{a['chunk_rate'] / b['chunk_rate']:.2f}x")
    top4 = next((r for r in reversed(sw.get("ours-4", [])) if r.get("ok")), None)
    if top4:
        pr = top4.get("paired") or {}
        lines.append(f"ours-4 at its sustained rate ({top4['carried']:.0f}/s, C={top4['c']}): TTFT dev "
                     f"{top4['d_ttft']:+.2f} ms, ITL dev {top4['d_itl']:+.3f} ms" +
                     (f", paired TTFT p50 {pr['p50']:+.2f} ms" if pr else ""))
    for name, why in skipped.items():
        lines.append(f"skipped {name}: {why}")
    return "\n".join(lines)


def capacity_reps(caps: list[dict]) -> str:
    """With repetitions: every client's CPU per chunk and its ratio to sglang.bench_serving's, per repetition
    (the ratio is taken within a repetition: the clients of one repetition ran minutes apart at most)."""
    if len(caps) < 2:
        return ""
    lines = ["", f"Capacity, {len(caps)} repetitions: CPU us/chunk per repetition [ratio to sglang.bench_serving's "
                 "in the same repetition]; median ratio"]
    for name in caps[0]:
        us = [c.get(name, {}).get("cpu_us_per_chunk") for c in caps]
        ratios = [u / c["sglang"]["cpu_us_per_chunk"] if u and c.get("sglang", {}).get("cpu_us_per_chunk") else None
                  for u, c in zip(us, caps)]
        got = [r for r in ratios if r is not None]
        done = [u for u in us if u]
        lines.append(f"{name:13} " + "  ".join(f"{u:6.2f} [{r:.2f}x]" if u and r else (f"{u:6.2f}" if u else "failed")
                                             for u, r in zip(us, ratios))
                     + (f"   median {statistics.median(got):.2f}x" if got and name != "sglang" else
                        f"   median {statistics.median(done):.2f} us" if done else ""))
    for name in caps[0]:  # the worker machinery: ours-N against N independent processes, per repetition
        if name.startswith("solo-"):
            pairs = [(c.get("ours-" + name[5:], {}).get("cpu_us_per_chunk"), c.get(name, {}).get("cpu_us_per_chunk"))
                     for c in caps]
            got = [a / b for a, b in pairs if a and b]
            if got:
                lines.append(f"ours-{name[5:]} / {name} CPU per chunk per repetition: "
                             + " ".join(f"{r:.2f}x" for r in got) + f"; median {statistics.median(got):.2f}x")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--server-procs", type=int, default=6)
    ap.add_argument("--sglang", type=Path, help="sglang's wheel unpacked (the directory holding sglang/)")
    ap.add_argument("--sglang-deps", type=Path, help="its client's small deps (pybase64, msgspec, orjson)")
    ap.add_argument("--tokenizer", type=Path, help="a tokenizer directory for sglang.bench_serving")
    ap.add_argument("--sglang-also", action="append", default=[], metavar="VERSION=DIR", help="another SGLang "
                    "wheel's client in the capacity part (sglang-VERSION, same deps): the peer's own spread")
    ap.add_argument("--baseline", type=Path, help="another checkout whose client also runs in the capacity part "
                    "(base-1, base-4): before/after in one run")
    ap.add_argument("--quick", action="store_true", help="2 cores: fewer, smaller steps")
    ap.add_argument("--budget-s", type=float, default=480, help="stop starting new runs after this long")
    ap.add_argument("--extra-from", type=int, default=0, help="sweep the worker counts other than 1 and 4 from "
                    "this concurrency up (default: every step)")
    ap.add_argument("--capacity-reps", type=int, default=1, help="run the capacity part this many times (the "
                    "clients' order rotated each time) and report each ratio to sglang.bench_serving per repetition")
    ap.add_argument("--capacity-only", action="store_true", help="no fidelity sweep")
    ap.add_argument("--solo", action="store_true", help="capacity part: also solo-N for each worker count N > 1, "
                    "N independent one-process clients started together (ours-N / solo-N: what the worker "
                    "machinery costs)")
    ap.add_argument("--cap-scale", type=float, default=1.0, help="capacity part: this many times the requests "
                    "(longer windows, less noise from the ramp and the drain)")
    ap.add_argument("--cap-unequal", action="store_true", help="capacity part: each client runs the requests its "
                    "own worker count needs (the peers half of ours-4's), as before 2026-12-05; default: all the same")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),) * 2)
    if a.quick:
        a.server_procs, a.cap_c, a.cap_t, base_n, a.t, rounds = min(a.server_procs, 1), 64, 256, 128, 64, 4
        steps = [32, 64, 128, 256]
    else:
        a.cap_c, a.cap_t, base_n, a.t, rounds = 512, 512, 1024, 128, 4
        steps = [round(96 * 1.25 ** k) for k in range(15)]  # 96 .. 2183
    base_n = round(base_n * a.cap_scale)
    log = lambda m: print(f"[{time.monotonic() - START:6.1f}s] {m}", file=sys.stderr, flush=True)  # noqa: E731
    clients = {f"ours-{w}": (ours(w), w) for w in map(int, a.workers.split(","))}
    clients["ref"] = (ref, 1)
    cap_clients = {f"ours-{w}": (ours(w, pair=False), w) for w in map(int, a.workers.split(","))}
    if a.baseline:  # the same run, another tree's client (before/after), capacity only
        cap_clients.update({f"base-{w}": (ours(w, a.baseline.resolve(), pair=False), w) for w in (1, 4)})
    if a.solo:
        cap_clients.update({f"solo-{w}": (solo(w), w) for w in map(int, a.workers.split(",")) if w > 1})
    cap_clients["ref"] = (ref, 1)
    skipped = {}
    if a.sglang and (a.sglang / "sglang" / "benchmark" / "serving.py").is_file() and a.tokenizer:
        deps, tok = (a.sglang_deps or a.sglang).resolve(), a.tokenizer.resolve()
        clients["sglang"] = cap_clients["sglang"] = (sglang_client(a.sglang.resolve(), deps, tok), 1)
        for spec in a.sglang_also:
            version, _, where = spec.partition("=")
            cap_clients[f"sglang-{version}"] = (sglang_client(Path(where).resolve(), deps, tok), 1)
    else:
        skipped["sglang"] = f"no sglang client at --sglang {a.sglang} (or no --tokenizer)"
    log(f"clients: {', '.join(clients)}; {os.cpu_count()} CPUs; server processes {a.server_procs}")
    farm = Farm(a.server_procs, 0, 0)
    caps = []
    try:
        names = list(cap_clients)
        for rep in range(max(1, a.capacity_reps)):  # each repetition starts with another client
            order = names[rep % len(names):] + names[:rep % len(names)]
            caps.append(capacity({k: cap_clients[k] for k in order}, farm, a.cap_c, a.cap_t, base_n, log,
                                 equal=not a.cap_unequal))
    finally:
        farm.stop()
    cap = {k: caps[0][k] for k in cap_clients}
    sw = {}
    if not a.capacity_only:
        farm = Farm(a.server_procs, 20, 5)
        try:
            sw = sweep(clients, farm, steps, a.t, rounds, START + a.budget_s, log, a.extra_from)
        finally:
            farm.stop()
    text = report(cap, sw, skipped, a) + capacity_reps(caps)
    print(text)
    if a.json:
        a.json.write_text(json.dumps({"capacity": cap, "capacity_reps": caps, "sweep": sw, "skipped": skipped,
                                      "cpus": os.cpu_count(), "argv": sys.argv[1:], "report": text}, indent=1) + "\n")


if __name__ == "__main__":
    main()
