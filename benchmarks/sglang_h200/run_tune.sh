#!/usr/bin/env bash
# Issue 29's H200 tune, everything after the wheels have arrived (setup.sh: SGLang 0.5.17 from the carried
# wheel set, envs/sglang-0.5.17-h200.yaml's patch applied, config-only dummy models), then:
#   1. `toolkit bench tune matrix-tune.yaml --arm eagle3 --out envs/sglang-0.5.17-h200.tuned.yaml`: trials (a
#      server launch each), rungs, the confirmation on held-out prompts, the winner written into a copy of the
#      Environment beside the original (its relative paths are rewritten for where it is written);
#   2. `toolkit validate` of that copy; verify + report of every run archive in the session.
# SITE defaults to /tmp/site-tune, apart from /tmp/site, because the noise Environment's patch (run_noise.sh)
# and this one's are applied to the installed SGLang: unpack part1 and part2 into both (docs/lab/tune.md).
# After each step DEST/tune.tar.gz holds results/ and what was said; DEST/DONE when finished.
#   bash benchmarks/sglang_h200/run_tune.sh [DEST]
# SGL_DRY=1 with SITE=<a folder holding tests/data/fake_sglang's sglang> tries the script on a CPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/tune-out}
SITE=${SITE:-/tmp/site-tune}
SCRIPT=benchmarks/sglang_h200/run_tune.sh ENV_SPEC=envs/sglang-0.5.17-h200.yaml
source benchmarks/sglang_h200/setup.sh

PACK=tune.tar.gz PACK_ITEMS="results reports said tuned-env.yaml log.txt"  # setup.sh's pack
mkdir -p "$DEST/said"
pack_every 60 "periodic"  # while the tune runs: a sitting cut short still brings back the trials finished

stamp "1. bench tune (eagle3's server flags; a launch per trial)"
TUNED=envs/sglang-0.5.17-h200.tuned.yaml
# TUNE_RESUME=results/sglang-h200-tune-tune/<session> (a committed, interrupted session) goes on from there
RESUME=()
if [ -n "${TUNE_RESUME:-}" ]; then
  mkdir -p "$RESULTS/sglang-h200-tune-tune" && cp -r "$TUNE_RESUME" "$RESULTS/sglang-h200-tune-tune/"
  RESUME=(--resume "$RESULTS/sglang-h200-tune-tune/$(basename "$TUNE_RESUME")")
  stamp "resuming $TUNE_RESUME"
fi
tk bench tune benchmarks/sglang_h200/matrix-tune.yaml --arm eagle3 --results "$RESULTS" "${RESUME[@]}" \
  --out "$TUNED" > "$DEST/said/tune.txt" 2> "$DEST/said/tune.err"
echo "bench tune rc=$?" | tee "$DEST/said/tune.rc"
tail -40 "$DEST/said/tune.txt"; tail -5 "$DEST/said/tune.err"
[ -f "$TUNED" ] && cp "$TUNED" "$DEST/tuned-env.yaml"
pack "tune"

stamp "2. the written-back Environment validates; verify + report of the session's runs"
if [ -f "$TUNED" ]; then
  cp "$TUNED" "$DEST/tuned-env.yaml"
  tk validate "$TUNED" > "$DEST/said/validate.txt" 2>&1
  echo "validate rc=$?" | tee -a "$DEST/said/validate.txt"
fi
SESSION=$(ls -td "$RESULTS"/sglang-h200-tune-tune/*/ 2>/dev/null | head -1); SESSION=${SESSION%/}
for run in $(find "$SESSION" -name manifest.json -printf '%h\n' 2>/dev/null | sort); do
  tk results verify "$run" --root "$RESULTS"; echo "verify $(basename "$run") rc=$?"
done
pack "final"
stamp "done"
touch "$DEST/DONE"
