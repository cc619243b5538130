"""The wheel sets benchmarks/sglang_h200/wheels.py builds: one declared table per set.

A set names exactly one wheel per distribution (pins), the files left out of the tree (fnmatch patterns
on the wheel's paths, each with the reason an SM90 GPU never loads them), the files that must survive
the strip, and where its cache and archives live. Every drop pattern must match something, so a new
release with other names fails instead of carrying what it should not.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WheelSet:
    name: str  # --set value
    what: str  # MANIFEST.json's "what"
    wheels: list[tuple[str, str]]  # (distribution, version): one wheel each, cp312 / manylinux x86_64 or pure
    drop: dict[str, list[str]]  # normalised distribution -> patterns left out of the tree
    keep: dict[str, list[str]]  # normalised distribution -> patterns that must be kept
    static_drop: dict[str, list[str]]  # left out only with --drop-static-libs
    platforms: list[str]  # pip download --platform tags
    cache: str  # wheels and the unpacked tree, relative to the repository root
    out: str  # archives and MANIFEST.json, relative to the repository root
    limit_mib: float = 50  # default --limit-mib
    notes: dict[str, str] = field(default_factory=dict)  # distribution -> why it is (not) carried


# ------------------------------------------------------------------------------------ sglang-0.5.17
# (distribution, version): exactly one wheel each, cp312 / manylinux x86_64 or pure.
SGLANG_WHEELS: list[tuple[str, str]] = [
    ("annotated_types", "0.8.0"),
    ("apache_tvm_ffi", "0.1.11"),
    ("asttokens", "3.0.2"),
    ("cffi", "2.1.1"),
    ("compressed_tensors", "0.20.1"),
    ("dill", "0.4.1"),
    ("distro", "1.9.0"),
    ("executing", "2.3.0"),
    ("fastapi", "0.165.0"),
    ("flashinfer_python", "0.6.15.post1"),
    ("gguf", "0.19.0"),
    ("ipython", "9.18.1"),
    ("ipython_pygments_lexers", "1.1.1"),
    ("jedi", "0.20.1"),
    ("jiter", "0.19.0"),
    ("jsonschema", "4.26.0"),
    ("jsonschema_specifications", "2025.9.1"),
    ("loguru", "0.7.3"),
    ("matplotlib_inline", "0.2.2"),
    ("msgspec", "0.23.0"),
    ("openai", "2.6.1"),
    ("opentelemetry_api", "1.45.2"),
    ("orjson", "3.13.0"),
    ("parso", "0.8.7"),
    ("partial_json_parser", "0.2.1.1.post7"),
    ("pexpect", "4.9.0"),
    ("prompt_toolkit", "3.0.53"),
    ("ptyprocess", "0.7.0"),
    ("pure_eval", "0.2.4"),
    ("pybase64", "1.5.1"),
    ("pycparser", "3.12"),
    ("pydantic", "2.14.4"),
    ("pydantic_core", "2.50.5"),
    ("python_multipart", "0.0.34"),
    ("pyzmq", "27.3.0"),
    ("referencing", "0.37.0"),
    ("rpds_py", "2026.9.1"),
    ("setproctitle", "1.3.8"),
    ("sgl_deep_gemm", "0.1.5.post1"),
    ("sglang", "0.5.17"),
    ("sglang_kernel", "0.4.5"),
    ("sniffio", "1.3.1"),
    ("soundfile", "0.13.1"),
    ("stack_data", "0.6.3"),
    ("starlette", "1.10.0"),
    ("tokenizers", "0.22.2"),
    ("torch_c_dlpack_ext", "0.1.5"),
    ("torch_memory_saver", "0.0.10"),
    ("traitlets", "5.16.1"),
    ("transformers", "5.12.1"),
    ("typing_extensions", "4.16.0"),  # pydantic 2.14 needs a newer one than the machine's
    ("typing_inspection", "0.4.5"),
    ("uvicorn", "0.55.0"),
    ("wcwidth", "0.9.4"),
    ("xgrammar", "0.2.1"),
    ("zstandard", "0.25.0"),
]

# Files left out of the tree, per distribution (fnmatch patterns on the wheel's paths). Every pattern
# must match something, so a new release with other names fails here instead of carrying 1 GiB.
# sgl_kernel/__init__.py calls load_utils._load_architecture_specific_ops(), which on compute
# capability 90 loads sgl_kernel/sm90/common_ops.* (sm100/ is for every other GPU); flash_ops (FA3),
# flashmla_ops and infllm_ops are loaded only when their backends are used.
SGLANG_DROP: dict[str, list[str]] = {
    "sglang_kernel": [
        "sgl_kernel/flash_ops.*",  # FA3, ~1.05 GiB unpacked
        "sgl_kernel/flashmla_ops.*",  # FlashMLA
        "sgl_kernel/infllm_ops.*",  # InfLLM-V2
        "sgl_kernel/sm100/*",  # common_ops for non-SM90 GPUs
    ],
}
# Files that must survive the strip (what an SM90 GPU loads).
SGLANG_KEEP: dict[str, list[str]] = {
    "sglang_kernel": ["sgl_kernel/__init__.py", "sgl_kernel/load_utils.py", "sgl_kernel/sm90/common_ops.*"],
}
# Dropped only with --drop-static-libs: link-time-only files (no Python code opens them); xgrammar's
# static C++ library is 62 MiB unpacked, ~26 MiB xz. Not needed to fit in 2 archives (see MANIFEST).
SGLANG_STATIC_DROP: dict[str, list[str]] = {
    "xgrammar": ["xgrammar/lib/libxgrammar.a"],
}

SGLANG_PLATFORMS = ["manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "any"]

SGLANG = WheelSet(
    name="sglang-0.5.17",
    what="SGLang 0.5.17 site tree for Python 3.12 / x86_64 (unpack every part into one folder)",
    wheels=SGLANG_WHEELS, drop=SGLANG_DROP, keep=SGLANG_KEEP, static_drop=SGLANG_STATIC_DROP,
    platforms=SGLANG_PLATFORMS, cache=".cache/sglang-0.5.17-wheels", out=".sglwheels",
)


# ------------------------------------------------------------------------------------- vllm-0.24.0
# The closure of vllm==0.24.0 for cp312 / manylinux_2_39 x86_64, resolved on 2026-12-07 with
#   pip install --dry-run --ignore-installed --report r.json --only-binary=:all: --python-version 3.12
#     --implementation cp --abi cp312 --platform manylinux_2_39_x86_64 ... --platform any
#     --target /tmp/t vllm==0.24.0 torch==2.11.0
# (llguidance 1.7.x is manylinux_2_31 only, so the SGLang tags up to 2_34 with gaps do not suffice),
# minus torch 2.11.0's own closure (the GPU machine has it: triton, sympy, mpmath, networkx, jinja2,
# markupsafe, fsspec, filelock, setuptools, cuda-toolkit, cuda-bindings, cuda-pathfinder and the
# nvidia-* runtime wheels cublas, cudnn-cu13, cusparselt-cu13, nccl-cu13, nvshmem-cu13 (and through
# cuda-toolkit's extras cudart, cufft, cufile, cupti, curand, cusolver, cusparse, nvjitlink, nvrtc, nvtx)),
# minus VLLM_NOT_CARRIED below, plus uvicorn[standard]'s httptools/uvloop/websockets (vllm.v1.utils
# imports uvloop at module level) and typing_extensions 4.16.0 (pydantic 2.14 needs a newer one than
# torch's floor). pip ran on Python 3.11, so python_version markers were read for 3.11: six (vllm:
# `six>=1.16.0; python_version > "3.11"`) is added by hand; setuptools (same marker) is torch's.
VLLM_WHEELS: list[tuple[str, str]] = [
    ("aiohappyeyeballs", "2.7.1"),
    ("aiohttp", "3.14.5"),
    ("aiosignal", "1.4.0"),
    ("annotated_doc", "0.0.7"),
    ("annotated_types", "0.8.0"),
    ("anthropic", "2.17.0"),
    ("anyio", "4.16.0"),
    ("apache_tvm_ffi", "0.1.9"),
    ("astor", "0.8.1"),
    ("attrs", "26.1.0"),
    ("blake3", "1.0.11"),
    ("cachetools", "8.0.3"),
    ("cbor2", "6.3.0"),
    ("certifi", "2026.10.19.post1"),
    ("cffi", "2.1.1"),
    ("charset_normalizer", "3.5.3"),
    ("click", "8.5.1"),
    ("cloudpickle", "3.1.3"),
    ("compressed_tensors", "0.17.0"),
    ("cuda_tile", "1.3.0"),
    ("depyf", "0.20.0"),
    ("dill", "0.4.1"),
    ("diskcache", "5.6.3"),
    ("docstring_parser", "0.18.0"),
    ("einops", "0.8.2"),
    ("fastapi", "0.136.3"),
    ("fastsafetensors", "0.5.0"),
    ("flashinfer_python", "0.6.12"),
    ("frozenlist", "1.8.0"),
    ("googleapis_common_protos", "1.76.0"),
    ("grpcio", "1.85.4"),
    ("h11", "0.16.0"),
    ("hf_xet", "1.8.0"),
    ("httpcore", "1.0.9"),
    ("httpcore2", "2.17.0"),
    ("httptools", "0.9.0"),
    ("httpx", "0.29.0"),
    ("httpx2", "2.17.0"),
    ("huggingface_hub", "2.4.0"),
    ("idna", "3.21"),
    ("ijson", "3.6.0"),
    ("interegular", "0.3.3"),
    ("jiter", "0.19.0"),
    ("jmespath", "1.1.0"),
    ("jsonschema", "4.26.0"),
    ("jsonschema_specifications", "2025.9.1"),
    ("kernels", "0.19.1"),
    ("lark", "1.2.2"),
    ("llguidance", "1.7.6"),
    ("llvmlite", "0.47.0"),
    ("lm_format_enforcer", "0.11.3"),
    ("loguru", "0.7.3"),
    ("markdown_it_py", "4.3.0"),
    ("mcp", "2.3.0"),
    ("mcp_types", "2.3.0"),
    ("mdurl", "0.1.2"),
    ("mistral_common", "1.13.1"),
    ("model_hosting_container_standards", "0.1.16"),
    ("msgspec", "0.23.0"),
    ("multidict", "7.2.1"),
    ("ninja", "1.13.2"),
    ("numba", "0.65.0"),
    ("numpy", "2.3.5"),
    ("nvidia_cudnn_frontend", "1.28.0"),
    ("nvidia_ml_py", "13.615.71"),
    ("openai", "3.63.0"),
    ("openai_harmony", "0.0.8"),
    ("opentelemetry_api", "1.45.2"),
    ("opentelemetry_exporter_http_transport", "0.66b2"),
    ("opentelemetry_exporter_otlp", "1.45.2"),
    ("opentelemetry_exporter_otlp_common", "0.66b2"),
    ("opentelemetry_exporter_otlp_proto_common", "1.45.2"),
    ("opentelemetry_exporter_otlp_proto_grpc", "1.45.2"),
    ("opentelemetry_exporter_otlp_proto_http", "1.45.2"),
    ("opentelemetry_proto", "1.45.2"),
    ("opentelemetry_sdk", "1.45.2"),
    ("opentelemetry_semantic_conventions", "0.66b2"),
    ("opentelemetry_semantic_conventions_ai", "0.5.1"),
    ("outlines_core", "0.2.14"),
    ("packaging", "26.4"),
    ("partial_json_parser", "0.2.1.1.post7"),
    ("pillow", "13.0.0"),
    ("prometheus_client", "0.26.0"),
    ("prometheus_fastapi_instrumentator", "8.1.0"),
    ("propcache", "0.5.4"),
    ("protobuf", "7.36.2"),
    ("psutil", "7.2.2"),
    ("py_cpuinfo", "9.0.0"),
    ("pybase64", "1.5.1"),
    ("pycparser", "3.12"),
    ("pydantic", "2.14.4"),
    ("pydantic_core", "2.50.5"),
    ("pydantic_extra_types", "2.11.1"),
    ("pygments", "2.21.0"),
    ("pyjwt", "2.15.1"),
    ("python_json_logger", "4.2.0"),
    ("python_multipart", "0.0.34"),
    ("pyyaml", "6.0.4"),
    ("pyzmq", "27.3.0"),
    ("referencing", "0.37.0"),
    ("regex", "2026.12.2"),
    ("requests", "2.34.2"),
    ("rich", "15.0.0"),
    ("rpds_py", "2026.9.1"),
    ("safetensors", "0.8.0"),
    ("sentencepiece", "0.2.3"),
    ("setproctitle", "1.3.8"),
    ("shellingham", "1.5.4"),
    ("six", "1.17.0"),  # python_version > "3.11" marker: the resolver (Python 3.11) missed it
    ("sniffio", "1.3.1"),
    ("sse_starlette", "3.7.1"),
    ("starlette", "1.10.0"),
    ("supervisor", "4.3.0"),
    ("tabulate", "0.10.0"),
    ("tiktoken", "0.14.0"),
    ("tokenizers", "0.23.3"),
    ("tomlkit", "0.15.3"),
    ("torch_c_dlpack_ext", "0.1.5"),
    ("torchvision", "0.26.0"),
    ("tqdm", "4.70.1"),
    ("transformers", "5.25.0"),
    ("truststore", "0.10.5"),
    ("typer", "0.29.2"),
    ("typing_extensions", "4.16.0"),
    ("typing_inspection", "0.4.5"),
    ("urllib3", "2.8.0"),
    ("uvicorn", "0.55.0"),
    ("uvloop", "0.23.0"),
    ("vllm", "0.24.0"),
    ("watchfiles", "1.3.0"),
    ("websockets", "17.4"),
    ("xgrammar", "0.2.3"),
    ("yarl", "1.25.1"),
]

# Whole distributions in vLLM's Requires-Dist that are not carried, each with the evidence (vLLM 0.24.0's
# own source, grep over vllm/**/*.py): nothing on the path of a dense Llama + EAGLE-3 server on SM90 imports them.
VLLM_NOT_CARRIED: dict[str, str] = {
    "torch": "on the machine (2.11.0+cu130); never carried, nor its closure (above)",
    "torchaudio": "imported only by audio models/processors (cohere_asr, funasr, minicpmo, midashenglm)",
    "humming_kernels": "no module of vllm imports humming; with it go nvidia-cuda-nvcc/crt/cccl/nvvm/runtime/nvrtc "
                       "(its [cu13] extra, a JIT toolchain)",
    "tokenspeed_mla": "function-local imports in the MLA backends only (DeepSeek-style models); with it tokenspeed-triton",
    "flashinfer_cubin": "427 MiB of prebuilt trtllm-gen/DeepGEMM cubins, every one for Sm100/Sm103 or FP8 grouped GEMM "
                        "(no sm90 name in the wheel); flashinfer/jit/env.py has_flashinfer_cubin() makes it optional. "
                        "FA3 serves SM90's attention; FlashInfer's sampler is JIT, not a cubin",
    "nvidia_cutlass_dsl": "CuTe DSL (146 MiB with its libs_base/libs_cu13 and their cuda-python/cuda-core): vllm imports "
                          "cutlass only function-locally or in modules imported lazily (vllm_flash_attn/cute = FA4 for SM100, "
                          "whose availability check is a file-exists test; mamba/ops/gdn_chunk_cutedsl for Qwen3-Next GDN; "
                          "models/deepseek_v4; the mm-prefix mask in v1/attention/backends/flash_attn.py); flashinfer "
                          "guards its CuTe kernels with is_cute_dsl_available()",
    "quack_kernels": "imported only by mamba/ops/gdn_chunk_cutedsl (lazy, Qwen3-Next GDN); needs cutlass (above)",
    "opencv_python_headless": "61 MiB; vllm imports cv2 only inside functions for video (multimodal/video.py, "
                              "assets/video.py, benchmarks/datasets); mistral_common imports it behind is_opencv_installed()",
    "tilelang": "one function-local import (model_executor/kernels/mhc/tilelang_kernels.py, mHC models only); with it z3-solver, ml_dtypes, pyelftools",
}

# Files left out of vllm's own wheel (637 MB unpacked).
VLLM_DROP: dict[str, list[str]] = {
    "vllm": [
        # FA2 (190 MB). vllm/v1/attention/backends/fa_utils.py get_flash_attn_version(): on
        # device_capability.major == 9 with FA3 available the version is 3; FA2 only for ALiBi (not Llama)
        # or an explicit flash_attn_version. flash_attn_interface.py imports _vllm_fa2_C in try/except
        # ImportError (FA2_AVAILABLE = False), so its absence is not an error.
        "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
        # MoE ops (45 MB). platforms/cuda.py import_kernels() imports vllm._moe_C_stable_libtorch in
        # try/except ImportError (a warning); torch.ops._moe_C.* is called only from _custom_ops.py's MoE
        # helpers (moe_align_block_size, topk_softmax, grouped_topk, moe_sum, marlin MoE ...), used by
        # model_executor/layers/fused_moe/ and MoE quantisation only; the fake-op registration at
        # _custom_ops.py:2473 is guarded by hasattr(torch.ops, "_moe_C").
        "vllm/_moe_C_stable_libtorch.abi3.so",
        # The Rust frontend binary (37 MB): envs.py _resolve_rust_frontend_path() returns None unless
        # VLLM_USE_RUST_FRONTEND=1 (default "0").
        "vllm/vllm-rs",
        # SM100 FMHA sources (30 MB of CUTLASS headers): function-local imports in models/minimax_m3 only.
        "vllm/third_party/fmha_sm100/*",
        # DeepGEMM's extension built for other Pythons (this machine runs 3.12).
        "vllm/third_party/deep_gemm/_C.cpython-310-*",
        "vllm/third_party/deep_gemm/_C.cpython-311-*",
        "vllm/third_party/deep_gemm/_C.cpython-313-*",
        "vllm/third_party/deep_gemm/_C.cpython-314-*",
    ],
}
# xgrammar's static C++ library (62 MiB unpacked): link-time only, no Python code opens it (SGLang's
# --drop-static-libs, dropped always here).
VLLM_DROP["xgrammar"] = ["xgrammar/lib/libxgrammar.a"]
VLLM_KEEP: dict[str, list[str]] = {
    "vllm": ["vllm/_C_stable_libtorch.abi3.so",  # platforms/cuda.py imports it at module level
             "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so",  # FA3: SM90's default attention (FLASH_ATTN first)
             "vllm/vllm_flash_attn/flash_attn_interface.py",
             "vllm/third_party/deep_gemm/_C.cpython-312-*"],
}

VLLM = WheelSet(
    name="vllm-0.24.0",
    what="vLLM 0.24.0 site tree for Python 3.12 / x86_64 beside torch 2.11.0+cu130 (unpack every part into one folder)",
    wheels=VLLM_WHEELS, drop=VLLM_DROP, keep=VLLM_KEEP, static_drop={},
    platforms=["manylinux_2_39_x86_64", "manylinux_2_38_x86_64", "manylinux_2_37_x86_64", "manylinux_2_36_x86_64", "manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_33_x86_64", "manylinux_2_32_x86_64", "manylinux_2_31_x86_64", "manylinux_2_30_x86_64", "manylinux_2_29_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64", "manylinux_2_25_x86_64", "manylinux_2_24_x86_64", "manylinux_2_23_x86_64", "manylinux_2_22_x86_64", "manylinux_2_21_x86_64", "manylinux_2_20_x86_64", "manylinux_2_19_x86_64", "manylinux_2_18_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "any"],
    cache=".cache/vllm-0.24.0-wheels", out=".vllmwheels", limit_mib=36, notes=VLLM_NOT_CARRIED,
)

SETS: dict[str, WheelSet] = {s.name: s for s in (SGLANG, VLLM)}
