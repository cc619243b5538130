#!/usr/bin/env bash
# Issue 41 on the GPU, phase 2: the pair served by SGLang 0.5.17 through the toolkit (docs/lab/pair.md).
#   bash benchmarks/pair_gpu/run.sh [DEST]     (after train.sh, or with the pair unpacked at /tmp/toolkit-pair)
#   TUNES=benchmarks/pair_gpu/matrix-tune.yaml:eagle3 MATRICES=... bash benchmarks/pair_gpu/run.sh [DEST]
#                                              (bench tune of each MATRIX:ARM first, then the matrices)
#   ENV_SPEC=envs/sglang-0.5.17-8b.yaml MATRICES=... bash benchmarks/pair_gpu/run.sh [DEST]
#                                              (another Environment: its dummy models are made, no pair is needed)
# The wheel set must be unpacked in /tmp/site already (benchmarks/sglang_h200/unpack.py, one part per call).
# MATRICES (default benchmarks/pair_gpu/matrix-pair.yaml) run one after another; each is verified and reported.
# REPRODUCE (runs under results/, MATRIX/RUN-ID) are replayed after them (an A/A pair across machines).
# Writes DEST/log.txt, DEST/run.tar.gz (results + reports), DONE.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/pair-out}
PAIR_SPEC=envs/sglang-0.5.17-pair.yaml
SCRIPT=benchmarks/pair_gpu/run.sh ENV_SPEC=${ENV_SPEC:-$PAIR_SPEC}
MAKE_MODELS=$([ "$ENV_SPEC" = "$PAIR_SPEC" ] && echo 0 || echo 1)
source benchmarks/sglang_h200/setup.sh
if [ "$ENV_SPEC" = "$PAIR_SPEC" ]; then
[ -e /tmp/toolkit-pair/draft/config.json ] || { echo "no pair at /tmp/toolkit-pair: run train.sh first"; exit 1; }
# the pair's record (recipe, losses, the drafter's own acceptance, every file's sha256) beside the runs; a finished
# run folder is never touched (its SHA256SUMS would no longer verify)
cp /tmp/toolkit-pair/pair.json "$DEST/pair.json"
# the Environment pins the trained pair (weights: path -> sha256; toolkit/serve/weights.py checks them before each
# start and the archive records them): written into this private copy's spec, which the archive keeps
python3 - "$ENV_SPEC" <<'PY'
import re, subprocess, sys
path = sys.argv[1]
text = re.sub(r"(?m)^(?:# pinned by .*\n)?weights:\n(?:[ \t]+.*\n)*", "", open(path).read())
pins = subprocess.run([sys.executable, "-m", "toolkit.pair", "pin", "/tmp/toolkit-pair/target",
                       "/tmp/toolkit-pair/draft"], capture_output=True, text=True, check=True).stdout
open(path, "w").write(text.rstrip("\n") + "\n# pinned by benchmarks/pair_gpu/run.sh from the trained pair\n" + pins)
print(pins, end="")
PY
fi
PACK=run.tar.gz PACK_ITEMS="results reports said tuned-env.yaml"  # setup.sh's pack
pack_every 60  # a sitting cut short by the device budget still brings back what finished
# TUNES: MATRIX:ARM pairs, each `bench tune MATRIX --arm ARM` (a launch per trial), before the matrices; the
# winner (only one that beat the preset) is written to DEST/tuned-env.yaml, what the tune said to DEST/said/
mkdir -p "$DEST/said"
# --out needs ruamel.yaml (a round-trip edit), which the GPU machine lacks unless carried: without it the session
# still searches, confirms and decides (tune.json, the report); only the write-back is skipped (the 2026-12-07
# sitting lost its tune to `--out` refused, exit 2, before any launch)
OUT_ARGS=(--out "$DEST/tuned-env.yaml")
python3 -c 'import ruamel.yaml' 2>/dev/null || { OUT_ARGS=(); echo "no ruamel.yaml here: bench tune runs without --out"; }
for T in ${TUNES:-}; do
  stamp "bench tune ${T%%:*} --arm ${T##*:}"
  tk bench tune "${T%%:*}" --arm "${T##*:}" --results "$RESULTS" "${OUT_ARGS[@]}" \
    > "$DEST/said/tune.txt" 2> "$DEST/said/tune.err"; echo "bench tune rc=$?" | tee "$DEST/said/tune.rc"
  tail -60 "$DEST/said/tune.txt"; tail -5 "$DEST/said/tune.err"
  pack
done
for MATRIX in ${MATRICES-benchmarks/pair_gpu/matrix-pair.yaml}; do
  stamp "the matrix ($MATRIX)"
  tk bench matrix "$MATRIX" --results "$RESULTS"; echo "bench matrix rc=$?"
  RUN=$(ls -td "$RESULTS"/$(sed -n 's/^name: *//p' "$MATRIX")/*/ 2>/dev/null | head -1); RUN=${RUN%/}
  if [ -n "$RUN" ]; then
    tk results verify "$RUN" --root "$RESULTS"; echo "verify rc=$?"
    tk results show "$RUN" --root "$RESULTS" | head -120
    tk results report "$RUN" --root "$RESULTS" -o "$REPORTS/$(basename "$RUN")" || echo "(report failed: make it here)"
  fi
  pack
done
# REPRODUCE: archived runs (MATRIX/RUN-ID under the checkout's results/) replayed here with `results reproduce`:
# the second half of an A/A pair across machines (docs/lab/pair.md)
for REF in ${REPRODUCE:-}; do
  stamp "replay of $REF"
  mkdir -p "$RESULTS/$(dirname "$REF")" && cp -a "results/$REF" "$RESULTS/$REF"
  tk results reproduce "$REF" --results "$RESULTS"; echo "reproduce rc=$?"
  NEW=$(ls -td "$RESULTS/$(dirname "$REF")"/*/ | head -1); NEW=${NEW%/}
  if [ "$NEW" != "$RESULTS/$REF" ]; then
    tk results report "$NEW" --root "$RESULTS" -o "$REPORTS/$(basename "$NEW")" || echo "(report failed: make it here)"
  fi
  pack
done
pack
stamp "done"
touch "$DEST/DONE"
