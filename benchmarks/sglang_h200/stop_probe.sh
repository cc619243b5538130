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
stamp "start"
setsid python3 -m sglang.launch_server --model-path /tmp/toolkit-sglang/models/llama-1b --served-model-name llama-1b \
  --load-format dummy --attention-backend triton --mem-fraction-static 0.8 --cuda-graph-max-bs-decode 32 \
  --disable-overlap-schedule --skip-server-warmup --port $PORT --host 127.0.0.1 > "$DEST/server.log" 2>&1 &
PID=$!
for i in $(seq 1 300); do
  python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null && break
  kill -0 $PID 2>/dev/null || { echo "server died"; tail -30 "$DEST/server.log"; touch "$DEST/DONE"; exit 1; }
  sleep 1
done
stamp "healthy"
python3 -m toolkit.loadgen http://127.0.0.1:$PORT --concurrency 4 --requests 8 --output-len 16 --model llama-1b 2>&1 | tail -3
python3 - "$PID" "$SECOND_S" <<'PY'
import os, signal, sys, time
pid, second = int(sys.argv[1]), float(sys.argv[2])
t0 = time.monotonic()
os.kill(pid, signal.SIGINT)
sent2 = None
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print(f"exited after {time.monotonic() - t0:.2f} s, status {status}, second SIGINT at "
              f"{sent2 if sent2 is None else round(sent2, 2)} s")
        break
    if sent2 is None and time.monotonic() - t0 >= second:
        os.kill(pid, signal.SIGINT)
        sent2 = time.monotonic() - t0
    if time.monotonic() - t0 > 30:
        print("still running after 30 s: SIGKILL to the group"); os.killpg(pid, signal.SIGKILL); break
    time.sleep(0.01)
time.sleep(1)
left = os.popen(f"ps -eo pid,pgid,cmd | awk '$2=={pid}'").read().strip()
print("left in the group:", left or "nothing")
PY
tail -12 "$DEST/server.log"
stamp "done"
touch "$DEST/DONE"
