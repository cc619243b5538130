#!/usr/bin/env bash
# Issue 41 on the GPU: wait for train.sh to finish, then run.sh, so that one call can start both and nothing
# depends on when the next call comes (docs/lab/pair.md, On the GPU).
#   (setsid bash benchmarks/pair_gpu/after_train.sh [TRAIN_DEST] [RUN_DEST] > /tmp/after.log 2>&1 < /dev/null &)
# TUNES, MATRICES, ENV_SPEC and TOOLKIT_GIT_REVISION pass through to run.sh. The checkout is copied now, before the
# wait: the device tool may sync it again under us.
set -uo pipefail
cd "$(dirname "$0")/../.."
TRAIN=${1:-/tmp/pair-out}; DEST=${2:-/tmp/pair-run}; COPY=${COPY:-/tmp/pair-after-copy}
rm -rf "$COPY" && mkdir -p "$COPY"
tar --exclude=./.git --exclude=./.sglwheels --exclude=./.vllmwheels --exclude=./.venv -cf - . | tar -xf - -C "$COPY"
for _ in $(seq 1 400); do [ -e "$TRAIN/TRAINED" ] && break; sleep 5; done
if [ "$(cat "$TRAIN/TRAINED" 2>/dev/null)" != 0 ]; then
  echo "the training failed or did not finish in 2,000 s: see $TRAIN/train-log.txt"; exit 1
fi
cd "$COPY" && exec bash benchmarks/pair_gpu/run.sh "$DEST"
