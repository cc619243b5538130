#!/bin/bash
# The H200 run of benchmarks/loadgen_workers.py (issues 18 and 30), as the device tool runs it: from the
# repository root (the tree under test: its client is "ours"), with an ignored .r30/ carried, holding
#   base/      another checkout's toolkit/ + benchmarks/ (`git archive REV`): its client is base-1/base-4
#   sgl.tar.xz sglang's Python tree (no .so) from the 0.5.17 wheel: sglang.bench_serving, through the shim
#   sgl-also.tar.xz, SGL_ALSO (optional) another version's tree, run beside it as sglang-VERSION (capacity)
#   model/     a tokenizer for sglang.bench_serving (make_models.py's llama-1b tokenizer files)
#   whl/       cp312 wheels the machine lacks (pydantic, msgspec, orjson, pybase64, ruamel.yaml, ...)
# Build it: bash benchmarks/h200_loadgen_run.sh --pack [BASE_REV]   (here; ~12 MB)
# On the device pass TOOLKIT_GIT_REVISION=$(git rev-parse HEAD): its copy's .git may be older than the tree.
# Output under $OUT. PY=python3 unless given; NO_WHEELS=1 DEPS=DIR ARGS=... BUDGET=S for a dry run elsewhere
# (2 cores: NO_WHEELS=1 DEPS=/tmp/site311 PY=.venv/bin/python ARGS="--quick --workers 1,4" BUDGET=40, where DEPS
# holds the SGLang client's own deps, which the venv lacks: pip install --target /tmp/site311 pybase64==1.5.1
# msgspec==0.23.0 orjson==3.13.0; with the venv's site-packages as DEPS the sglang rows fail on pybase64).
# (Issue 18's run used .r18/ with src/ holding the tree; its raw output is under benchmarks/results.)
set -o pipefail
R=${R:-.r30}
if [ "$1" = "--pack" ]; then
  set -e
  base=${2:-8f56074^}; sgl=${SGL_TREE:-.cache/sglang-0.5.17-wheels/tree}; tok=${TOKENIZER:-/tmp/toolkit-sglang/models/llama-1b}
  rm -rf "$R" && mkdir -p "$R/base" "$R/model" "$R/whl"
  git archive "$base" toolkit benchmarks pyproject.toml | tar x -C "$R/base"
  # the client needs sglang.benchmark and a few light modules; the kernels, models and layers stay behind (the
  # run must fit the device tool's 64 MiB with the tree)
  skip=(--exclude='*.so' --exclude=__pycache__ --exclude=sglang/multimodal_gen --exclude=sglang/kernels
        --exclude=sglang/test --exclude=sglang/srt/rust_extensions --exclude=sglang/srt/layers
        --exclude=sglang/srt/models --exclude=sglang/srt/mem_cache --exclude=sglang/srt/hardware_backend)
  tar cJf "$R/sgl.tar.xz" -C "$sgl" "${skip[@]}" sglang
  if [ -n "$SGL_ALSO_TREE" ]; then  # e.g. SGL_ALSO_TREE=~/.cache/toolkit/sglang/0.5.23/py3.11/src SGL_ALSO=0.5.23 (+3 MB)
    tar cJf "$R/sgl-also.tar.xz" -C "$SGL_ALSO_TREE" "${skip[@]}" sglang
    echo "${SGL_ALSO:?the version of SGL_ALSO_TREE}" > "$R/SGL_ALSO"
  fi
  cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$R/model/"
  ${PIP:-.venv/bin/python -m pip} download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$R/whl" \
    pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0 \
    msgspec==0.23.0 orjson==3.13.0 pybase64==1.5.1 ruamel.yaml==0.19.1
  echo "base: $(git rev-parse "$base")" > "$R/BASE"; du -sh "$R"; exit 0
fi
PY=${PY:-python3}
OUT=${OUT:-/tmp/loadgen-out}; mkdir -p "$OUT"
if [ -z "$NO_WHEELS" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $R/whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
mkdir -p /tmp/sgl && tar xJf $R/sgl.tar.xz -C /tmp/sgl || exit 1
if [ -f $R/sgl-also.tar.xz ]; then
  mkdir -p /tmp/sgl-also && tar xJf $R/sgl-also.tar.xz -C /tmp/sgl-also || exit 1
  ARGS="$ARGS --sglang-also $(cat $R/SGL_ALSO)=/tmp/sgl-also"
fi
export PYTHONUNBUFFERED=1
{ nproc; uname -r; ulimit -n; ulimit -Hn; $PY -V; cat $R/BASE 2>/dev/null; echo "ours: ${TOOLKIT_GIT_REVISION:-$(git rev-parse HEAD 2>/dev/null)}"
  $PY -c "import uvloop, aiohttp, numpy, transformers; print(uvloop.__version__, aiohttp.__version__, numpy.__version__, transformers.__version__)"
  lscpu | grep -E "Model name|^CPU\(s\)"
} 2>&1 | tee $OUT/env.txt
[ -n "$PARSE" ] && $PY benchmarks/loadgen_parse.py --baseline $R/base 2>&1 | tee $OUT/loadgen_parse_h200.txt
$PY benchmarks/loadgen_workers.py --baseline $R/base --extra-from ${EXTRA_FROM:-293} --sglang /tmp/sgl --sglang-deps ${DEPS:-/tmp/site} \
  --tokenizer $R/model --json $OUT/loadgen_workers_h200.json --budget-s ${BUDGET:-330} $ARGS 2>&1 | tee $OUT/loadgen_workers_h200.txt
