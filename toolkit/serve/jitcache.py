"""Kept compile and JIT caches for SGLang servers: one folder per (GPU model, environment hash) that every
launch of that environment on that kind of GPU reuses, so a machine's first start is as quick as its later
ones once the folder is there.

    <cache>/jit/<gpu-model-slug>/<env-hash[:16]>/
        triton/        TRITON_CACHE_DIR          Triton kernels (SGLang's own Triton ops, torch.compile's)
        inductor/      TORCHINDUCTOR_CACHE_DIR   torch inductor (--enable-torch-compile)
        sglang/        SGLANG_CACHE_DIR          SGLang 0.5.17's torch_compile_cache (piecewise CUDA graphs:
                                                 inductor + triton under it), flashinfer autotune results,
                                                 the custom all-reduce P2P check
        flashinfer/    FLASHINFER_WORKSPACE_BASE FlashInfer's JIT modules and cubins (<base>/.cache/flashinfer)
        deep_gemm/     SGLANG_DG_CACHE_DIR       DeepGEMM kernels: SGLang overwrites DG_JIT_CACHE_DIR with
                       DG_JIT_CACHE_DIR          SGLANG_DG_CACHE_DIR at import, so both are set
        tvm-ffi/       TVM_FFI_CACHE_DIR         tvm-ffi extensions (sgl-kernel, flashinfer, torch-c-dlpack)
        cuda/          CUDA_CACHE_PATH           the driver's PTX JIT cache

        bytecode/      PYTHONPYCACHEPREFIX       Python's own compile cache, only where the server's Python
                                                 would write none (below)

Where each library reads its variable was checked in the 0.5.17 wheel set (sglang/srt/environ.py,
deep_gemm_wrapper/compile_utils.py, compilation/compiler_interface.py, flashinfer/jit/env.py,
tvm_ffi/cpp/extension.py). The folder is keyed by the environment's spec hash (the image's key) and the GPU
model, since compiled kernels are built for one architecture. A launch is *warm* when its folder existed and
held a file before the server started; `compiled` then says how many kernel files (bytecode aside) the start
added before it answered: on the H200 the EAGLE-3 arm's first start after the baseline's found the folder
warm yet compiled its draft's kernels (37 s against 27-28 s), so only a start that compiled nothing is
counted with the warm ones (toolkit.results.report.starts). TOOLKIT_JIT_CACHE=off (toolkit.settings)
leaves the caches where each library puts them by default.

Bytecode: a controller whose environment sets PYTHONDONTWRITEBYTECODE (Docker images often do; so does
this project's own Dockerfile, and the CPU machines it is developed on) hands it to the server, and a
site without bytecode (SGLang unpacked from its wheels, as on the lent H200) is then compiled again by
every process of every start: all of torch, transformers and sglang that they import. Where the server
inherits that variable (the Environment's `env:` sets neither it nor PYTHONPYCACHEPREFIX), the process
launcher gives the server PYTHONPYCACHEPREFIX=<folder>/bytecode and clears PYTHONDONTWRITEBYTECODE for it:
the bytecode is written once into the kept folder, never into the site, and read by every later start.
Containers keep theirs (their images carry the bytecode pip wrote at install).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from toolkit.schema.manifest import JitCacheRecord

# subfolder -> the environment variables that point a library at it
KEPT = {
    "triton": ("TRITON_CACHE_DIR",),
    "inductor": ("TORCHINDUCTOR_CACHE_DIR",),
    "sglang": ("SGLANG_CACHE_DIR",),
    "flashinfer": ("FLASHINFER_WORKSPACE_BASE",),
    "deep_gemm": ("SGLANG_DG_CACHE_DIR", "DG_JIT_CACHE_DIR"),
    "tvm-ffi": ("TVM_FFI_CACHE_DIR",),
    "cuda": ("CUDA_CACHE_PATH",),
}
BYTECODE = "bytecode"  # subfolder: PYTHONPYCACHEPREFIX, where the server would write no bytecode (above)
CONTAINER_ROOT = "/toolkit-jit"  # where the docker launcher mounts the folder
NO_GPU = "no-gpu"


def slug(text: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': a folder name."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def gpu_model(visible: str | None = None) -> str:
    """The model of the GPUs a server will use ('NVIDIA H200'), from nvidia-smi; `visible` is the
    CUDA_VISIBLE_DEVICES of the launch (indices). Several models: joined with '+'. No nvidia-smi: NO_GPU."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return NO_GPU
    try:
        out = subprocess.run([exe, "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return NO_GPU
    rows = [line.split(",", 1) for line in out.splitlines() if "," in line]
    names = {i.strip(): n.strip() for i, n in rows}
    if visible:
        picked = [names[i.strip()] for i in visible.split(",") if i.strip() in names]
        names = {str(k): n for k, n in enumerate(picked)} if picked else names
    return "+".join(sorted(set(names.values()))) or NO_GPU


@dataclass
class JitCache:
    """One launch's kept-cache folder. `folder` is where it lives on the machine that runs the server;
    `inside` is the path the server sees (the same for a process, the mount point in a container)."""

    folder: Path
    gpu: str
    env_hash: str
    inside: str | None = None
    warm: bool | None = None  # judged by prepare(), just before the server starts
    bytecode: str | None = None  # the PYTHONPYCACHEPREFIX given to the server (bytecode_env), if any
    kernels_before: int | None = None  # kernel files in the folder at prepare()
    compiled: int | None = None  # kernel files the start added (compiled_since_prepare(), once it answered)

    @classmethod
    def for_env(cls, root: Path, env_hash: str, gpu: str) -> "JitCache":
        return cls(Path(root) / "jit" / slug(gpu) / env_hash[:16], gpu, env_hash)

    def env(self) -> dict[str, str]:  # data-keyed: variable names
        """The variables that point each library at its subfolder (as the server sees the folder)."""
        base = self.inside or str(self.folder)
        return {var: f"{base}/{sub}" for sub, names in KEPT.items() for var in names}

    # data-keyed: variable names
    def bytecode_env(self, inherited: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
        """The variables that keep the server's Python bytecode in this folder, for a server that would
        otherwise write none: PYTHONDONTWRITEBYTECODE set (non-empty) in what it inherits from the
        controller (`inherited`), and neither that nor PYTHONPYCACHEPREFIX in the launch's own variables
        (`own`: the Environment's `env:` and the like, which win) nor a prefix inherited. {} otherwise."""
        if not inherited.get("PYTHONDONTWRITEBYTECODE") or "PYTHONPYCACHEPREFIX" in inherited or \
                {"PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"} & set(own):
            return {}
        self.bytecode = f"{self.inside or self.folder}/{BYTECODE}"
        return {"PYTHONPYCACHEPREFIX": self.bytecode, "PYTHONDONTWRITEBYTECODE": ""}  # empty: unset for Python

    def prepare(self) -> bool:
        """Before the start: was the folder there and non-empty (a warm start)? Then make the subfolders."""
        self.warm = any(p.is_file() for p in self.folder.rglob("*")) if self.folder.is_dir() else False
        for sub in KEPT:
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.kernels_before, self.compiled = self.kernel_files(), None
        return self.warm

    def kernel_files(self) -> int:
        """Files under the kernel caches (KEPT's subfolders; the bytecode is not counted)."""
        return sum(1 for sub in KEPT for p in (self.folder / sub).rglob("*") if p.is_file())

    def compiled_since_prepare(self) -> int | None:
        """Once the server answers: how many kernel files its start added (None before prepare())."""
        if self.kernels_before is not None:
            self.compiled = max(0, self.kernel_files() - self.kernels_before)
        return self.compiled

    def info(self) -> JitCacheRecord:
        return JitCacheRecord(folder=str(self.folder), gpu=self.gpu, env_hash=self.env_hash[:16], warm=self.warm,
                              **({"compiled": self.compiled} if self.compiled is not None else {}),
                              **({"mounted_at": self.inside} if self.inside else {}),
                              **({"bytecode": self.bytecode} if self.bytecode else {}))
