#!/usr/bin/env bash
# GPU validation capture on a lent H200 (device tool), or any NVIDIA host:
#   bash benchmarks/h200_validate.sh [OUTDIR] [SPEC] [GPUS]
# Writes into OUTDIR (default $OUT, else ./gpu-capture):
#   nvidia-smi-q.xml      `nvidia-smi -q -x`            (test data for parse_nvidia_smi_xml)
#   topo-m.txt            `nvidia-smi topo -m`          (test data for parse_topo_matrix)
#   telemetry.csv         the telemetry query, every 200 ms while validation runs (test data)
#   telemetry-samples.json  toolkit.gpu.telemetry.Telemetry sampling a 6 s bf16 matmul load
#   validate.json         `toolkit gpu validate --json --spec SPEC --gpus GPUS`
#   log.txt               everything printed, human-readable validation included
#   SHA256SUMS            the sha256 of every file above (written last)
# Multicast stays off in every process (shared GPUs): the variables below are exported first.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 NO_COLOR=1
cd "$(dirname "$0")/.."
DEST=${1:-${OUT:-gpu-capture}}
SPEC=${2:-envs/sglang-cu13-blackwell.yaml}
GPUS=${3:-1}
mkdir -p "$DEST"
exec 3>&1 4>&2 > >(tee "$DEST/log.txt") 2>&1
TEE=$!

if ! python3 -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then  # no pydantic there: carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
if python3 -c 'import toolkit.cli' 2>/dev/null; then ENTRY=toolkit.cli; GROUP=gpu; else  # another stage's imports
  ENTRY=toolkit.gpu; GROUP=; echo "toolkit.cli does not import here: using python3 -m toolkit.gpu"; fi  # may fail
toolkit_gpu() { python3 -m $ENTRY $GROUP "$@"; }

echo "== host"; date -u; uname -r; nproc
python3 -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())'
nvidia-smi -q -x > "$DEST/nvidia-smi-q.xml"; echo "nvidia-smi -q -x: rc=$? $(wc -c < "$DEST/nvidia-smi-q.xml") bytes"
nvidia-smi topo -m > "$DEST/topo-m.txt"; echo "== nvidia-smi topo -m (rc=$?)"; cat "$DEST/topo-m.txt"

QUERY=$(python3 -c 'from toolkit.gpu.telemetry import QUERY; print(QUERY)')
nvidia-smi --query-gpu="$QUERY" --format=csv,noheader,nounits -lms 200 > "$DEST/telemetry.csv" &
TEL=$!

echo "== toolkit gpu validate --json --spec $SPEC --gpus $GPUS"
toolkit_gpu validate --json --spec "$SPEC" --gpus "$GPUS" -o "$DEST/validate.json" > /dev/null
echo "rc=$?"
echo "== toolkit gpu validate --spec $SPEC (human output)"
toolkit_gpu validate --spec "$SPEC"
echo "rc=$?"

echo "== Telemetry class under a 6 s bf16 matmul load"
python3 - "$DEST/telemetry-samples.json" <<'PY'
import json, sys, time
import torch
from toolkit.gpu.telemetry import Telemetry, summarize
tel = Telemetry(interval_s=0.25).start()
print("first sample within 10 s:", tel.wait_first(10), tel.reason)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 6
n = 0
while time.time() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize(); n += 20
samples = tel.stop()
summary = summarize(samples)
print(f"{n} matmuls; {len(samples)} samples; summary {json.dumps(summary)}")
json.dump({"interval_s": 0.25, "matmuls": n, "samples": samples, "summary": summary}, open(sys.argv[1], "w"), indent=1)
PY
kill $TEL; wait $TEL 2>/dev/null
echo "telemetry.csv: $(wc -l < "$DEST/telemetry.csv") lines"
ls -la "$DEST"
# every file's sha256, log.txt included once tee has ended (`sha256sum -c SHA256SUMS`; `toolkit results
# verify` checks the folder once it is copied under results/: copy it whole, or write SHA256SUMS again over
# what you keep)
exec 1>&3 2>&4 3>&- 4>&-
wait "$TEE" 2>/dev/null || sleep 1
(cd "$DEST" && find . -type f ! -name SHA256SUMS ! -name '.*.tmp' | sed 's|^\./||' | LC_ALL=C sort \
  | while IFS= read -r f; do sha256sum -- "$f"; done > SHA256SUMS)
echo "SHA256SUMS: $(wc -l < "$DEST/SHA256SUMS") files"
