"""TTFT and ITL fidelity of the load generator against the truth server, per path and concurrency, with
the client's CPU per chunk beside it, other checkouts' clients interleaved in the same sitting (issue 30).

    python benchmarks/loadgen_ttft.py --tree 70e4ce2=/tmp/base --tree main=/tmp/main --rounds 3   # 2 cores
    python benchmarks/loadgen_ttft.py --levels 1,16,64,256,512,1024,2048,4096 --paths default,1,2,4,8 \\
        --server-procs 7 --capacity --sglang DIR --sglang-deps DIR --tokenizer DIR             # 16 cores

The server is benchmarks/loadgen_server.py (--server-procs processes on one port): the issue's schedule
by default, 40 ms to the first chunk, then a step every 8 ms writes the next chunk of every running
request (batch-synchronous, as SGLang's decode loop), 64 chunks, chat API, the CLI's plain body. It
records each request's arrival at its socket (the kernel's receive timestamp) and each write's time:
the truth. Paths: `default` (the load generator's own choice of processes: one below C=101), `N`
(`workers=N`) of this checkout, and the default path of each `--tree NAME=DIR` (another checkout's
client, e.g. `git archive 70e4ce2`; --tree-paths gives it more). Every run is one closed-loop cell from
a fresh process (benchmarks/loadgen_driver.py: the tree's own run_cell), C x --waves requests.

Columns (ms; dev = client - server): TTFT p50 and its dev, TTFT p99 dev, ITL p50 (per-chunk gaps,
pooled) and its dev, ITL p99 dev; paired: client - server TTFT request by request, p50/p99, after the
first wave (which opens the connections); CPU us/chunk: the client's process tree while the server
streamed (sampled from /proc), over the chunks; load: the 1-minute load average when the run ended.
With --rounds R every level's runs repeat R times in the same order (trees interleaved) and the table
gives the median of the rounds (load: the highest). A path whose TTFT or ITL p50 is off by more than
1 ms at two levels in a row, or that carries under 60% of what the schedule allows, stops there.
--capacity first measures CPU per chunk with the server at full speed (C=512, 512 chunks), this
checkout's clients and sglang.bench_serving in the same run (benchmarks/loadgen_workers.py's part 1).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from loadgen_workers import PY, Farm, capacity, ours, run_client, sglang_client  # noqa: E402

START = time.monotonic()


def driver(tree: Path, workers: str):
    """The client of `tree` run by benchmarks/loadgen_driver.py (this checkout's copy, the tree's toolkit)."""
    def make(url, c, n, t, d):
        rec = d / "records.jsonl"
        cmd = [PY, str(ROOT / "benchmarks" / "loadgen_driver.py"), url, str(c), str(n), str(t), workers, str(rec)]

        def parse(o):
            j = json.loads(o)
            per_req = {}
            with open(rec) as f:
                for line in f:
                    r = json.loads(line)
                    per_req["#" + r["prompt_id"][1:]] = (r["ttft_ms"], r["send_s"])
            return j["ttft_p50"], j["itl_p50"], per_req, {"ttft_p99": j["ttft_p99"], "itl_p99": j["itl_p99"],
                                                          "errors": j["errors"]}
        return cmd, parse
    make.tree = tree
    return make


def row_of(name: str, c: int, r: dict, farm_procs: int) -> dict:
    s = r["server"]
    carried = s["chunks"] / s["span_s"] if s["span_s"] else 0.0
    tm = s["chunks"] / max(1, s["requests"])
    allowed = c * tm / ((s["ttft_p50"] + (tm - 1) * s["itl_p50"]) / 1000.0)
    dev = lambda a, b: None if a is None or b is None else a - b  # noqa: E731
    row = {"path": name, "c": c, "carried": carried, "allowed": allowed, "ttft": r["ttft"], "srv_ttft": s["ttft_p50"],
           "d_ttft": dev(r["ttft"], s["ttft_p50"]), "d_ttft99": dev(r.get("ttft_p99"), s["ttft_p99"]),
           "itl": r["itl"], "srv_itl": s["itl_p50"], "d_itl": dev(r["itl"], s["itl_p50"]),
           "d_itl99": dev(r.get("itl_p99"), s["itl_p99"]), "paired": r["paired"],
           "cpu_us_per_chunk": r["cpu"] / max(1, s["chunks"]) * 1e6, "errors": r.get("errors", 0),
           "server_cpu_util": s["cpu_s"] / s["span_s"] / farm_procs if s["span_s"] else None,
           "read_arrivals": s["read_arrivals"], "load": os.getloadavg()[0], "t": time.monotonic() - START}
    row["ok"] = abs(row["d_ttft"]) <= 1.0 and abs(row["d_itl"]) <= 1.0 and not row["errors"]
    return row


def fmt(v, f="{:+7.2f}", width=7) -> str:
    return f.format(v) if v is not None else "-".rjust(width)


HEAD = (f"{'path':16} {'C':>5} {'carried/s':>9} {'TTFT p50':>8} {'dev':>7} {'p99 dev':>7} {'ITL p50':>7} {'dev':>7} "
        f"{'p99 dev':>7} {'paired p50/p99':>15} {'CPU us/ch':>9} {'load':>5} ok")


def line(r: dict) -> str:
    pr = r.get("paired")
    paired = f"{pr['p50']:+6.2f}/{pr['p99']:+7.2f}" if pr else "-"
    return (f"{r['path']:16} {r['c']:>5} {r['carried']:9.0f} {r['ttft']:8.2f} {fmt(r['d_ttft'])} {fmt(r['d_ttft99'])} "
            f"{r['itl']:7.3f} {fmt(r['d_itl'], '{:+7.3f}')} {fmt(r['d_itl99'], '{:+7.3f}')} {paired:>15} "
            f"{r['cpu_us_per_chunk']:9.2f} {r['load']:5.1f} {'yes' if r['ok'] else 'NO'}")


def median_row(rows: list[dict]) -> dict:
    """The rounds of one (path, C): each figure's median, the highest load, ok when every round was."""
    out = dict(rows[0])
    for k in ("carried", "ttft", "d_ttft", "d_ttft99", "itl", "d_itl", "d_itl99", "cpu_us_per_chunk"):
        vals = [r[k] for r in rows if r[k] is not None]
        out[k] = statistics.median(vals) if vals else None
    prs = [r["paired"] for r in rows if r.get("paired")]
    out["paired"] = {k: statistics.median(p[k] for p in prs) for k in ("p50", "p99")} if prs else None
    out["load"] = max(r["load"] for r in rows)
    out["ok"] = all(r["ok"] for r in rows)
    out["rounds"] = len(rows)
    return out


def sweep(paths: dict, farm: Farm, levels: list[int], a, log, limits: dict) -> list[dict]:
    runs: list[dict] = []
    misses = {name: 0 for name in paths}
    stopped: dict[str, str] = {}
    for c in levels:
        n = max(a.min_requests, c * a.waves)
        for rnd in range(a.rounds):
            for name, make in paths.items():
                if name in stopped or c > limits.get(name, c):
                    continue
                if time.monotonic() - START > a.budget_s:
                    stopped[name] = f"out of time before C={c}"
                    continue
                try:
                    r = run_client(name, make, farm, c, n, a.tokens)
                except (RuntimeError, OSError, KeyError, ValueError, IndexError) as exc:
                    log(f"{name} C={c}: FAILED {exc}")
                    runs.append({"path": name, "c": c, "round": rnd, "error": str(exc)[:400]})
                    stopped[name] = f"failed at C={c}"
                    continue
                row = row_of(name, c, r, len(farm.servers))
                row["round"] = rnd
                runs.append(row)
                log(line(row))
                if rnd == a.rounds - 1:  # the level's last round decides whether the path goes on
                    good = all(x["ok"] for x in runs if x.get("path") == name and x["c"] == c and "error" not in x)
                    misses[name] = 0 if good else misses[name] + 1
                    if misses[name] == 2 or row["carried"] < 0.6 * row["allowed"]:
                        stopped[name] = f"stopped after C={c} (" + ("two levels off" if misses[name] == 2 else
                                                                    "carried < 60% of the schedule's rate") + ")"
    for name, why in stopped.items():
        log(f"{name}: {why}")
    return runs


def report(runs: list[dict], cap: dict, a) -> str:
    groups: dict[tuple, list] = {}
    for r in runs:
        if "error" not in r:
            groups.setdefault((r["path"], r["c"]), []).append(r)
    table = [median_row(v) for v in groups.values()]
    order = list(dict.fromkeys(r["path"] for r in runs))
    table.sort(key=lambda r: (order.index(r["path"]), r["c"]))
    out = [f"Fidelity against the truth server ({a.server_procs} process(es); {a.ttft_ms:g} ms to the first chunk, a step "
           f"every {a.itl_ms:g} ms, {a.tokens} chunks, {'per-chunk usage' if a.usage else 'plain body'}, vary "
           f"{a.vary:g}); {os.cpu_count()} CPUs; "
           f"{a.rounds} round(s), median of rounds; dev = client - server (ms); load = 1-min load average", HEAD]
    out += [line(r) for r in table]
    out += ["", "Every run (in the order run):", HEAD] + [line(r) if "error" not in r else
                                                         f"{r['path']:16} {r['c']:>5} FAILED {r['error'][:150]}"
                                                         for r in runs]
    best = {}
    for r in table:
        if r["ok"] and r["carried"] > best.get(r["path"], {}).get("carried", -1):
            best[r["path"]] = r
    out += ["", "Highest faithful chunk rate (TTFT and ITL p50 within 1 ms), per path:"]
    for name in order:
        b = best.get(name)
        out.append(f"  {name:16} " + (f"{b['carried']:9.0f}/s at C={b['c']}: TTFT dev {b['d_ttft']:+.2f} ms, ITL dev "
                                      f"{b['d_itl']:+.3f} ms, CPU {b['cpu_us_per_chunk']:.2f} us/chunk" if b else
                                      "never faithful"))
    c64 = [r for r in runs if r.get("c") == a.accept_c and "error" not in r and r["path"].endswith(":default")]
    if c64:
        out += ["", f"C={a.accept_c}, default paths, every round (goal: TTFT p50 within 1.0 ms, ITL p50 within 0.05 ms):"]
        for name in order:
            rs = [r for r in c64 if r["path"] == name]
            if rs:
                met = all(abs(r["d_ttft"]) <= 1.0 and abs(r["d_itl"]) <= 0.05 for r in rs)
                out.append(f"  {name:16} TTFT dev " + ", ".join(f"{r['d_ttft']:+.2f}" for r in rs) + "; ITL dev " +
                           ", ".join(f"{r['d_itl']:+.3f}" for r in rs) + "; load " +
                           ", ".join(f"{r['load']:.1f}" for r in rs) + f"  -> {'met' if met else 'NOT met'}")
    if cap:
        out += ["", f"Capacity (server at full speed, C={a.cap_c}, {a.cap_t} chunks a request): CPU per chunk"]
        sg = cap.get("sglang", {}).get("cpu_us_per_chunk")
        for name, r in cap.items():
            if "error" in r:
                out.append(f"  {name:10} failed: {r['error'][:200]}")
                continue
            ratio = f"  {r['cpu_us_per_chunk'] / sg:.2f}x sglang.bench_serving's" if sg and name != "sglang" else ""
            out.append(f"  {name:10} {r['chunk_rate']:10.0f} chunks/s {r['cpu_us_per_chunk']:6.2f} us/chunk "
                       f"{r['client_cores']:5.2f} cores, server CPU {r['server_cpu_util']:.0%}{ratio}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--paths", default="default,1,2,4", help="this checkout's: default and worker counts")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="another checkout's client (its toolkit/), e.g. 70e4ce2=/tmp/base; repeatable")
    ap.add_argument("--tree-paths", default="default", help="the paths run for every --tree")
    ap.add_argument("--tree-levels", help="run the --tree paths only up to this concurrency")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--waves", type=int, default=6, help="requests = C x waves (the issue's 394 at C=64: ~6)")
    ap.add_argument("--min-requests", type=int, default=12)
    ap.add_argument("--ttft-ms", type=float, default=40.0)
    ap.add_argument("--itl-ms", type=float, default=8.0)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--usage", action="store_true", help="per-chunk usage in every chunk (the server's --always-usage)")
    ap.add_argument("--vary", type=float, default=0.0, help="output lengths x U(1-v, 1+v) (the server's --vary)")
    ap.add_argument("--server-procs", type=int, default=1)
    ap.add_argument("--accept-c", type=int, default=64, help="the level whose every round is listed (acceptance)")
    ap.add_argument("--capacity", action="store_true", help="CPU per chunk at full speed first (see above)")
    ap.add_argument("--cap-workers", default="1,4,8")
    ap.add_argument("--cap-c", type=int, default=512)
    ap.add_argument("--cap-t", type=int, default=512)
    ap.add_argument("--sglang", type=Path, help="sglang's wheel unpacked (the directory holding sglang/)")
    ap.add_argument("--sglang-deps", type=Path, help="its client's small deps (pybase64, ...)")
    ap.add_argument("--tokenizer", type=Path, help="a tokenizer directory for sglang.bench_serving")
    ap.add_argument("--sglang-levels", help="run sglang.bench_serving only up to this concurrency")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no run after this long")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),) * 2)
    log = lambda m: print(f"[{time.monotonic() - START:6.1f}s] {m}", file=sys.stderr, flush=True)  # noqa: E731
    levels = [int(x) for x in a.levels.split(",")]
    paths = {f"this:{p}": driver(ROOT, p) for p in a.paths.split(",")}
    limits: dict[str, int] = {}
    for spec in a.tree:
        name, _, where = spec.partition("=")
        for p in a.tree_paths.split(","):
            paths[f"{name}:{p}"] = driver(Path(where).resolve(), p)
            if a.tree_levels:
                limits[f"{name}:{p}"] = int(a.tree_levels)
    sgl = None
    if a.sglang:
        if not ((a.sglang / "sglang" / "benchmark" / "serving.py").is_file() and a.tokenizer):
            raise SystemExit(f"no sglang client at --sglang {a.sglang} (sglang/benchmark/serving.py), or no --tokenizer")
        sgl = sglang_client(a.sglang.resolve(), (a.sglang_deps or a.sglang).resolve(), a.tokenizer.resolve())
        paths["sglang"] = sgl
        if a.sglang_levels:
            limits["sglang"] = int(a.sglang_levels)
    log(f"paths: {', '.join(paths)}; levels {levels}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    cap = {}
    if a.capacity:
        farm = Farm(a.server_procs, 0, 0)
        try:
            clients = {f"this-{w}": (ours(int(w), pair=False), int(w)) for w in a.cap_workers.split(",")}
            if sgl is not None:
                clients["sglang"] = (sgl, 1)
            cap = capacity(clients, farm, a.cap_c, a.cap_t, 1024, log)
        finally:
            farm.stop()
    farm = Farm(a.server_procs, a.ttft_ms, a.itl_ms, always_usage=a.usage, vary=a.vary)
    try:
        runs = sweep(paths, farm, levels, a, log, limits)
    finally:
        farm.stop()
    text = report(runs, cap, a)
    print(text)
    if a.json:
        a.json.write_text(json.dumps({"runs": runs, "capacity": cap, "argv": sys.argv[1:], "cpus": os.cpu_count(),
                                      "report": text}, indent=1) + "\n")


if __name__ == "__main__":
    main()
