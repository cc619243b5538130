"""A fake `python -m vllm.entrypoints.cli.main serve MODEL ...` (what the `vllm` script runs) for launcher and
matrix tests, on CPU in milliseconds.

Where its answers come from: vLLM 0.24.0's SOURCE (the PyPI wheel's .py files), read, not recorded. No real
vLLM server has run here (a recording needs the GPU; the issue's GPU sitting should record /v1/chat/completions,
/v1/completions, /metrics and a crashed start's log from 0.24.0 and replace the shapes below by them):
- the chat stream (vllm/entrypoints/openai/chat_completion/serving.py:490-816): the role chunk
  (`delta: {role: assistant, content: ""}`, logprobs null, finish_reason null); then one chunk per engine
  step whose delta carries every token that step made (with speculation, accepted + 1 tokens in one chunk);
  the last token's chunk has finish_reason "length" and stop_reason null; with stream_options.include_usage
  a usage chunk with `choices: []`; then `data: [DONE]`. Compact JSON as pydantic's model_dump_json.
  /v1/completions alike with `text` (completion/serving.py).
- /metrics (vllm/v1/spec_decode/metrics.py:229-231, vllm/v1/metrics/loggers.py:678): prometheus_client
  counters `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`, `..._num_accepted_tokens_total`
  (labels engine, model_name; each with its `_created` sample) with --speculative-config, and
  `vllm:request_success_total` per finished_reason; none with --disable-log-stats.
- /health 200, /v1/models `{object: list, data: [{id: served name, object: model, ...}]}`, /version
  `{version}` (entrypoints/serve/instrumentator/basic.py), /server_info only with VLLM_SERVER_DEV_MODE=1
  (entrypoints/serve/dev/server_info/api_router.py), a trimmed `vllm_config`.
- its log prefix `(APIServer pid=N) INFO 12-06 21:03:28 [file.py:L] text` (vllm/logger.py _FORMAT,
  vllm/utils/system_utils.py:209), and a failed start's end (vllm/v1/engine/core.py:1231, utils.py:1273):
  the engine core's exception, then the front end's "Engine core initialization failed. See root cause above."
- SIGTERM or SIGINT to the API server: its shutdown (entrypoints/launcher.py:95-125), exit 0.

Speculation is simulated: with --speculative-config each step drafts num_speculative_tokens tokens and accepts
step % (num_speculative_tokens + 1) of them. Fake only: --crash-after-start (a failed start as above, exit 1),
--crash-after-requests N (exit 9 after N requests), --token-ms (time per step).
"""
import argparse
import http.server
import json
import os
import signal
import sys
import threading
import time

print("FAKE-VLLM-ARGV " + json.dumps(sys.argv[1:]), flush=True)
PID = os.getpid()


def log(text: str, level: str = "INFO", who: str = "APIServer") -> None:
    print(f"({who} pid={PID}) {level} {time.strftime('%m-%d %H:%M:%S')} [api_server.py:1] {text}", flush=True)


p = argparse.ArgumentParser(prog="vllm serve")
p.add_argument("command", choices=["serve"])
p.add_argument("model_tag")
for flag in ("--host", "--served-model-name", "--load-format", "--dtype", "--speculative-config", "--tokenizer"):
    p.add_argument(flag)
for flag in ("--port", "--max-num-seqs", "--max-model-len", "--max-num-batched-tokens", "--tensor-parallel-size",
             "--crash-after-requests"):
    p.add_argument(flag, type=int)
p.add_argument("--gpu-memory-utilization", type=float)
p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
for flag in ("--disable-log-stats", "--crash-after-start", "--enforce-eager"):
    p.add_argument(flag, action="store_true")
p.add_argument("--token-ms", type=float, default=1.0)
args = p.parse_args()
NAME = args.served_model_name or args.model_tag
SPEC = json.loads(args.speculative_config) if args.speculative_config else None  # argparse type json.loads upstream
N_SPEC = int((SPEC or {}).get("num_speculative_tokens") or 0)

log(f"vLLM API server version 0.24.0-fake")
log(f"non-default args: {dict((k, v) for k, v in vars(args).items() if v is not None and k != 'command')}")
if args.crash_after_start:
    core = f"EngineCore_DP0 pid={PID + 1}"
    print(f"({core}) ERROR {time.strftime('%m-%d %H:%M:%S')} [core.py:1231] EngineCore failed to start.", flush=True)
    print(f"({core}) Traceback (most recent call last):", flush=True)
    print(f'({core})   File "/x/vllm/v1/engine/core.py", line 1222, in run_engine_core', flush=True)
    print(f"({core}) ValueError: simulated: the draft model's vocabulary differs from the target's", flush=True)
    print(f"(APIServer pid={PID}) RuntimeError: Engine core initialization failed. See root cause above. "
          "Failed core proc(s): {}", flush=True)
    sys.exit(1)

LOCK = threading.Lock()
STATE = {"requests": 0, "drafts": 0, "draft_tokens": 0, "accepted": 0, "success": 0}
CREATED = time.time()


def metrics_text() -> str:
    lab = f'engine="0",model_name="{NAME}"'
    out = []
    with LOCK:
        if SPEC and not args.disable_log_stats:
            for name, key in (("vllm:spec_decode_num_drafts", "drafts"), ("vllm:spec_decode_num_draft_tokens",
                              "draft_tokens"), ("vllm:spec_decode_num_accepted_tokens", "accepted")):
                out += [f"# HELP {name}_total doc", f"# TYPE {name}_total counter",
                        f"{name}_total{{{lab}}} {float(STATE[key])}", f"{name}_created{{{lab}}} {CREATED}"]
        if not args.disable_log_stats:
            out += ["# TYPE vllm:request_success_total counter",
                    f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="{NAME}"}} '
                    f"{float(STATE['success'])}",
                    f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{NAME}"}} 0.0']
    return "\n".join(out) + "\n"


def _dump(obj) -> str:
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [
                {"id": NAME, "object": "model", "created": int(CREATED), "owned_by": "vllm", "root": args.model_tag,
                 "parent": None, "max_model_len": args.max_model_len or 4096}]}).encode())
        elif self.path == "/version":
            self._send(200, b'{"version":"0.24.0-fake"}')
        elif self.path.startswith("/server_info") and os.environ.get("VLLM_SERVER_DEV_MODE") == "1":
            cfg = {"model_config": {"model": args.model_tag}, "scheduler_config": {"max_num_seqs": args.max_num_seqs or 256},
                   "speculative_config": SPEC}
            self._send(200, json.dumps({"vllm_config": cfg, "vllm_env": {}, "system_env": {}}).encode())
        elif self.path == "/metrics":
            self._send(200, metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._send(404, b'{"detail":"Not Found"}')

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, b'{"detail":"Not Found"}')
            return
        req = json.loads(body)
        chat = self.path == "/v1/chat/completions"
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        with LOCK:
            STATE["requests"] += 1
            if args.crash_after_requests and STATE["requests"] > args.crash_after_requests:
                log("simulated crash while serving", "ERROR")
                os._exit(9)
        usage = bool((req.get("stream_options") or {}).get("include_usage"))
        rid = ("chatcmpl-" if chat else "cmpl-") + f"fake{STATE['requests']}"
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
                "model": NAME}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if chat:
            self._chunk(_dump({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                    "logprobs": None, "finish_reason": None}]}))
        done = step = 0
        while done < n:
            k = min(n - done, 1 + step % (N_SPEC + 1)) if SPEC else 1
            if SPEC:
                with LOCK:
                    STATE["drafts"] += 1
                    STATE["draft_tokens"] += N_SPEC
                    STATE["accepted"] += k - 1
            done += k
            step += 1
            time.sleep(args.token_ms / 1000)
            last = done == n
            choice = {"index": 0, "logprobs": None, "finish_reason": "length" if last else None}
            choice.update({"delta": {"content": " x" * k}} if chat else {"text": " x" * k})
            if last:
                choice["stop_reason"] = None
            self._chunk(_dump({**head, "choices": [choice]}))
        with LOCK:
            STATE["success"] += 1
        if usage:
            self._chunk(_dump({**head, "choices": [], "usage": {"prompt_tokens": 7, "total_tokens": 7 + n,
                                                                "completion_tokens": n}}))
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def log_message(self, fmt, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


srv = Server((args.host or "127.0.0.1", args.port or 8000), H)


def _stop(signum, frame):  # entrypoints/launcher.py: the shutdown event, then the engine client stops
    log("[shutdown] API server: shutdown triggered")
    threading.Thread(target=srv.shutdown, daemon=True).start()


signal.signal(signal.SIGTERM, _stop)
signal.signal(signal.SIGINT, _stop)
log("Starting vLLM API server 0 on http://%s:%d" % srv.server_address)
log("Application startup complete.")
srv.serve_forever(poll_interval=0.1)
log("[shutdown] API server: engine client stopped")
