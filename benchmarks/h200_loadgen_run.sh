#!/bin/bash
# The H200 run of benchmarks/loadgen_workers.py and loadgen_parse.py (issue 18), as the device tool ran it:
# from the repository root with an ignored .r18/ carried, holding src/ (`git archive` of the branch),
# base/ (main's, the before of loadgen_parse and the base-* capacity rows), sgl/ (sglang's wheel unpacked),
# model/ (a tokenizer for sglang.bench_serving), whl/ (cp312 wheels: pydantic, msgspec, orjson, pybase64, ...)
# and this script. Output under $OUT. PY=python3 unless given; NO_WHEELS=1, DEPS=DIR, ARGS=... for a dry
# run elsewhere (2 cores: ARGS="--quick --workers 1,4" BUDGET=40).
set -o pipefail
cd .r18 || exit 1
PY=${PY:-python3}
if [ -z "$NO_WHEELS" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
{ nproc; uname -r; ulimit -n; ulimit -Hn; $PY -V
  $PY -c "import uvloop, aiohttp, numpy, transformers; print(uvloop.__version__, aiohttp.__version__, numpy.__version__, transformers.__version__)"
  lscpu | grep -E "Model name|^CPU\(s\)"
  $PY - <<'PYEOF'
import socket, struct, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, 35, 1); srv.bind(("127.0.0.1", 0)); srv.listen()
time.sleep(0.2)  # the kernel turns receive timestamps on a moment after the first socket asks (deferred work)
c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()
t = time.perf_counter(); c.send(b"x" * 300); time.sleep(0.05)
data, anc, *_ = s.recvmsg(4096, 1024)
off = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
k = [(struct.unpack("qq", d[:16])[0] * 10**9 + struct.unpack("qq", d[:16])[1] - off) / 1e9 for l, ty, d in anc if ty == 35]
print("SO_TIMESTAMPNS on TCP loopback:", f"kernel arrival - send {(k[0] - t) * 1e6:.1f} us" if k else "NO TIMESTAMP")
PYEOF
} 2>&1 | tee $OUT/env.txt
cd src
$PY benchmarks/loadgen_parse.py --baseline ../base 2>&1 | tee $OUT/loadgen_parse_h200.txt
$PY benchmarks/loadgen_workers.py --baseline ../base --extra-from ${EXTRA_FROM:-293} --sglang ../sgl --sglang-deps ${DEPS:-/tmp/site} \
  --tokenizer ../model --json $OUT/loadgen_workers_h200.json --budget-s ${BUDGET:-330} $ARGS 2>&1 | tee $OUT/loadgen_workers_h200.txt
