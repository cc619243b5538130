#!/usr/bin/env bash
# Issue 13's H200 run, everything after the wheels have arrived: SGLang 0.5.17 from the carried wheel set
# (benchmarks/sglang_h200/wheels.py), the Environment's patches applied to it, config-only dummy models,
# then through the toolkit itself:
#   1. a preset with a misspelt flag (matrix-typo.yaml): the start fails within seconds, with SGLang's error;
#   2. the matrix (matrix.yaml): baseline, eagle3, ngram one after another, 2 domains x concurrency 1-64;
#      verify + report;
#   3. record.py: the raw wire format of every endpoint the toolkit reads (tests/data/sglang/), then the
#      speculative-disable-batch-threshold patch under load (2, 16, 2 requests at a time).
# Everything lands in DEST (default /tmp/sglang-h200-out): log.txt, run.tar.gz, DONE when finished.
# SGL_DRY=1 with SITE=<a folder holding tests/data/fake_sglang's sglang> tries the script on a CPU.
# MATRIX=<file> runs that matrix instead of matrix.yaml; TYPO=0 and RECORD=0 leave out steps 1 and 3
# (issue 25's chat-API acceptance run: MATRIX=benchmarks/sglang_h200/matrix-chat.yaml TYPO=0 RECORD=0;
# issue 29's starts and stops, with the fixtures refreshed: MATRIX=benchmarks/sglang_h200/matrix-starts.yaml TYPO=0).
#   bash benchmarks/sglang_h200/run.sh [DEST]
# docs/lab/h200.md says how to run it on the device tool (the wheels arrive in two calls; this runs detached).
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/sglang-h200-out}
SCRIPT=benchmarks/sglang_h200/run.sh ENV_SPEC=envs/sglang-0.5.17-h200.yaml
source benchmarks/sglang_h200/setup.sh

MATRIX=${MATRIX:-benchmarks/sglang_h200/matrix.yaml}
if [ "${TYPO:-1}" != 0 ]; then
  stamp "a misspelt flag through real SGLang"
  tk bench matrix benchmarks/sglang_h200/matrix-typo.yaml --results "$RESULTS"; echo "typo matrix rc=$?"
fi

stamp "the matrix ($MATRIX)"
tk bench matrix "$MATRIX" --results "$RESULTS"; echo "bench matrix rc=$?"
RUN=$(ls -td "$RESULTS"/$(sed -n 's/^name: *//p' "$MATRIX")/*/ 2>/dev/null | head -1); RUN=${RUN%/}
TYPO=$(ls -td "$RESULTS"/sglang-h200-typo/*/ 2>/dev/null | head -1); TYPO=${TYPO%/}
if [ -n "$RUN" ]; then
  stamp "verify + report"
  tk results verify "$RUN" --root "$RESULTS"; echo "verify rc=$?"
  tk results show "$RUN" --root "$RESULTS" | head -80
  tk results report "$RUN" --root "$RESULTS" -o "$REPORTS/$(basename "$RUN")" || echo "(report failed: make it again here)"
fi
tar -czf "$DEST/run.tar.gz" -C "$DEST" $(cd "$DEST" && ls -d results reports 2>/dev/null)

if [ "${RECORD:-1}" != 0 ]; then
  stamp "record the wire format; the threshold patch under load"
  python3 benchmarks/sglang_h200/record.py "$DEST/record" eagle3-threshold; echo "record rc=$?"
  tar -czf "$DEST/record.tar.gz" -C "$DEST" record
fi
stamp "done"
touch "$DEST/DONE"
