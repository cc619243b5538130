#!/usr/bin/env bash
# Issue 24's H200 run, everything after the wheels have arrived (setup.sh: SGLang 0.5.17 from the carried
# wheel set, envs/sglang-0.5.17-h200-noise.yaml's patch applied, config-only dummy models), then:
#   1. the matrix (matrix-noise.yaml): baseline vs EAGLE-3, 3 launches per arm in shuffled rounds, 2 domains x
#      concurrency 1, 8, 32: the reference, with its launch-to-launch noise;
#   2. `toolkit results reproduce` of it: an A/A pair (same machine, minutes later): the verdict should be
#      `reproduced within +-X %`;
#   3. the same replay with TOOLKIT_INJECT_FORWARD_SLEEP_MS=$SLEEP_MS (default 2) in the servers' environment:
#      every scheduler step sleeps that long (the patch; overlap scheduling is off, so the slowdown is known:
#      at concurrency 1 the baseline's TPOT grows by SLEEP_MS): the verdict should be `differs`.
# After each stage DEST/noise.tar.gz holds results/ and the verdicts so far; DEST/DONE when finished.
#   bash benchmarks/sglang_h200/run_noise.sh [DEST]
# REF_RUN=results/sglang-h200-noise/<run-id> (a committed reference) skips stage 1, and STAGES (default
# "1 2 3") picks the stages: `REF_RUN=... STAGES=3` is the slowed replay alone against that reference.
# docs/results.md ("Launch-to-launch noise on the H200") says how to run it on the device tool.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/sglang-noise-out}
SLEEP_MS=${SLEEP_MS:-2}
SCRIPT=benchmarks/sglang_h200/run_noise.sh ENV_SPEC=envs/sglang-0.5.17-h200-noise.yaml
source benchmarks/sglang_h200/setup.sh

PACK=noise.tar.gz PACK_ITEMS="results reports verdicts"  # setup.sh's pack
mkdir -p "$DEST/verdicts"

STAGES=${STAGES:-1 2 3}
stage() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
if [ -n "${REF_RUN:-}" ]; then
  stamp "the reference: $REF_RUN (committed), copied into $RESULTS"
  mkdir -p "$RESULTS/sglang-h200-noise" && cp -r "$REF_RUN" "$RESULTS/sglang-h200-noise/"
  REF=$RESULTS/sglang-h200-noise/$(basename "$REF_RUN")
else
  stamp "1. the reference: 3 launches per arm, interleaved"
  tk bench matrix benchmarks/sglang_h200/matrix-noise.yaml --results "$RESULTS"; echo "bench matrix rc=$?"
  REF=$(ls -td "$RESULTS"/sglang-h200-noise/*/ 2>/dev/null | head -1); REF=${REF%/}
  [ -n "$REF" ] || { echo "no reference run"; touch "$DEST/DONE"; exit 1; }
  tk results show "$REF" --root "$RESULTS" > "$DEST/verdicts/show-reference.txt" 2>&1
  pack "reference $(basename "$REF")"
fi

if stage 2; then
stamp "2. A/A: the reference replayed"
tk results reproduce "$REF" --results "$RESULTS" --json > "$DEST/verdicts/reproduce-aa.json" 2> "$DEST/verdicts/reproduce-aa.err"
echo "reproduce A/A rc=$?" | tee "$DEST/verdicts/reproduce-aa.rc"
tail -5 "$DEST/verdicts/reproduce-aa.err"
pack "A/A replay"
fi

if stage 3; then
stamp "3. the reference replayed with a ${SLEEP_MS} ms sleep before every forward"
TOOLKIT_INJECT_FORWARD_SLEEP_MS=$SLEEP_MS tk results reproduce "$REF" --results "$RESULTS" --json \
  > "$DEST/verdicts/reproduce-slow.json" 2> "$DEST/verdicts/reproduce-slow.err"
echo "reproduce slowed rc=$?" | tee "$DEST/verdicts/reproduce-slow.rc"
tail -5 "$DEST/verdicts/reproduce-slow.err"
grep -h "toolkit-inject" "$RESULTS"/sglang-h200-noise/*/logs/*.log 2>/dev/null | sort | uniq -c | head -3
pack "slowed replay"
fi

stamp "verify + reports"
for run in "$RESULTS"/sglang-h200-noise/*/; do
  run=${run%/}
  [ -n "${REF_RUN:-}" ] && [ "$(basename "$run")" = "$(basename "$REF_RUN")" ] && continue
  tk results verify "$run" --root "$RESULTS"; echo "verify $(basename "$run") rc=$?"
  tk results report "$run" --root "$RESULTS" -o "$REPORTS/$(basename "$run")" >/dev/null 2>&1 || echo "(report of $run failed: make it here)"
done
pack "final"
stamp "done"
touch "$DEST/DONE"
