#!/usr/bin/env bash
# Issue 45 on the GPU: vLLM 0.24.0 beside SGLang 0.5.17, one detached script (docs/lab/vllm.md has the calls).
#   bash benchmarks/vllm_gpu/run.sh [DEST]        (DEST default /tmp/vllm-out; start it with setsid, detached)
# Before it starts: the vLLM set unpacked in VSITE (/tmp/vsite; benchmarks/sglang_h200/unpack.py, one part per
# call). The SGLang set may still be arriving: steps 1-2 need vLLM alone, and step 3 waits (up to WAIT_S, 1200 s)
# for SITE/.unpacked (/tmp/site), which the call that unpacks SGLang's last part touches.
#   1. the import check (DEST/import.txt): vLLM from VSITE beside the machine's torch, FA3 on SM90;
#   2. record.py (DEST/record/, DEST/record.tar.gz): a real vLLM's answers for the fake (tests/data/fake_vllm),
#      a misspelt flag's and an engine core's failed starts; its starts also fill vLLM's compile caches;
#   3. warm-up starts outside any matrix (each preset once, not measured: the machine's first start compiles
#      into empty caches), then matrix-engines.yaml: ONE run of four arms from the two Environments (SGLang and
#      vLLM, each baseline and n-gram; coding and encyclopedic, c=1/16/64, 3 launches per arm, launches
#      interleaved) on the toolkit's small trained Llama; verified, shown and reported, with the paired
#      speed-ups of each engine's n-gram over its own baseline and of vLLM over SGLang per role (--pair;
#      DEST/pairs.txt). MATRICES=".../matrix-vllm.yaml .../matrix-sglang.yaml" runs the two one-engine matrices
#      instead (or too), each verified, shown and reported; with both, `results diff` SGLang -> vLLM
#      (DEST/diff.txt, diff.json) and a report of the vLLM run against the SGLang one.
# Writes DEST/log.txt, DEST/partial.tar.gz every PARTIAL_S (30 s; the results so far, never a verified archive:
# a machine taken back mid-run loses that much at most), DEST/run.tar.gz after each matrix, DEST/DONE at the end
# (DEST/FAILED beside it when vLLM did not import).
# MATRICES (default: benchmarks/vllm_gpu/matrix-engines.yaml) picks the matrices; STEPS (default "import record warm matrix") the steps.
# VLLM_DRY=1 tries it on a CPU with the fakes (tests/data/fake_vllm, tests/data/fake_sglang; SGL_DRY for
# setup.sh), with a Python that has the toolkit's dependencies first on PATH.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-/tmp/vllm-out}; export DEST
SCRIPT=benchmarks/vllm_gpu/run.sh
export ENV_SPEC=envs/sglang-0.5.17-quickstart.yaml VENV_SPEC=envs/vllm-0.24.0-quickstart.yaml
export SITE=${SITE:-/tmp/site} VSITE=${VSITE:-/tmp/vsite} MAKE_MODELS=0
MATRICES=${MATRICES:-benchmarks/vllm_gpu/matrix-engines.yaml}
# the engines matrix's pairs beside its speed-ups over sglang-baseline: each engine's n-gram over its own
# baseline, and vLLM over SGLang in each role (toolkit results show/report --pair ARM/REF)
PAIRS="--pair sglang-ngram/sglang-baseline --pair vllm-ngram/vllm-baseline --pair vllm-baseline/sglang-baseline --pair vllm-ngram/sglang-ngram"
STEPS=${STEPS:-import record warm matrix}
PARTIAL_S=${PARTIAL_S:-30} WAIT_S=${WAIT_S:-1200}
MODEL=/tmp/toolkit-qs/target   # the Environments' model and weights pin
mkdir -p "$DEST"
[ -n "${TOOLKIT_PRIVATE_COPY:-}" ] || exec > >(tee -a "$DEST/log.txt") 2>&1
T0=${T0:-$(date +%s)}; export T0
stamp() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
# The checkout may be synced again under a detached run: work from a private copy (as setup.sh does), without
# the wheel parts (unpacked already) and git.
if [ -z "${TOOLKIT_PRIVATE_COPY:-}" ]; then
  rm -rf "$DEST/repo" && mkdir -p "$DEST/repo"
  tar --exclude=./.sglwheels --exclude=./.vllmwheels --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$DEST/repo"
  cd "$DEST/repo" && TOOLKIT_PRIVATE_COPY=1 exec bash "$SCRIPT" "$DEST"
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 NO_COLOR=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -n "${VLLM_DRY:-}" ]; then  # the fakes of tests/data, in this private copy; nothing is unpacked into them
  export SGL_DRY=1 SITE=$PWD/tests/data/fake_sglang VSITE=$PWD/tests/data/fake_vllm WAIT_S=0
fi
if [ "$VSITE" != /tmp/vsite ]; then  # the vLLM matrices name the carried set's usual folder: this copy's instead
  sed -i "s#PYTHONPATH: /tmp/vsite#PYTHONPATH: $VSITE#" benchmarks/vllm_gpu/matrix-vllm.yaml \
    benchmarks/vllm_gpu/matrix-engines.yaml
fi
stamp "the model: toolkit/_data/quickstart-model -> $MODEL (pinned by sha256 in both Environments)"
rm -rf "$MODEL" && mkdir -p "$(dirname "$MODEL")" && cp -r toolkit/_data/quickstart-model "$MODEL"
nvidia-smi -L || [ -n "${VLLM_DRY:-}" ] || exit 1

# the results so far, every PARTIAL_S, for the waiting calls to copy (a consistent file: written, then renamed)
partials() {
  while sleep "$PARTIAL_S"; do
    tar --warning=no-file-changed --ignore-failed-read -czf "$DEST/partial.tar.gz.tmp" -C "$DEST" \
      $(cd "$DEST" && ls -d log.txt import.txt record results reports diff.txt pairs.txt show-*.txt 2>/dev/null) 2>/dev/null
    mv -f "$DEST/partial.tar.gz.tmp" "$DEST/partial.tar.gz"
  done
}
partials & PARTIALS=$!
trap 'kill $PARTIALS 2>/dev/null' EXIT
finish() { stamp "done"; kill $PARTIALS 2>/dev/null; touch "$DEST/DONE"; exit "${1:-0}"; }

if has import; then
  stamp "1. vLLM from $VSITE beside the machine's torch (docs/lab/vllm.md, the first GPU call)"
  PYTHONPATH=$VSITE python3 - <<'PY' 2>&1 | tee "$DEST/import.txt"
import os, shutil, time
t = time.perf_counter()
import torch, vllm
if os.environ.get("VLLM_DRY"):
    print("vllm", vllm.__file__, "(the fake: nothing else to check)")
    raise SystemExit(0)
from vllm.entrypoints.openai import api_server  # noqa: F401
print(f"import vllm + api_server: {time.perf_counter() - t:.1f} s")
import transformers, flashinfer
from vllm.platforms import current_platform as p
p.import_kernels()
from vllm.vllm_flash_attn import flash_attn_interface as f
print(vllm.__version__, torch.__version__, torch.__file__, p.get_device_capability(),
      "FA3", f.FA3_AVAILABLE, f.is_fa_version_supported(3), "FA2", f.FA2_AVAILABLE)
print("transformers", transformers.__version__, transformers.__file__, "| flashinfer", flashinfer.__version__,
      "| nvcc", shutil.which("nvcc"), "| CUDA_HOME", os.environ.get("CUDA_HOME"))
PY
  if [ "${PIPESTATUS[0]}" != 0 ]; then
    echo "IMPORT FAILED: see $DEST/import.txt (docs/lab/vllm.md: move the missing wheel back, rebuild)"
    touch "$DEST/FAILED"; finish 1
  fi
fi

export RECORDED=1
if has record; then
  stamp "2. a real vLLM's answers and failed starts (benchmarks/vllm_gpu/record.py)"
  PYTHONPATH=$VSITE:$PWD python3 benchmarks/vllm_gpu/record.py "$DEST/record" --env "$VENV_SPEC" --site "$VSITE" \
    ${VLLM_DRY:+--dry}
  rc=$?; echo "record rc=$rc"; [ $rc = 0 ] || RECORDED=0
  tar -czf "$DEST/record.tar.gz" -C "$DEST" record import.txt
fi

has warm || has matrix || finish 0
if [ -z "${VLLM_DRY:-}" ]; then
  stamp "waiting for the SGLang set ($SITE/.unpacked, up to $WAIT_S s)"
  for _ in $(seq 1 "$WAIT_S"); do [ -e "$SITE/.unpacked" ] && break; sleep 1; done
  [ -e "$SITE/.unpacked" ] || { echo "no $SITE/.unpacked after $WAIT_S s: the SGLang set did not arrive"; finish 1; }
fi
PYTHONPATH=$SITE python3 -c 'import sglang' || { echo "no sglang in $SITE: unpack .sglwheels again"; finish 1; }
# SGLang's half of setup: `import sglang` from SITE, its pristine source for the flag check (preflight), the
# Environment's patches (none); PYTHONPATH=$SITE:$PWD from here on, `tk` the toolkit
source benchmarks/sglang_h200/setup.sh

if has warm; then
  # The machine's first start of an engine compiles into empty caches (SGLang cold 136-170 s, warm 26-50 s:
  # docs/lab/pair.md, starts.md) and its cells measured slower on the H200 (docs/results.md#launch-noise):
  # start each preset once here, unmeasured, so every launch of the matrices is a warm one. Timed.
  stamp "3a. warm-up starts (not measured)"
  python3 - <<'PY'
import os, time
from pathlib import Path
from toolkit.serve import launcher_for
from toolkit.specs import load_spec
vllm_ok = os.environ["RECORDED"] == "1" or os.environ.get("FORCE")  # vLLM served in step 2
for spec, presets, kw in ((os.environ["VENV_SPEC"], ["baseline"] if vllm_ok else [],
                           {"env": {"PYTHONPATH": os.environ["VSITE"]}}),
                          (os.environ["ENV_SPEC"], ["baseline", "ngram"], {})):
    env = load_spec(spec)
    for preset in presets:
        t = time.monotonic()
        try:
            srv = launcher_for(env, preset, kind="process", log_path=Path(os.environ["DEST"]) / f"warm-{env.model.name}-{preset}.log", **kw)
            srv.wait_healthy(timeout_s=900)
            up = time.monotonic() - t
            srv.stop()
            print(f"warm-up {env.model.name} {preset}: healthy after {up:.1f} s, stopped after {time.monotonic() - t - up:.1f} s", flush=True)
        except Exception as exc:  # the matrix reports it again, with its own launch
            print(f"warm-up {env.model.name} {preset}: FAILED after {time.monotonic() - t:.1f} s: {exc}", flush=True)
PY
fi

has matrix || finish 0
declare -A RUNS
for MATRIX in $MATRICES; do
  NAME=$(sed -n 's/^name: *//p' "$MATRIX")
  if [ "$RECORDED" = 0 ] && { [ "$NAME" = engines-qs-vllm ] || [ "$NAME" = engines-qs ]; } && [ -z "${FORCE:-}" ]; then
    echo "skipping $MATRIX: vLLM did not serve in step 2 (FORCE=1 runs it anyway)"; continue
  fi
  stamp "3. the matrix ($MATRIX)"
  tk bench matrix "$MATRIX" --results "$RESULTS"; echo "bench matrix rc=$?"
  RUN=$(ls -td "$RESULTS/$NAME"/*/ 2>/dev/null | head -1); RUN=${RUN%/}
  if [ -n "$RUN" ]; then
    RUNS[$NAME]=$RUN
    tk results verify "$RUN" --root "$RESULTS"; echo "verify rc=$?"
    PAIRED=; [ "$NAME" = engines-qs ] && PAIRED=$PAIRS
    tk results show "$RUN" --root "$RESULTS" $PAIRED > "$DEST/show-$NAME.txt"; echo "show rc=$?"
    head -160 "$DEST/show-$NAME.txt"
    if [ -n "$PAIRED" ]; then  # the pairs' tables alone, for the docs
      awk '/^Speed-up of /{on=1} /^(What each server said|Methodology checks)/{on=0} on' "$DEST/show-$NAME.txt" \
        | tee "$DEST/pairs.txt"
    fi
    tk results report "$RUN" --root "$RESULTS" $PAIRED -o "$REPORTS/$(basename "$RUN")" || echo "(report failed: make it here)"
  fi
  tar -czf "$DEST/run.tar.gz" -C "$DEST" $(cd "$DEST" && ls -d results reports pairs.txt show-*.txt 2>/dev/null)
done
SGL=${RUNS[engines-qs-sglang]:-} VL=${RUNS[engines-qs-vllm]:-}
if [ -n "$SGL" ] && [ -n "$VL" ]; then
  stamp "the engines compared: SGLang (A) -> vLLM (B), cell by cell, the launch as the unit"
  tk results diff "$SGL" "$VL" --root "$RESULTS" | tee "$DEST/diff.txt"; echo "diff rc=${PIPESTATUS[0]}"
  tk results diff "$SGL" "$VL" --root "$RESULTS" --json > "$DEST/diff.json"
  tk results report "$VL" --against "$SGL" --root "$RESULTS" -o "$REPORTS/engines-$(basename "$VL")-vs-$(basename "$SGL")" \
    || echo "(report failed: make it here)"
  tar -czf "$DEST/run.tar.gz" -C "$DEST" $(cd "$DEST" && ls -d results reports pairs.txt show-*.txt diff.txt diff.json 2>/dev/null)
fi
finish 0
