"""Run sglang.bench_serving (the client of an SGLang wheel, unpacked, not installed) without the server
side it imports only for a few names: sglang.srt.utils (torch, triton, tvm_ffi) is stubbed.

    python benchmarks/sglang_bench_shim.py SGLANG_DIR DEPS_DIR -- <bench_serving args>
"""

import importlib
import sys
import types

root, deps = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0], *sys.argv[4:]] if sys.argv[3:4] == ["--"] else [sys.argv[0], *sys.argv[3:]]
sys.path[:0] = [deps, root]

utils = types.ModuleType("sglang.srt.utils")
utils.__path__ = []  # a stub package: only the submodules below exist
patches = types.ModuleType("sglang.srt.utils.hf_transformers_patches")
patches.apply_all = lambda *a, **k: None
network = types.ModuleType("sglang.srt.utils.network")
network.resolve_base_url = lambda base_url, host, port, *a, **k: base_url or f"http://{host}:{port}"
network.resolve_host_port = lambda host, port, *a, **k: (host, port)
disagg = types.ModuleType("sglang.srt.disaggregation.utils")
disagg.FAKE_BOOTSTRAP_HOST = "2.2.2.2"
sys.modules.update({"sglang.srt.utils": utils, "sglang.srt.utils.hf_transformers_patches": patches,
                    "sglang.srt.utils.network": network, "sglang.srt.disaggregation.utils": disagg})
try:  # datasets (Hugging Face) is imported for dataset kinds this client is not run with (mmmu, ...)
    import datasets  # noqa: F401
except ImportError:
    hf = types.ModuleType("datasets")
    hf.load_dataset = lambda *a, **k: (_ for _ in ()).throw(ImportError("datasets is not installed"))
    sys.modules["datasets"] = hf
try:  # sglang/utils.py imports IPython.display for notebook helpers the client never calls
    import IPython.display  # noqa: F401
except ImportError:
    ipy, display = types.ModuleType("IPython"), types.ModuleType("IPython.display")
    ipy.__path__, display.HTML, display.display = [], str, print
    sys.modules.update({"IPython": ipy, "IPython.display": display})
importlib.import_module("sglang.benchmark.serving").cli_main()
