#!/usr/bin/env bash
# The quickstart's target (toolkit/_data/quickstart-model/, docs/pair.md) trained on a GPU beside train.sh:
#   bash benchmarks/pair_gpu/train-quickstart.sh [DEST]      (DEST default /tmp/qs-out)
# Reads .pair/qs-prep.tar.xz (here: `python -m toolkit.pair prepare /work/pair/qs-prep --recipe quickstart` then
# `tar -C /work/pair -cJf .pair/qs-prep.tar.xz qs-prep`). Needs only the machine's own torch and transformers.
# Writes DEST/train-log.txt, DEST/qs-pair.tar.gz (target/ and pair.json), DEST/TRAINED.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/qs-out}; PREP=${PREP:-.pair/qs-prep.tar.xz}
mkdir -p "$DEST" /tmp/qs-prep-x
exec > >(tee -a "$DEST/train-log.txt") 2>&1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
T0=$(date +%s)
rm -rf "$DEST/code" && mkdir -p "$DEST/code" && cp -r toolkit "$DEST/code/"  # the checkout may be synced under us
tar -xJf "$PREP" -C /tmp/qs-prep-x
PREPDIR=$(dirname "$(ls /tmp/qs-prep-x/*/manifest.json | head -1)")
(cd "$DEST/code" && python3 -m toolkit.pair train "$PREPDIR" /tmp/qs-pair --recipe quickstart --device cuda); RC=$?
echo "train rc=$RC"
tar -czf "$DEST/qs-pair.tar.gz" -C /tmp qs-pair
echo "== $(( $(date +%s) - T0 )) s: trained"
echo "$RC" > "$DEST/TRAINED"
