"""Load generator fidelity and cost against `guidellm mock-server`, with the peers where they install.

    .venv/bin/python benchmarks/loadgen_fidelity.py            # ~15 min on 2 cores; --quick: C=1,16, ours only
    .venv/bin/python benchmarks/loadgen_fidelity.py --json out.json

1. Timing (mock set to TTFT 50 ms, ITL 5 ms, 128 tokens): TTFT and ITL p50 of every client at C=1, 16,
   64. "Truth" is the minimal raw-aiohttp reference client (benchmarks/reference_client.py) run just
   before and just after each client run (ours: 3 rounds, ref-ours-ref-ours-ref-ours-ref; peers: 1);
   the table shows the median deviation from the mean of the two neighbouring reference runs, and the
   reference's own run-to-run spread (the noise floor).
2. Cost (mock at full speed: no delays, 512 tokens, C=64, 256 requests): client CPU (getrusage of
   the client process, user+sys) per streamed chunk, differential: (CPU of 256 requests - CPU of 1
   request) / chunks, so start-up is excluded; sustained chunk rate likewise; start-up = spawn to
   the first HTTP request (measured by a relay in front of the server).
3. HTTP client choice: the same minimal streaming loop on aiohttp and on httpx, CPU per chunk.

Every client runs as its own process; peers: guidellm (test extra), aiperf (pip), sglang.bench_serving
(its wheel's client, unpacked; server-side imports stubbed: benchmarks/sglang_bench_shim.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.serve import ProcessLauncher, free_port  # noqa: E402

PY = sys.executable
BIN = Path(PY).parent
CACHE = Path.home() / ".cache" / "toolkit" / "peers"
SGLANG_VERSION = "0.5.23"
TMP = Path(tempfile.mkdtemp(prefix="loadgen-fidelity-"))
FAILED: dict[str, str] = {}


def mock(ttft: float, itl: float, tokens: int) -> ProcessLauncher:
    port = free_port()
    srv = ProcessLauncher([str(BIN / "guidellm"), "mock-server", "--host", "127.0.0.1", "--port", str(port),
                           "--ttft-ms", str(ttft), "--itl-ms", str(itl), "--output-tokens", str(tokens)],
                          log_path=TMP / f"mock-{port}.log", port=port)
    srv.wait_healthy(120)
    return srv


class Relay:
    """A TCP relay that records when the first byte of the first request arrives (start-up probe)."""

    def __init__(self, target_port: int):
        self.target, self.port, self.first = target_port, free_port(), None
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(asyncio.start_server(self._conn, "127.0.0.1", self.port), self.loop).result()

    async def _conn(self, reader, writer):
        ur, uw = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(r, w, mark):
            try:
                while data := await r.read(65536):
                    if mark and self.first is None:
                        self.first = time.time()
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        await asyncio.gather(pipe(reader, uw, True), pipe(ur, writer, False))


# -- clients: (command, parser of (ttft_p50, itl_p50)) ----------------------------------------------

def ours(url, c, n, out_len, d):
    return [PY, "-m", "toolkit.loadgen", url, "--concurrency", str(c), "--requests", str(n),
            "--output-len", str(out_len)], lambda o: (json.loads(o)["metrics"]["ttft_ms"]["p50"],
                                                     json.loads(o)["itl_chunk_p50"])


def ref(url, c, n, out_len, d):
    return [PY, str(ROOT / "benchmarks" / "reference_client.py"), url, str(c), str(n), str(out_len)], \
        lambda o: (json.loads(o)["ttft_p50"], json.loads(o)["itl_p50"])


def guidellm(url, c, n, out_len, d):
    out = d / "guidellm.json"

    def parse(_):
        m = json.loads(out.read_text())["benchmarks"][0]["metrics"]
        return (m["time_to_first_token_ms"]["successful"]["median"], m["inter_token_latency_ms"]["successful"]["median"])
    return [str(BIN / "guidellm"), "run", "--backend", f"kind=openai_http,target={url},model=m",
            "--profile", f"kind=concurrent,streams={c}", "--constraint", f"kind=max_requests,count={n}",
            "--data", f"kind=synthetic_text,prompt_tokens=16,output_tokens={out_len}",
            "--tokenizer", f"kind=huggingface_auto,model={dummy_dir()}", "--output", f"kind=json,path={out}",
            "--disable-console-interactive"], parse


def aiperf(url, c, n, out_len, d):
    def parse(_):
        j = json.loads((d / "aip" / "profile_export_aiperf.json").read_text())
        return j["time_to_first_token"]["p50"], j["inter_token_latency"]["p50"]
    return [str(BIN / "aiperf"), "profile", "-m", "m", "--url", url, "--endpoint-type", "chat", "--streaming",
            "--concurrency", str(c), "--request-count", str(n), "--tokenizer", str(dummy_dir()),
            "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", str(out_len), "--use-server-token-count",
            "--artifact-dir", str(d / "aip"), "--ui-type", "none"], parse


def sglang(url, c, n, out_len, d):
    out = d / "sglang.jsonl"

    def parse(_):
        j = json.loads(out.read_text().splitlines()[-1])
        return j["median_ttft_ms"], j["median_itl_ms"]
    root, deps = sglang_client()
    return [PY, str(ROOT / "benchmarks" / "sglang_bench_shim.py"), str(root), str(deps), "--", "--backend",
            "sglang-oai-chat", "--base-url", url, "--dataset-name", "random-ids", "--model", "m", "--tokenizer",
            str(dummy_dir()), "--num-prompts", str(n), "--max-concurrency", str(c), "--random-input-len", "16",
            "--random-output-len", str(out_len), "--random-range-ratio", "1.0", "--output-file", str(out),
            "--warmup-requests", "0"], parse


CONVENTION = {"ours": "per-chunk gap", "ref": "per-chunk gap", "guidellm": "(last-first)/(n-1) per request",
              "aiperf": "per token, server token count", "sglang": "per-chunk gap"}


def dummy_dir() -> Path:
    from toolkit.serve.dummy import ensure_dummy_model
    from toolkit.specs.environment import DummyModel

    return ensure_dummy_model(DummyModel())


def sglang_client() -> tuple[Path, Path]:
    """sglang's wheel unpacked (not installed: its deps are GPU-sized) and two small deps beside it."""
    root, deps = CACHE / f"sglang-{SGLANG_VERSION}", CACHE / "sglang-deps"
    if not (root / "sglang" / "benchmark" / "serving.py").is_file():
        wheels = CACHE / "wheels"
        subprocess.run([PY, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), f"sglang=={SGLANG_VERSION}"],
                       check=True, capture_output=True)
        with zipfile.ZipFile(next(wheels.glob(f"sglang-{SGLANG_VERSION}-*.whl"))) as z:
            z.extractall(root, [m for m in z.namelist() if m.startswith("sglang/")])
    if not (deps / "pybase64").exists():
        subprocess.run([PY, "-m", "pip", "install", "-q", "--no-deps", "--target", str(deps), "pybase64", "ipython"],
                       check=True, capture_output=True)
    return root, deps


def available() -> dict[str, str | None]:
    """Each peer: None when usable, else why not (after trying to install it)."""
    why: dict[str, str | None] = {"ours": None, "ref": None}
    for peer in ("guidellm", "aiperf"):
        if not (BIN / peer).exists():
            r = subprocess.run([PY, "-m", "pip", "install", "-q", peer], capture_output=True, text=True)
            if r.returncode:
                why[peer] = f"pip install {peer} failed: {r.stderr.strip().splitlines()[-1:]}"
                continue
        why[peer] = None
    try:
        sglang_client()
        why["sglang"] = None
    except (subprocess.CalledProcessError, StopIteration, OSError) as exc:
        why["sglang"] = f"sglang {SGLANG_VERSION} wheel or its client deps unavailable: {exc}"
    return why


def run_client(name, url, c, n, out_len) -> dict:
    d = TMP / f"{name}-c{c}-n{n}-{time.monotonic_ns()}"
    d.mkdir()
    cmd, parse = globals()[name](url, c, n, out_len, d)
    env = dict(os.environ, NO_COLOR="1")
    if name != "aiperf":  # aiperf 0.13 then treats a local tokenizer path as a hub repo id and fails
        env["HF_HUB_OFFLINE"] = "1"
    if name in ("ours", "ref"):
        env["PYTHONPATH"] = str(ROOT)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=d)
    out, err = p.communicate(timeout=900)
    wall = time.time() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # cumulative: the caller takes differences
    if p.returncode:
        raise RuntimeError(f"{name} failed ({p.returncode}): {(err or out).decode(errors='replace')[-600:]}")
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    ttft, itl = parse(lines[-1] if lines else "")
    return {"ttft": ttft, "itl": itl, "wall": wall, "t0": t0, "cpu_total": ru.ru_utime + ru.ru_stime}


def cpu_of(name, *args) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run_client(name, *args)
    r["cpu"] = r["cpu_total"] - (before.ru_utime + before.ru_stime)
    return r


def timing(clients, levels) -> list[dict]:
    srv = mock(50, 5, 128)
    rows = []
    try:
        for c in levels:
            n = 24 if c == 1 else 4 * c  # several waves: the first (all at once) is not the steady state
            for name in clients:
                if name == "ref":
                    continue
                rounds = 3 if name == "ours" else 1  # peers start in 3-4 s each: one round
                refs = [run_client("ref", srv.base_url, c, n, 128)]
                runs = []
                try:
                    for _ in range(rounds):
                        runs.append(run_client(name, srv.base_url, c, n, 128))
                        refs.append(run_client("ref", srv.base_url, c, n, 128))
                except (RuntimeError, OSError, KeyError, ValueError, IndexError) as exc:
                    FAILED.setdefault(name, str(exc)[:300])
                    print(f"  timing C={c:<3} {name:9} FAILED: {exc}", file=sys.stderr)
                    continue
                med = statistics.median
                # each run against the mean of the reference runs just before and after it
                d_t = med(r["ttft"] - (a["ttft"] + b["ttft"]) / 2 for r, a, b in zip(runs, refs, refs[1:]))
                d_i = med(r["itl"] - (a["itl"] + b["itl"]) / 2 for r, a, b in zip(runs, refs, refs[1:]))
                row = {"client": name, "c": c, "rounds": rounds, "ttft": med(r["ttft"] for r in runs),
                       "itl": med(r["itl"] for r in runs), "ref_ttft": med(r["ttft"] for r in refs),
                       "ref_itl": med(r["itl"] for r in refs), "d_ttft": d_t, "d_itl": d_i,
                       "ref_noise_ttft": med(abs(a["ttft"] - b["ttft"]) for a, b in zip(refs, refs[1:])),
                       "ref_noise_itl": med(abs(a["itl"] - b["itl"]) for a, b in zip(refs, refs[1:]))}
                rows.append(row)
                print(f"  timing C={c:<3} {name:9} TTFT {row['ttft']:8.2f} ({d_t:+7.2f})  ITL {row['itl']:6.3f} "
                      f"({d_i:+6.3f})  rounds {rounds}", file=sys.stderr)
    finally:
        srv.stop()
    return rows


def cost(clients, n=256, c=64, tokens=512) -> list[dict]:
    srv = mock(0, 0, tokens)
    relay = Relay(srv.port)
    rows = []
    try:
        for name in clients:
            relay.first = None
            try:
                small = cpu_of(name, f"http://127.0.0.1:{relay.port}", 1, 1, tokens)
                startup = (relay.first - small["t0"]) if relay.first else None
                big = cpu_of(name, srv.base_url, c, n, tokens)
            except (RuntimeError, OSError, KeyError, ValueError, IndexError) as exc:
                FAILED.setdefault(name, str(exc)[:300])
                print(f"  cost {name:9} FAILED: {exc}", file=sys.stderr)
                continue
            chunks = (n - 1) * tokens
            row = {"client": name, "cpu_us_per_chunk": (big["cpu"] - small["cpu"]) / chunks * 1e6,
                   "cpu_ms_per_request": big["cpu"] / n * 1e3, "chunk_rate": chunks / max(big["wall"] - small["wall"], 1e-3),
                   "startup_s": startup}
            rows.append(row)
            print(f"  cost {name:9} {row['cpu_us_per_chunk']:6.1f} us/chunk  {row['chunk_rate']:9.0f} chunks/s  "
                  f"start-up {startup if startup is None else round(startup, 2)} s", file=sys.stderr)
    finally:
        srv.stop()
    return rows


def http_clients(c=64, n=128, tokens=512) -> dict:
    """aiohttp vs httpx: the same minimal streaming loop, CPU per chunk in this process."""
    import aiohttp
    import httpx

    srv = mock(0, 0, tokens)
    body = {"model": "m", "max_tokens": tokens, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    url = srv.base_url + "/v1/chat/completions"

    async def with_aiohttp():
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as s:
            async def one():
                async with s.post(url, json=body) as r:
                    async for _ in r.content.iter_any():
                        pass
            await asyncio.gather(*(one() for _ in range(n)))

    async def with_httpx():
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=c), timeout=None) as s:
            async def one():
                async with s.stream("POST", url, json=body) as r:
                    async for _ in r.aiter_raw():
                        pass
            await asyncio.gather(*(one() for _ in range(n)))

    out = {}
    try:
        for name, fn in (("aiohttp", with_aiohttp), ("httpx", with_httpx)):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            w = time.perf_counter()
            asyncio.run(fn())
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
            out[name] = {"cpu_us_per_chunk": cpu / (n * tokens) * 1e6, "wall_s": time.perf_counter() - w}
            print(f"  http {name:8} {out[name]['cpu_us_per_chunk']:6.1f} us/chunk", file=sys.stderr)
    finally:
        srv.stop()
    return out


def report(timing_rows, cost_rows, http, skipped) -> str:
    lines = ["Timing vs the reference client (mock: TTFT 50 ms, ITL 5 ms, 128 tokens); p50 in ms; dev = client - "
             "mean of the reference runs just before and after (median over rounds)",
             f"{'client':10} {'C':>3} {'rounds':>6} {'TTFT p50':>9} {'dev':>7} {'ITL p50':>8} {'dev':>7} "
             f"{'ref noise TTFT/ITL':>19}  ITL convention"]
    for r in timing_rows:
        lines.append(f"{r['client']:10} {r['c']:>3} {r['rounds']:>6} {r['ttft']:9.2f} {r['d_ttft']:+7.2f} {r['itl']:8.3f} "
                     f"{r['d_itl']:+7.3f} {r['ref_noise_ttft']:9.2f}/{r['ref_noise_itl']:.3f}  {CONVENTION[r['client']]}")
    ours_cost = next((r for r in cost_rows if r["client"] == "ours"), None)
    lines += ["", "Cost (mock at full speed, 512 tokens, C=64, 256 requests); client CPU per chunk excludes start-up",
              f"{'client':10} {'CPU us/chunk':>12} {'CPU ms/req':>10} {'chunks/s':>9} {'start-up s':>10} {'ours/peer CPU':>13}"]
    for r in cost_rows:
        ratio = ours_cost["cpu_us_per_chunk"] / r["cpu_us_per_chunk"] if ours_cost else float("nan")
        st = f"{r['startup_s']:.2f}" if r["startup_s"] is not None else "-"
        lines.append(f"{r['client']:10} {r['cpu_us_per_chunk']:12.1f} {r['cpu_ms_per_request']:10.2f} "
                     f"{r['chunk_rate']:9.0f} {st:>10} {ratio:13.2f}")
    if http:
        lines += ["", "HTTP client (same minimal loop, C=64, 128 x 512 chunks): " +
                  ", ".join(f"{k} {v['cpu_us_per_chunk']:.1f} us/chunk" for k, v in http.items())]
    for name, why in skipped.items():
        lines.append(f"skipped {name}: {why}")
    for name, why in FAILED.items():
        lines.append(f"failed {name}: {why}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="C=1,16 only; no peers in the timing part")
    ap.add_argument("--json", type=Path, help="write all figures here")
    ap.add_argument("--clients", default="ours,ref,sglang,guidellm,aiperf")
    ap.add_argument("--parts", default="timing,cost,http", help="any of timing, cost, http")
    a = ap.parse_args()
    why = available()
    wanted = a.clients.split(",")
    clients = [c for c in wanted if why.get(c) is None]
    skipped = {c: why.get(c, "unknown client") for c in wanted if c not in clients}
    print(f"clients: {', '.join(clients)}", file=sys.stderr)
    levels = [1, 16] if a.quick else [1, 16, 64]
    parts = a.parts.split(",")
    t = timing(["ours"] if a.quick else clients, levels) if "timing" in parts else []
    c = cost(clients) if "cost" in parts else []
    h = http_clients() if "http" in parts else {}
    print(report(t, c, h, skipped))
    if a.json:
        a.json.write_text(json.dumps({"timing": t, "cost": c, "http": h, "skipped": skipped, "failed": FAILED},
                                     indent=2) + "\n")


if __name__ == "__main__":
    main()
