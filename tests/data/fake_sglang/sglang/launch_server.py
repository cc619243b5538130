"""A fake `python -m sglang.launch_server` for launcher and matrix tests, on CPU in milliseconds.

It parses its flags with argparse like SGLang (an unknown flag: exit 2 with `error: unrecognized
arguments`), prints its exact argv, and serves on --host/--port what the runner reads from a real
SGLang 0.5.17: /health, /server_info (the ServerArgs fields at top level, internal_states[0] with the
effective max_running_requests: 48 when speculation is on and the flag unset), /flush_cache, /metrics
(with --enable-metrics: the finished-request counters generation_tokens_total, spec_verify_calls_total and
num_requests_total, never reset by /flush_cache), streamed /generate whose chunks have the shape recorded
from the real server (tests/data/sglang/generate_stream.txt): compact JSON, cumulative text, meta_info with
completion_tokens on every chunk and spec_verify_ct + the spec_* acceptance fields on the last, then
`data: [DONE]`, and streamed /v1/chat/completions as recorded (chat_stream.txt): no steps on the wire.
internal_states[0].avg_spec_accept_length appears once a speculative request finished since the last
flush (0.5.17 leaves the key out until it has counted steps; it folds them in per decode-log interval,
the fake at once).

Speculation is simulated: with --speculative-algorithm each verify step yields 1 + (step % 3) tokens.
Answers run to max tokens (finish_reason length) unless --eos-after N (fake only) ends them at end of sequence
after N tokens (finish_reason stop), as a real target's answers end before max tokens; a request that sets
`ignore_eos` (a /v1 body's top level, /generate's sampling_params) still runs to max tokens, and so does every
answer of a server under SGLANG_SIMULATE_ACC_LEN: the forced tokens are not the target's choice, so its end of
sequence never comes (docs/bench.md#ignore-eos).
Under a kept cache (TRITON_CACHE_DIR) a start writes the kernels it lacks: the target's, and EAGLE's draft's.
--crash-after-start exits with code 7; --crash-after-requests N exits with code 9 after N requests.

Stopping behaves as 0.5.17's (toolkit/serve/sglang.py STOP_SIGNAL has the source references): the fake has
a child "scheduler" process in its group and a subprocess watchdog polling it every 1 s. SIGINT to the
main process: uvicorn 0.55's graceful shutdown ("Shutting down"; while a background task runs,
--background-task-s, default 1.5 s as the H200's logs show, "Waiting for background tasks to complete. (CTRL+C to
force quit)" and the wait for it, which a second SIGINT cuts short, skipping the application shutdown too),
then the child is killed and the main process exits 0; a SIGINT after the serve loop returned is a
KeyboardInterrupt where launch_server kills its children (uvicorn has restored the handlers); --exit-s makes
the interpreter's exit after that take as long as it took on the H200. SIGTERM
to it: "Draining requests", acted on at the next tick of a 5 s poll. SIGTERM to the whole group: the child
dies with -15, the watchdog SIGQUITs the main process, which sleeps 5 s "before crash diagnostics" and
kills itself. Fake only: --ignore-stop-signals ignores SIGINT, SIGTERM and SIGQUIT (the escalation path).
"""
import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

print("FAKE-SGLANG-ARGV " + json.dumps(sys.argv[1:]), flush=True)
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"), flush=True)
for _name in ("SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE"):
    if _name in os.environ:  # as 0.5.17 reads them (spec_utils.py): a forced acceptance length, off when < 0
        print(f"{_name}={os.environ[_name]}", flush=True)
SIMULATE_ACC_LEN = float(os.environ.get("SGLANG_SIMULATE_ACC_LEN") or -1)
p = argparse.ArgumentParser(prog="launch_server.py")
for flag in ("--model-path", "--served-model-name", "--host", "--load-format", "--attention-backend",
             "--speculative-algorithm", "--speculative-draft-model-path"):
    p.add_argument(flag)
for flag in ("--port", "--tp-size", "--max-running-requests", "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--speculative-num-steps",
             "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-disable-batch-threshold",
             "--crash-after-requests"):
    p.add_argument(flag, type=int)
p.add_argument("--mem-fraction-static", type=float)
p.add_argument("--cuda-graph-bs", type=int, nargs="+")
for flag in ("--trust-remote-code", "--enable-metrics", "--enable-torch-symm-mem", "--crash-after-start",
             "--disable-overlap-schedule", "--skip-server-warmup", "--ignore-stop-signals"):
    p.add_argument(flag, action="store_true")
p.add_argument("--token-ms", type=float, default=1.0, help="fake: time per decode step")
p.add_argument("--eos-after", type=int, help="fake: answers end at end of sequence after this many tokens "
               "(unless the request sets ignore_eos, or acceptance is forced)")
p.add_argument("--exit-s", type=float, default=0.0, help="fake: how long the interpreter's exit takes after "
               "launch_server returned (an atexit handler; on the H200 2.2 s: torch._dynamo's and C teardown)")
p.add_argument("--background-task-s", type=float, default=1.5, help="fake: how long uvicorn's shutdown waits for a "
               "background task")
args = p.parse_args()
# envs/patches/sglang-0.5.17-inject-forward-sleep.patch: a sleep before every step, off unless set
INJECT_S = float(os.environ.get("TOOLKIT_INJECT_FORWARD_SLEEP_MS") or 0) / 1000
if INJECT_S:
    print(f"toolkit-inject: sleeping {INJECT_S * 1000:g} ms before every forward", flush=True)

KERNELS = os.environ.get("TRITON_CACHE_DIR")  # a kept cache (toolkit.serve.jitcache): a start compiles what it
if KERNELS:  # lacks: the target's kernels, and an EAGLE draft's own (as on the H200)
    for kernel in ["target"] + (["eagle-draft"] if args.speculative_algorithm in ("EAGLE", "EAGLE3") else []):
        path = os.path.join(KERNELS, f"fake-{kernel}.json")
        print(("reusing " if os.path.exists(path) else "compiling ") + path, flush=True)
        with open(path, "w") as f:
            f.write("{}")

if args.crash_after_start:
    print("fatal: simulated crash during start", flush=True)
    sys.exit(7)

SPEC = args.speculative_algorithm is not None


def log(text: str) -> None:
    print(time.strftime("[%Y-%m-%d %H:%M:%S] ") + text, flush=True)


# SGLang 0.5.17's start-up marks (toolkit.engines.sglang.STARTUP_MARKS), in its order
log("server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in vars(args).items()) + ")")
if SPEC and args.max_running_requests is None:  # as srt/arg_groups/speculative_hook.py
    log("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
        "setting --max-running-requests.")
# as 0.5.17: the resolved limit at top level and in internal_states[0]; None for a plain server without the flag
MAX_RUNNING = args.max_running_requests or (48 if SPEC else None)
STATE = {"requests": 0, "accepted": 0, "steps": 0, "tokens_total": 0, "steps_total": 0, "finished_total": 0}
LOCK = threading.Lock()
SERVER_ARGS = {k: v for k, v in vars(args).items()
               if not k.startswith("crash") and k not in ("token_ms", "ignore_stop_signals", "background_task_s",
                                                          "eos_after")}


def server_info() -> dict:
    with LOCK:
        state = {"max_running_requests": MAX_RUNNING}
        if SPEC and STATE["steps"]:
            state["avg_spec_accept_length"] = STATE["accepted"] / STATE["steps"]
    return {**SERVER_ARGS, "max_running_requests": MAX_RUNNING, "version": "0.5.17-fake", "internal_states": [state]}


def metrics_text() -> str:
    labels = f'engine_type="unified",model_name="{args.served_model_name}"'
    with LOCK:
        acc = STATE["accepted"] / STATE["steps"] if STATE["steps"] else 1.0
        return (f"# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{{{labels}}} {acc}\n"
                f"# TYPE sglang:generation_tokens_total counter\n"
                f"sglang:generation_tokens_total{{{labels}}} {float(STATE['tokens_total'])}\n"
                f"# TYPE sglang:spec_verify_calls_total counter\n"
                f"sglang:spec_verify_calls_total{{{labels}}} {float(STATE['steps_total'])}\n"
                f"# TYPE sglang:num_requests_total counter\n"
                f"sglang:num_requests_total{{{labels}}} {float(STATE['finished_total'])}\n")


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as uvicorn: no 40 ms delayed-ACK stalls between small writes

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        if self.path == "/health":
            self._send(200, b"")
        elif self.path in ("/server_info", "/get_server_info"):
            self._send(200, json.dumps(server_info()).encode())
        elif self.path == "/metrics" and args.enable_metrics:
            self._send(200, metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._send(404, b'{"detail":"Not Found"}')

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/flush_cache":
            with LOCK:
                STATE.update(accepted=0, steps=0)
            self._send(200, b"Cache flushed.\nPlease check backend logs for more details. (When there are running "
                            b"or waiting requests, the operation will not be performed.)\n", "text/plain")
            return
        if self.path not in ("/generate", "/v1/chat/completions"):
            self._send(404, b'{"detail":"Not Found"}')
            return
        req = json.loads(body)
        chat = self.path == "/v1/chat/completions"
        n = int(req["max_tokens"] if chat else req["sampling_params"]["max_new_tokens"])
        ignore_eos = bool(req.get("ignore_eos") if chat else req["sampling_params"].get("ignore_eos"))
        stop = args.eos_after is not None and args.eos_after < n and not ignore_eos and SIMULATE_ACC_LEN < 0
        if stop:  # the answer ends at end of sequence before max tokens
            n = args.eos_after
        finish = "stop" if stop else "length"
        with LOCK:
            STATE["requests"] += 1
            if args.crash_after_requests and STATE["requests"] > args.crash_after_requests:
                print("fatal: simulated crash while serving", flush=True)
                os._exit(9)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        done = steps = 0
        t0 = time.perf_counter()
        if chat:  # as recorded: the role first, then one chunk per token, the finish, the usage
            self._chunk(_chat({"delta": {"role": "assistant", "content": ""}, "finish_reason": None}))
        while done < n:
            k = min(n - done, (int(SIMULATE_ACC_LEN) if SIMULATE_ACC_LEN >= 1 else 1 + steps % 3)) if SPEC else 1
            done += k
            steps += 1
            time.sleep(args.token_ms / 1000 + INJECT_S)
            if chat:
                for i in range(done - k, done):
                    self._chunk(_chat({"delta": {"content": " x"}, "finish_reason": None}, i + 1))
                continue
            end = {"type": "stop", "matched": 2} if stop else {"type": "length", "length": n}
            meta = {"id": "fake", "finish_reason": end if done == n else None,
                    "prompt_tokens": 7, "weight_version": "default", "num_retractions": 0,
                    "completion_tokens": done, "cached_tokens": 0}
            if SPEC and done == n:  # as 0.5.17: the spec_* fields come with the last chunk only
                meta.update(spec_accept_rate=(done - steps) / (3 * steps), spec_accept_length=done / steps,
                            spec_num_correct_drafts=done - steps, spec_num_proposed_drafts=3 * steps,
                            spec_verify_ct=steps, spec_accepted_drafts=done - steps,
                            spec_accept_histogram=[steps], e2e_latency=time.perf_counter() - t0)
            chunk = {"text": "x" * done, "output_ids": [1] * done, "meta_info": meta}
            self._chunk(f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n")
        if chat:
            self._chunk(_chat({"delta": {}, "finish_reason": finish}))
            self._chunk(_chat(None, n))
        with LOCK:  # counted as the request finishes, as SGLang's tokenizer manager does
            STATE["tokens_total"] += done
            STATE["finished_total"] += 1
            if SPEC:
                STATE["accepted"] += done
                STATE["steps"] += steps
                STATE["steps_total"] += steps
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def log_message(self, fmt, *a):
        if self.path != "/generate":  # one line per request would slow the load tests
            print("request " + fmt % a, flush=True)


def _chat(choice: dict | None, tokens: int | None = None) -> str:
    body = {"id": "fake", "object": "chat.completion.chunk", "created": 0, "model": args.served_model_name,
            "choices": [] if choice is None else [{"index": 0, "logprobs": None, "matched_stop": None, **choice}]}
    if tokens is not None:
        body["usage"] = {"prompt_tokens": 7, "total_tokens": 7 + tokens, "completion_tokens": tokens}
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # 64 clients connect at once


def _scheduler() -> subprocess.Popen:
    """The child a real server has (scheduler), in the same process group; it dies with its parent."""
    def pdeathsig():
        import ctypes
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
    return subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"], preexec_fn=pdeathsig)


CHILD = _scheduler()
DRAIN = threading.Event()
WATCHDOG_OFF = threading.Event()


def _kill_tree(include_parent: bool) -> None:
    if CHILD.poll() is None:
        CHILD.kill()
        CHILD.wait()
    log(f"kill_process_tree called: parent_pid={os.getpid()}, include_parent={include_parent}, pid={os.getpid()}")
    if include_parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _subprocess_watchdog() -> None:  # srt/utils/watchdog.py SubprocessWatchdog, 1 s interval
    while not WATCHDOG_OFF.wait(1.0):
        code = CHILD.poll()
        if code not in (None, 0):
            log(f"Subprocess scheduler_0 (pid={CHILD.pid}) crashed with exit code {code}. Triggering SIGQUIT for cleanup...")
            os.kill(os.getpid(), signal.SIGQUIT)
            return


def _sigterm_watchdog() -> None:  # tokenizer_manager.sigterm_watchdog: the flag is read every 5 s
    while not DRAIN.is_set():
        time.sleep(5)
    WATCHDOG_OFF.set()
    CHILD.terminate()  # ShutdownReq: the scheduler exits cleanly
    CHILD.wait()
    _kill_tree(include_parent=True)


def _on_sigterm(signum, frame):
    log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
    DRAIN.set()


def _on_sigquit(signum, frame):
    log("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    WATCHDOG_OFF.set()
    if os.environ.get("SGLANG_PYSPY_DUMP_BEFORE_CRASH", "1") not in ("0", "false"):
        log("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
        time.sleep(5)
    _kill_tree(include_parent=True)


SHUTTING, FORCE = threading.Event(), threading.Event()


def _on_sigint(signum, frame):  # uvicorn's handle_exit: a second SIGINT sets force_exit
    if SHUTTING.is_set():
        FORCE.set()
        return
    SHUTTING.set()
    threading.Thread(target=_shutdown, daemon=True).start()


def _shutdown() -> None:  # uvicorn 0.55 Server.shutdown
    log("INFO:     Shutting down")
    time.sleep(0.1)
    if args.background_task_s > 0 and not FORCE.is_set():
        log("INFO:     Waiting for background tasks to complete. (CTRL+C to force quit)")
        FORCE.wait(args.background_task_s)
    if not FORCE.is_set():  # the lifespan shutdown, skipped on a force exit
        log("INFO:     Waiting for application shutdown.")
        log("INFO:     Application shutdown complete.")
    srv.shutdown()


srv = Server((args.host or "127.0.0.1", args.port or 30000), H)
if args.ignore_stop_signals:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGQUIT, _on_sigquit)
    signal.signal(signal.SIGINT, _on_sigint)
threading.Thread(target=_subprocess_watchdog, daemon=True).start()
threading.Thread(target=_sigterm_watchdog, daemon=True).start()
log("Init torch distributed begin.")  # the scheduler process, here the child above
log("Memory pool end. avail mem=0.00 GB")
log(f"The server is fired up and ready to roll! (fake, max_running_requests={MAX_RUNNING})")
try:
    srv.serve_forever(poll_interval=0.1)  # as uvicorn's main loop tick
    if not args.ignore_stop_signals:  # uvicorn's capture_signals restores the previous handler
        signal.signal(signal.SIGINT, signal.default_int_handler)
finally:
    log(f"INFO:     Finished server process [{os.getpid()}]")
    WATCHDOG_OFF.set()
    _kill_tree(include_parent=False)
    if args.exit_s > 0:
        import atexit

        atexit.register(time.sleep, args.exit_s)
