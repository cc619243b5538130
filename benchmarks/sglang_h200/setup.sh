# Sourced by run.sh and run_noise.sh (bash): everything an H200 run needs before the toolkit runs, once the
# wheels have arrived. Expects DEST (output folder), SCRIPT (the caller, re-executed from a private copy)
# and ENV_SPEC (the Environment whose patches are applied). After it: cwd is the private copy, PYTHONPATH
# holds the carried SGLang set, the patches are applied, the models are made, `tk` runs the toolkit, `stamp`
# prints elapsed seconds. The models: the Environment's `dummy_models:` (the process launcher would write
# them too; made here ahead of the first start).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 NO_COLOR=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
SITE=${SITE:-/tmp/site}
RESULTS=${RESULTS:-$DEST/results}
REPORTS=${REPORTS:-$DEST/reports}
mkdir -p "$DEST"
[ -n "${TOOLKIT_PRIVATE_COPY:-}" ] || exec > >(tee -a "$DEST/log.txt") 2>&1
T0=${T0:-$(date +%s)}; export T0
stamp() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
tk() { python3 -m toolkit.cli "$@"; }
# pack [WHAT]: DEST/$PACK (a .tar.gz, replaced whole) holds those of DEST's $PACK_ITEMS that exist; WHAT, when
# given, is stamped. pack_every SECONDS [WHAT]: a pack every SECONDS until DEST/DONE, so that a sitting cut short
# by the device budget still brings back what finished (a partial tar of a run being written is fine: verify
# says what is missing). The caller sets PACK and PACK_ITEMS.
pack() { tar -czf "$DEST/$PACK.tmp" -C "$DEST" $(cd "$DEST" && ls -d $PACK_ITEMS 2>/dev/null) \
         && mv "$DEST/$PACK.tmp" "$DEST/$PACK"; [ $# -eq 0 ] || stamp "packed: $*"; }
pack_every() { ( while [ ! -e "$DEST/DONE" ]; do sleep "$1"; [ -e "$DEST/DONE" ] || pack "${@:2}"; done ) & }
# Detached on the device tool, the checkout may be synced again under us: work from a private copy (the
# marker is not SGL_*: SGLang reads those and warned that SGL_COPY is a deprecated SGLANG_COPY).
if [ -z "${TOOLKIT_PRIVATE_COPY:-}" ]; then
  rm -rf "$DEST/repo" && mkdir -p "$DEST/repo"
  tar --exclude=./.sglwheels --exclude=./.vllmwheels --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$DEST/repo"
  if [ -z "${SGL_DRY:-}" ]; then  # a dry run's SITE is the fake sglang in tests/: never unpack into it
    for a in .sglwheels/part*.tar.xz; do [ -e "$a" ] && python3 benchmarks/sglang_h200/unpack.py "$a" --dest "$SITE"; done
  fi
  cd "$DEST/repo" && TOOLKIT_PRIVATE_COPY=1 exec bash "$SCRIPT" "$DEST"
fi

stamp "wheels (the carried archives are unpacked into $SITE above)"
if ls .whl/*.whl >/dev/null 2>&1 && [ -z "${SGL_DRY:-}" ]; then  # a dry run's SITE is tests/data: never into it
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
export PYTHONPATH=$SITE:$PWD
python3 -c 'import sglang, torch, transformers, pydantic; print("sglang", getattr(sglang, "__version__", "(no version: the fake)"), "torch", torch.__version__, "transformers", transformers.__version__, "pydantic", pydantic.__version__)' || exit 1
nvidia-smi -L || [ -n "${SGL_DRY:-}" ] || exit 1
python3 benchmarks/sglang_h200/deps.py || true  # said first: what a missing dependency of the toolkit stops

stamp "SGLang's pristine source for the toolkit's own patch and flag checks (preflight), from the carried set"
# `bench tune` checks every knob value against the pinned SGLang's argument parser through the preflight,
# which otherwise fetches the wheel with `pip download` (no network on the H200 machine): seed its cache
# with the carried sglang/ before any patch touches it.
if [ -z "${SGL_DRY:-}" ]; then
  SRC=$(ENV_SPEC=$ENV_SPEC python3 -c 'import os; from toolkit.settings import cache_dir; from toolkit.specs import load_spec
s = load_spec(os.environ["ENV_SPEC"]).model
print(cache_dir() / "sglang" / s.sglang.version / f"py{s.python}" / "src")')
  if [ -d "$SRC/sglang" ]; then echo "already there: $SRC"
  elif [ -e "$SITE/sglang/.toolkit-patches" ]; then echo "$SITE/sglang is patched already: not a pristine source (unpack afresh)"
  else mkdir -p "$SRC.tmp" && cp -a "$SITE/sglang" "$SRC.tmp/" && mv "$SRC.tmp" "$SRC" && echo "seeded: $SRC"; fi
fi

stamp "patches of $ENV_SPEC, applied to the installed sglang as the image build does"
ENV_SPEC=$ENV_SPEC python3 - <<'PY' > /tmp/patches.txt
import os
from toolkit.specs import load_spec
s = load_spec(os.environ["ENV_SPEC"])
for i, p in enumerate(s.model.sglang.patches):
    print(s.path_of(("sglang", "patches", i, "path"), p.path).resolve())
PY
while read -r p; do
  if grep -qF "toolkit-applied $(basename "$p")" "$SITE/sglang/.toolkit-patches" 2>/dev/null; then
    echo "already applied: $p"; continue
  fi
  if command -v patch >/dev/null; then
    patch -p2 -d "$SITE" --forward --fuzz=0 < "$p"
  else  # no GNU patch on the machine: git's applier, as strict (no fuzz)
    (cd "$SITE" && git apply -p2 --verbose "$p")
  fi && echo "toolkit-applied $(basename "$p")" >> "$SITE/sglang/.toolkit-patches" || { echo "PATCH FAILED: $p"; exit 1; }
done < <([ -n "${SGL_DRY:-}" ] || cat /tmp/patches.txt)

# A warm start is mostly the imports of two processes (docs/lab/starts.md, start-up phases): where Python may not
# write bytecode, every start would compile what it imports; the toolkit's process launcher then keeps the
# server's bytecode in its kept cache folder (toolkit/serve/jitcache.py: PYTHONPYCACHEPREFIX), so the site is
# not compiled here. Said either way, so the log tells which it was; BYTECODE_PROBE=1 also times SGLang's
# server import without bytecode, from a kept prefix and from the site (benchmarks/bytecode_imports.py, ~1 min).
python3 -c 'import sys, os; print("python writes bytecode:", not sys.dont_write_bytecode,
    "| PYTHONDONTWRITEBYTECODE=" + repr(os.environ.get("PYTHONDONTWRITEBYTECODE")))'
if [ -n "${BYTECODE_PROBE:-}" ]; then
  stamp "SGLang's server import with and without bytecode"
  python3 benchmarks/bytecode_imports.py --stmt "${BYTECODE_STMT:-import sglang.srt.entrypoints.http_server}" \
    --rounds 2 | tee "$DEST/bytecode_imports.txt"
fi

stamp "config-only models"
[ "${MAKE_MODELS:-1}" = 0 ] || python3 benchmarks/sglang_h200/make_models.py "$ENV_SPEC"
