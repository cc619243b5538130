#!/usr/bin/env bash
# Issue 41 on the GPU, phase 1: train the project's model pair from the prepared folder (docs/lab/pair.md).
#   bash benchmarks/pair_gpu/train.sh [DEST]      (DEST default /tmp/pair-out; the pair goes to /tmp/toolkit-pair)
# Reads .pair/prep.tar.xz (here: `python -m toolkit.pair prepare /work/pair/prep-gpu` then
# `tar -C /work/pair -cJf .pair/prep.tar.xz prep-gpu`). Needs only the machine's own torch and transformers.
# Writes DEST/train-log.txt, DEST/pair.json, DEST/pair.tar.partNN (the pair, 15 MiB pieces), DEST/TRAINED.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/pair-out}; PREP=${PREP:-.pair/prep.tar.xz}; PAIR=${PAIR:-/tmp/toolkit-pair}; RECIPE=${RECIPE:-gpu}
mkdir -p "$DEST" /tmp/pair-prep
exec > >(tee -a "$DEST/train-log.txt") 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
T0=$(date +%s)
rm -rf "$DEST/code" && mkdir -p "$DEST/code" && cp -r toolkit "$DEST/code/"  # the checkout may be synced under us
tar -xJf "$PREP" -C /tmp/pair-prep
PREPDIR=$(dirname "$(ls /tmp/pair-prep/*/manifest.json | head -1)")
# toolkit.pair writes its records with pydantic (toolkit/pair/records.py), which the GPU machine lacks: take it,
# and only it (the machine's own transformers stays), from the unpacked wheel set (unpack both parts first)
if ! python3 -c 'import pydantic' 2>/dev/null; then
  SITE=${SITE:-/tmp/site}; mkdir -p /tmp/pair-pydantic
  for m in pydantic pydantic_core typing_inspection annotated_types typing_extensions.py; do
    [ -e "$SITE/$m" ] && ln -sfn "$SITE/$m" "/tmp/pair-pydantic/$m"
  done
  export PYTHONPATH=/tmp/pair-pydantic${PYTHONPATH:+:$PYTHONPATH}
  python3 -c 'import pydantic' || { echo "no pydantic: unpack the wheel set's parts into $SITE first (docs/lab/pair.md)"; echo 1 > "$DEST/TRAINED"; exit 1; }
fi
nvidia-smi -L
(cd "$DEST/code" && python3 -m toolkit.pair train "$PREPDIR" "$PAIR" --recipe "$RECIPE"); RC=$?; echo "train rc=$RC"
cp "$PAIR/pair.json" "$DEST/" 2>/dev/null
(cd "$DEST" && tar -cf pair.tar -C "$PAIR" . && split -b 15m -d pair.tar pair.tar.part && rm pair.tar)
echo "== $(( $(date +%s) - T0 )) s: trained"
echo "$RC" > "$DEST/TRAINED"
