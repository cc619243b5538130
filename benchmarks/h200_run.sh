#!/usr/bin/env bash
# Issue 9's archived GPU benchmark: `toolkit bench matrix` with the transformers engine on CUDA, a
# ~1.2B-parameter dummy Llama made on the machine, arms baseline / n-gram prompt lookup / baseline with
# continuous batching, 2 domains x 3 concurrency levels (benchmarks/h200/matrix-h200.yaml).
#
# On a lent H200 through the device tool (docs/lab/h200.md), after `bash benchmarks/h200_wheels.sh` here:
#   run(command="bash benchmarks/h200_run.sh", carry=[".whl"], kind="nvidia-h200", timeout_s=600)
# then, here:  tar -xzf /work/.device/<n>/run.tar.gz   (unpacks results/h200-transformers/<run-id>/)
#              toolkit results verify h200-transformers/<run-id> ; git add results/h200-transformers/<run-id>
# Cut short by the 10-minute limit? Commit what came back, then run again with the partial run:
#   bash benchmarks/h200_run.sh results/h200-transformers/<run-id>     (only missing cells run)
# On any NVIDIA host with the toolkit installed it runs as is (outputs in ./h200-out).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 NO_COLOR=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$(dirname "$0")/.."
RESUME=${1:-}
DEST=${OUT:-h200-out}
MATRIX=${MATRIX:-benchmarks/h200/matrix-h200.yaml}   # overridable, e.g. to try this script on the CPU quickstart
RESULTS=${RESULTS:-results}
REQUIRE_GPU=${REQUIRE_GPU---require-gpu}
mkdir -p "$DEST"
exec > >(tee "$DEST/log.txt") 2>&1

if ! python3 -c "import pydantic, fastapi, uvicorn, openai" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
tk() { python3 -m toolkit.cli "$@"; }

date -u; nvidia-smi -L
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
NAME=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["name"])' "$MATRIX")
tk gpu validate $REQUIRE_GPU -o "$DEST/validate.json"                      # the host, before the run
tk bench matrix "$MATRIX" --results "$RESULTS" ${RESUME:+--resume "$RESUME"}
echo "bench matrix rc=$?"
RUN=${RESUME:-$(ls -td "$RESULTS/$NAME"/*/ 2>/dev/null | head -1)}
RUN=${RUN%/}
[ -n "$RUN" ] || { echo "no run directory was written under $RESULTS/$NAME"; exit 1; }
tk results verify "$RUN" --root "$RESULTS"; echo "verify rc=$?"
REPORT=reports/$(basename "$RUN")
tk results report "$RUN" --root "$RESULTS" -o "$REPORT" || echo "(results report failed: run it again here)"
tar -czf "$DEST/run.tar.gz" "$RUN" $( [ -d "$REPORT" ] && echo "$REPORT")
ls -la "$DEST"; du -sh "$RUN"
