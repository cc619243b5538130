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
# SGL_DRY=1 with SITE=<a folder holding tests/bench/fake_sglang's sglang> tries the script on a CPU.
# MATRIX=<file> runs that matrix instead of matrix.yaml; TYPO=0 and RECORD=0 leave out steps 1 and 3
# (issue 25's chat-API acceptance run: MATRIX=benchmarks/sglang_h200/matrix-chat.yaml TYPO=0 RECORD=0).
#   bash benchmarks/sglang_h200/run.sh [DEST]
# docs/gpu.md says how to run it on the device tool (the wheels arrive in two calls; this runs detached).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 NO_COLOR=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/sglang-h200-out}
SITE=${SITE:-/tmp/site}
RESULTS=${RESULTS:-$DEST/results}
REPORTS=${REPORTS:-$DEST/reports}
mkdir -p "$DEST"
[ -n "${SGL_COPY:-}" ] || exec > >(tee -a "$DEST/log.txt") 2>&1
T0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
# Detached on the device tool, the checkout may be synced again under us: work from a private copy.
if [ -z "${SGL_COPY:-}" ]; then
  rm -rf "$DEST/repo" && mkdir -p "$DEST/repo"
  tar --exclude=./.sglwheels --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$DEST/repo"
  for a in .sglwheels/part*.tar.xz; do [ -e "$a" ] && python3 benchmarks/sglang_h200/unpack.py "$a" --dest "$SITE"; done
  cd "$DEST/repo" && SGL_COPY=1 exec bash benchmarks/sglang_h200/run.sh "$DEST"
fi

stamp "wheels (the carried archives are unpacked into $SITE above)"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
export PYTHONPATH=$SITE:$PWD
python3 -c 'import sglang, torch, transformers, pydantic; print("sglang", sglang.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "pydantic", pydantic.__version__)' || exit 1
nvidia-smi -L || [ -n "${SGL_DRY:-}" ] || exit 1
tk() { python3 -m toolkit.cli "$@"; }

stamp "patches of the Environment, applied to the installed sglang as the image build does"
python3 - <<'EOF' > /tmp/patches.txt
from toolkit.spec import load_spec
s = load_spec("envs/sglang-0.5.17-h200.yaml")
for i, p in enumerate(s.model.sglang.patches):
    print(s.path_of(("sglang", "patches", i, "path"), p.path).resolve())
EOF
while read -r p; do
  if grep -q toolkit-applied "$SITE/sglang/.toolkit-patches" 2>/dev/null && grep -qF "$p" "$SITE/sglang/.toolkit-patches"; then
    echo "already applied: $p"; continue
  fi
  if command -v patch >/dev/null; then
    patch -p2 -d "$SITE" --forward --fuzz=0 < "$p"
  else  # no GNU patch on the machine: git's applier, as strict (no fuzz)
    (cd "$SITE" && git apply -p2 --verbose "$p")
  fi && echo "toolkit-applied $p" >> "$SITE/sglang/.toolkit-patches" || { echo "PATCH FAILED: $p"; exit 1; }
done < <([ -n "${SGL_DRY:-}" ] || cat /tmp/patches.txt)

stamp "config-only models"
python3 benchmarks/sglang_h200/make_models.py envs/sglang-0.5.17-h200.yaml

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
