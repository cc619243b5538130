"""Record what a real vLLM server sends and says (for tests/data/vllm/, the fixtures the fake vLLM of
tests/data/fake_vllm should be made from; issue 45), through the toolkit's own process launcher:

    python3 benchmarks/vllm_gpu/record.py OUT [--env ENV] [--python PY] [--site DIR] [--dry]

Three starts of the Environment's `ngram` preset (ENV default: envs/vllm-0.24.0-quickstart.yaml):
1. with a flag vLLM does not have (`--no-such-flag 1`): its argparse's refusal; OUT/bad_flag.log and what the
   toolkit reports of it (the ToolFailure's message, the engine's last_error_line);
2. with `--gpu-memory-utilization 0.001`: a failure inside the engine core (no memory left for the KV cache),
   the shape behind vLLM's "Engine core initialization failed. See root cause above" (OUT/engine_fail.log);
   with --dry (the fake vLLM) its --crash-after-start instead;
3. as written, healthy: OUT/fixtures/ gets the raw bodies of /health, /version, /server_info (dev mode),
   /v1/models, /metrics before and after the requests (spec_decode counters), a streamed /v1/chat/completions
   and /v1/completions (the bodies the matrix sends), the error bodies of a prompt longer than max-model-len
   (chat and completions), and index.json (status, content type, request of each); OUT/server.log, the start's
   log; OUT/record.json: start-up and stop times, the command, the acceptance the engine reads from the
   counters (toolkit.engines.get("vllm").acceptance_counts), the toolkit's launcher facts.
OUT/SHA256SUMS: every file above (`sha256sum -c SHA256SUMS`).
--site DIR puts the carried vLLM set (benchmarks/sglang_h200/unpack.py --dest DIR) on the server's PYTHONPATH
alone; --python the interpreter that runs it (default: this one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.sglang_h200.record import call  # noqa: E402 - one raw HTTP call for both engines' recorders

ENV = ROOT / "envs" / "vllm-0.24.0-quickstart.yaml"
PRESET = "ngram"
CODE = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
MESSAGES = [{"role": "system", "content": "You are a senior software engineer."},
            {"role": "user", "content": "Add a docstring example to this function.\n\n```python\n" + CODE + "```"}]


def record(base: str, model: str, out: Path) -> dict:
    """Every endpoint the toolkit reads, raw. The streamed bodies are the ones the matrix sends
    (toolkit.loadgen.client.build_body: stream_options with include_usage and continuous_usage_stats)."""
    out.mkdir(parents=True, exist_ok=True)
    stream_options = {"include_usage": True, "continuous_usage_stats": True}
    too_long = "word " * 5000  # > max-model-len 4096 tokens with any tokenizer that keeps spaces
    calls = [
        ("health", "GET", "/health", None),
        ("version", "GET", "/version", None),
        ("server_info", "GET", "/server_info?config_format=json", None),
        ("models", "GET", "/v1/models", None),
        ("metrics_before", "GET", "/metrics", None),
        ("chat_stream", "POST", "/v1/chat/completions",
         {"model": model, "messages": MESSAGES, "max_tokens": 24, "temperature": 0.0, "stream": True,
          "stream_options": stream_options, "ignore_eos": True}),
        ("completions_stream", "POST", "/v1/completions",
         {"model": model, "prompt": CODE, "max_tokens": 24, "temperature": 0.0, "stream": True,
          "stream_options": stream_options, "ignore_eos": True}),
        ("chat", "POST", "/v1/chat/completions",
         {"model": model, "messages": MESSAGES, "max_tokens": 24, "temperature": 0.0, "ignore_eos": True}),
        ("too_long_chat", "POST", "/v1/chat/completions",
         {"model": model, "messages": [{"role": "user", "content": too_long}], "max_tokens": 16, "stream": True,
          "stream_options": stream_options}),
        ("too_long_completions", "POST", "/v1/completions",
         {"model": model, "prompt": too_long, "max_tokens": 16, "stream": True, "stream_options": stream_options}),
        ("metrics", "GET", "/metrics", None),
    ]
    index = {}
    for name, method, path, body in calls:
        status, headers, raw = call(base, method, path, body)
        ctype = headers.get("Content-Type")
        ext = ".txt" if name.endswith("stream") or name.startswith(("metrics", "health")) else ".json"
        (out / f"{name}{ext}").write_bytes(raw)
        index[name] = {"method": method, "path": path, "request": body, "status": status, "content_type": ctype,
                       "file": f"{name}{ext}", "bytes": len(raw)}
        print(f"{method} {path}: {status}, {len(raw)} bytes" + (f": {raw[:300]!r}" if status >= 400 else ""),
              flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def failed_start(env, preset: str, extra: dict, log: Path, kw: dict, timeout_s: float = 300) -> dict:
    """Start the preset with `extra` flags, expecting it to fail: what the toolkit says of it."""
    from toolkit.engines.vllm import last_error_line
    from toolkit.errors import ToolkitError
    from toolkit.serve import launcher_for

    base = dict(env.model.servers[preset])
    env.model.servers[preset] = {**base, **extra}
    t0 = time.monotonic()
    got: dict = {"flags": extra}
    try:
        srv = launcher_for(env, preset, kind="process", log_path=log, **kw)
        try:
            srv.wait_healthy(timeout_s=timeout_s)
            got["outcome"] = "healthy (not the failure asked for)"
        finally:
            srv.stop()
    except ToolkitError as exc:
        got.update(outcome="failed", message=str(exc), hint=getattr(exc, "hint", None))
    finally:
        env.model.servers[preset] = base
    text = log.read_text(errors="replace") if log.exists() else ""
    got.update(seconds=round(time.monotonic() - t0, 2), last_error_line=last_error_line(text),
               log_lines=len(text.splitlines()))
    print(f"{extra}: {got['outcome']} after {got['seconds']} s; last error line: {got['last_error_line']}", flush=True)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--env", type=Path, default=ENV)
    ap.add_argument("--preset", default=PRESET)
    ap.add_argument("--python", default=None, help="the interpreter that runs vLLM (default: this one)")
    ap.add_argument("--site", default=None, help="the carried vLLM set, the server's PYTHONPATH")
    ap.add_argument("--dry", action="store_true", help="the fake vLLM: its --crash-after-start for step 2")
    a = ap.parse_args()

    from toolkit.checksums import write_sums
    from toolkit.engines import get
    from toolkit.serve import launcher_for
    from toolkit.serve.base import metrics_snapshot
    from toolkit.specs import load_spec

    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    env = load_spec(a.env)
    kw = {"python": a.python, **({"env": {"PYTHONPATH": a.site}} if a.site else {})}
    result: dict = {"env": str(a.env), "preset": a.preset}
    result["bad_flag"] = failed_start(env, a.preset, {"no-such-flag": 1}, out / "bad_flag.log", kw)
    fail = {"crash-after-start": True} if a.dry else {"gpu-memory-utilization": 0.001}
    result["engine_fail"] = failed_start(env, a.preset, fail, out / "engine_fail.log", kw)

    args = dict(env.model.servers[a.preset])
    srv = launcher_for(env, a.preset, kind="process", log_path=out / "server.log", **kw)
    t0 = time.monotonic()
    srv.wait_healthy(timeout_s=900)
    result["start_s"] = round(time.monotonic() - t0, 2)
    print(f"{a.preset} healthy after {result['start_s']} s: {srv.base_url}", flush=True)
    try:
        before = metrics_snapshot(srv.base_url)
        result["index"] = record(srv.base_url, args.get("served-model-name") or args["model"], out / "fixtures")
        after = metrics_snapshot(srv.base_url)
        eng = get("vllm")
        counts = {"before": eng.acceptance_counts(before), "after": eng.acceptance_counts(after)}
        result["acceptance"] = {k: asdict(c) if c is not None else None for k, c in counts.items()}
        result["info"] = srv.info()
    finally:
        t1 = time.monotonic()
        srv.stop()
        result["stop_s"] = round(time.monotonic() - t1, 2)
        stop = srv.stop_info()
        result["stop"] = stop.model_dump() if hasattr(stop, "model_dump") else stop
    result["command"] = srv.command
    (out / "record.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    write_sums(out)
    print(f"acceptance from the counters: {result['acceptance']}; stop {result['stop_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
