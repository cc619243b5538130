#!/usr/bin/env bash
# Issue 29: does a second SIGINT end SGLang 0.5.17's shutdown sooner? uvicorn logs "Waiting for background
# tasks to complete. (CTRL+C to force quit)" for ~2 s after the first SIGINT (the toolkit's stops took
# 3.8-4.5 s on the H200); a second SIGINT sets its force_exit. One server start (the noise Environment's
# baseline preset), 8 streamed requests through the toolkit's load generator (so kept-alive connections
# exist as in a run), then SIGINT to the leader, a second one after SECOND_S (default 0.5), and the times.
#   bash benchmarks/sglang_h200/stop_probe.sh [DEST]
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/stop-probe}
SCRIPT=benchmarks/sglang_h200/stop_probe.sh ENV_SPEC=envs/sglang-0.5.17-h200-noise.yaml
source benchmarks/sglang_h200/setup.sh
SECOND_S=${SECOND_S:-0.5}
PORT=30000
stamp "start, load, stop (one Python process owns the server)"
python3 - "$DEST" "$SECOND_S" <<'PY'
import os, signal, subprocess, sys, time, urllib.request
dest, second, port = sys.argv[1], float(sys.argv[2]), 30000
cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/tmp/toolkit-sglang/models/llama-1b",
       "--served-model-name", "llama-1b", "--load-format", "dummy", "--attention-backend", "triton",
       "--mem-fraction-static", "0.8", "--cuda-graph-max-bs-decode", "32", "--disable-overlap-schedule",
       "--skip-server-warmup", "--port", str(port), "--host", "127.0.0.1"]
log = open(f"{dest}/server.log", "w")
t = time.monotonic()
p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
while True:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        break
    except Exception:
        if p.poll() is not None or time.monotonic() - t > 400:
            print("server did not come up; rc", p.poll()); sys.exit(1)
        time.sleep(1)
print(f"healthy after {time.monotonic() - t:.1f} s", flush=True)
r = subprocess.run([sys.executable, "-m", "toolkit.loadgen", f"http://127.0.0.1:{port}", "--concurrency", "4",
                    "--requests", "8", "--output-len", "16", "--model", "llama-1b"], capture_output=True, text=True)
print(r.stdout[-600:], r.stderr[-300:], flush=True)
t0 = time.monotonic()
p.send_signal(signal.SIGINT)
sent2 = None
while p.poll() is None:
    if sent2 is None and time.monotonic() - t0 >= second:
        p.send_signal(signal.SIGINT)
        sent2 = round(time.monotonic() - t0, 2)
    if time.monotonic() - t0 > 30:
        print("still running after 30 s: SIGKILL to the group"); os.killpg(p.pid, signal.SIGKILL); break
    time.sleep(0.01)
print(f"leader exited after {time.monotonic() - t0:.2f} s, rc {p.returncode}, second SIGINT at {sent2} s", flush=True)
for _ in range(100):
    left = subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True, text=True).stdout.split()
    if not left:
        break
    time.sleep(0.1)
print(f"group empty after {time.monotonic() - t0:.2f} s" if not left else f"left in the group: {left}")
PY
tail -14 "$DEST/server.log"
stamp "done"
touch "$DEST/DONE"
