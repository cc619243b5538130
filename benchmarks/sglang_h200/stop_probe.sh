#!/usr/bin/env bash
# Issue 29: where the rest of a stop goes. The toolkit's stop (SIGINT to the leader, uvicorn's force quit when
# its log asks for it: toolkit/serve/stopping.py) took 2.6-3.4 s on the H200, all of it before the main process
# exited, and SGLang's log (whole-second stamps) does not say on what. One server start (the noise
# Environment's baseline preset), 16 streamed requests through the toolkit's load generator (so SGLang's 2 s
# abort tasks are pending, as after a cell), then the stop through stop_process while py-spy dumps every
# process of the group every STEP_S (default 0.25 s) until it is gone: DEST/stop-dumps.txt, and the times.
#   bash benchmarks/sglang_h200/stop_probe.sh [DEST]       # py-spy from .whl/py_spy-*.whl (carried) or PATH
# Dry run on a CPU: SGL_DRY=1 SITE=$PWD/tests/data/fake_sglang bash benchmarks/sglang_h200/stop_probe.sh /tmp/sp
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/stop-probe}
SCRIPT=benchmarks/sglang_h200/stop_probe.sh ENV_SPEC=envs/sglang-0.5.17-h200-noise.yaml
source benchmarks/sglang_h200/setup.sh
mkdir -p "$DEST"
PYSPY=${PYSPY:-$(command -v py-spy || true)}
if [ -z "$PYSPY" ] && ls .whl/py_spy-*.whl >/dev/null 2>&1; then
  rm -rf /tmp/pyspy && mkdir -p /tmp/pyspy && python3 -m zipfile -e .whl/py_spy-*.whl /tmp/pyspy
  PYSPY=$(find /tmp/pyspy -path "*scripts/py-spy" -type f | head -1) && chmod +x "$PYSPY"
fi
echo "py-spy: ${PYSPY:-none (times only)}"
stamp "start, load, stop (one Python process owns the server)"
PYSPY="$PYSPY" python3 - "$DEST" "${STEP_S:-0.25}" <<'PY'
import os, signal, subprocess, sys, threading, time, urllib.request
from pathlib import Path
from toolkit.serve.sglang import FORCE_QUIT, STOP_SIGNAL, STOP_WAIT_S
from toolkit.serve.stopping import group_alive, stop_process
dest, step, port = Path(sys.argv[1]), float(sys.argv[2]), 30000
dry = bool(os.environ.get("SGL_DRY"))
cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/tmp/toolkit-sglang/models/llama-1b",
       "--served-model-name", "llama-1b", "--port", str(port), "--host", "127.0.0.1"]
if not dry:
    cmd += ["--load-format", "dummy", "--attention-backend", "triton", "--mem-fraction-static", "0.8",
            "--cuda-graph-max-bs-decode", "32", "--disable-overlap-schedule", "--skip-server-warmup"]
log_path = dest / "server.log"
t = time.monotonic()
p = subprocess.Popen(cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, start_new_session=True)
while True:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        break
    except Exception:
        if p.poll() is not None or time.monotonic() - t > 400:
            print("server did not come up; rc", p.poll()); sys.exit(1)
        time.sleep(1)
print(f"healthy after {time.monotonic() - t:.1f} s", flush=True)
r = subprocess.run([sys.executable, "-m", "toolkit.loadgen", f"http://127.0.0.1:{port}", "--concurrency", "8",
                    "--requests", "16", "--output-len", "16", "--model", "llama-1b"], capture_output=True, text=True)
print(r.stdout[-400:], r.stderr[-300:], flush=True)
pyspy, dumps, notes = os.environ.get("PYSPY"), open(dest / "stop-dumps.txt", "w"), {}
t0 = time.monotonic()
stopper = threading.Thread(target=lambda: notes.update(stop_process(p, "sglang", STOP_SIGNAL, False, STOP_WAIT_S,
                                                                    log_path, FORCE_QUIT)))
stopper.start()
while stopper.is_alive() and group_alive(p.pid):
    now = time.monotonic() - t0
    pids = subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True, text=True).stdout.split()
    dumps.write(f"===== {now:.2f} s into the stop: group {pids}\n")
    for pid in pids if pyspy else []:
        d = subprocess.run([pyspy, "dump", "--nonblocking", "--pid", pid], capture_output=True, text=True, timeout=10)
        dumps.write(d.stdout[-6000:] + d.stderr[-500:] + "\n")
    dumps.flush()
    time.sleep(max(0.0, step - (time.monotonic() - t0 - now)))
stopper.join()
print(f"stop: {notes}", flush=True)
PY
tail -20 "$DEST/server.log"
grep -c "=====" "$DEST/stop-dumps.txt" 2>/dev/null | sed 's/^/samples: /'
stamp "done"
touch "$DEST/DONE"
