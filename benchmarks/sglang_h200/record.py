"""Record what a real SGLang server sends (the fixtures of tests/data/sglang/), then show the
speculative-disable-batch-threshold patch at work on it. One server start, through the toolkit's own
process launcher:

    python3 benchmarks/sglang_h200/record.py OUT [PRESET]      # PRESET default: eagle3-threshold

OUT/fixtures/: the raw bodies of /health, /server_info, /v1/models, /metrics, /flush_cache, a streamed
/generate, a streamed /v1/chat/completions and /v1/completions (and index.json: status, headers, request).
OUT/threshold.json: three phases of load (2, 16, then 2 requests at a time) with per-request acceptance,
/server_info before and after each, and the server log lines the patch writes when drafting switches.
OUT/SHA256SUMS: every file above (`sha256sum -c SHA256SUMS`; `toolkit results verify` checks it).
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

ENV = ROOT / "envs" / "sglang-0.5.17-h200.yaml"
PROMPT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"


def call(base: str, method: str, path: str, body: dict | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One request; the headers come back as http.client's message, which looks names up case-insensitively
    (SGLang's JSON answers say `content-type`, its /metrics `Content-Type`)."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    raw = r.read()  # chunked transfer decoded: the SSE body exactly as the client parses it
    conn.close()
    return r.status, r.headers, raw


def record(base: str, model: str, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    calls = [
        ("health", "GET", "/health", None),
        ("server_info", "GET", "/server_info", None),
        ("models", "GET", "/v1/models", None),
        ("generate_stream", "POST", "/generate",
         {"text": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 12, "temperature": 0,
                                                              "ignore_eos": True}}),
        ("generate", "POST", "/generate",
         {"text": PROMPT, "sampling_params": {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}}),
        ("chat_stream", "POST", "/v1/chat/completions",
         {"model": model, "messages": [{"role": "user", "content": "Write a haiku about caches."}],
          "max_tokens": 12, "temperature": 0, "stream": True, "ignore_eos": True,
          "stream_options": {"include_usage": True, "continuous_usage_stats": True}}),
        ("completions_stream", "POST", "/v1/completions",
         {"model": model, "prompt": PROMPT, "max_tokens": 12, "temperature": 0, "stream": True, "ignore_eos": True,
          "stream_options": {"include_usage": True}}),
        ("metrics", "GET", "/metrics", None),
        ("flush_cache", "POST", "/flush_cache", None),
        ("server_info_after", "GET", "/server_info", None),
    ]
    index = {}
    for name, method, path, body in calls:
        status, headers, raw = call(base, method, path, body)
        ext = ".txt" if name.endswith("stream") or name in ("metrics", "flush_cache", "health") else ".json"
        (out / f"{name}{ext}").write_bytes(raw)
        index[name] = {"method": method, "path": path, "request": body, "status": status,
                       "content_type": headers.get("Content-Type"), "file": f"{name}{ext}", "bytes": len(raw)}
        print(f"{method} {path}: {status}, {len(raw)} bytes", flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def phase(base: str, conc: int, n: int, seed: int) -> dict:
    from toolkit.loadgen import CellLoad, run, run_cell
    from toolkit.schema.records import Prompt
    from toolkit.serve.sglang import server_info

    prompts = [Prompt(id=f"p{i}", domain="coding", prompt=f"{PROMPT}# variant {i}\n") for i in range(n)]
    before = server_info(base)
    t = time.time()
    load = CellLoad(api="generate", concurrency=conc, requests=n, warmup=0, output_len=64, seed=seed,
                    request_params={"sampling_params": {"ignore_eos": True}})
    recs = run(run_cell(base, load, prompts))
    acc = [r.accept_length for r in recs if r.accept_length]
    return {"concurrency": conc, "requests": n, "start": t, "end": time.time(),
            "errors": [r.error for r in recs if r.error][:3],
            "accept_length_mean": sum(acc) / len(acc) if acc else None, "accept_length_min": min(acc, default=None),
            "accept_length_max": max(acc, default=None),
            "internal_state_before": (before.get("internal_states") or [{}])[0],
            "internal_state_after": (server_info(base).get("internal_states") or [{}])[0]}


def main(out: Path, preset: str) -> int:
    from toolkit.serve import launcher_for
    from toolkit.specs import load_spec

    env = load_spec(ENV)
    if preset not in env.model.servers:
        print(f"preset {preset} is not in {ENV}; using eagle3", flush=True)
        preset = "eagle3"
    args = dict(env.model.servers[preset])
    args.setdefault("enable-metrics", True)
    env.model.servers[preset] = args
    log = out / f"{preset}.log"
    srv = launcher_for(env, preset, kind="process", log_path=log)
    t0 = time.monotonic()
    srv.wait_healthy(timeout_s=600)
    started = time.monotonic() - t0
    print(f"{preset} healthy after {started:.1f} s: {srv.base_url}", flush=True)
    try:
        record(srv.base_url, args.get("served-model-name") or args["model-path"], out / "fixtures")
        phases = [phase(srv.base_url, c, n, i) for i, (c, n) in enumerate([(2, 8), (16, 48), (2, 8)])]
    finally:
        srv.stop()
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if "toolkit-threshold" in ln]
    result = {"preset": preset, "args": args, "start_s": started, "command": srv.command, "phases": phases,
              "threshold_log_lines": lines}
    (out / "threshold.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    from toolkit.checksums import write_sums

    write_sums(out)  # `toolkit results verify` checks a copy of OUT under results/ (copy it whole)
    for p in phases:
        print(f"c={p['concurrency']}: accept_length mean {p['accept_length_mean']}, errors {p['errors']}")
    print(f"{len(lines)} toolkit-threshold log lines; first: {lines[:4]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "eagle3-threshold"))
