"""`toolkit gpu validate`: is this host (or image) fit to run an Environment on its GPUs?

    report = validate(spec_path="envs/sglang-cu13-blackwell.yaml", gpus=2)
    report["ok"], report["checks"]      # each check: name, status (pass|fail|skip), detail, data

Checks, in order: torch imports; torch sees CUDA; CUDA runtime major = the spec's `cuda`; the
driver can run that runtime; compute capability (SMxy) and that torch carries kernels for it;
each gated flag the spec turns on is supported on that SM; NCCL version; a one-GPU NCCL
all-reduce; free memory against the spec's mem-fraction-static. With `gpus=N`, one process per
GPU: all-reduce sum, bus bandwidth table, symmetric-memory probe (probes.py). With no GPU, GPU
checks are `skip` with the reason, unless require_gpu, which makes them `fail`.
"""

from __future__ import annotations

import platform
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from toolkit import __version__
from toolkit.errors import ToolkitError
from toolkit.gpu import flags as gflags
from toolkit.gpu import probes
from toolkit.gpu.smi import gpu_fingerprint
from toolkit.schema.manifest import GpuFingerprint


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


class _Skip(Exception):
    """A check cannot run here (no torch, no GPU); its message is the reason."""


class _NotAsked(_Skip):
    """A check with nothing to check (e.g. no --spec): a skip even under --require-gpu."""


def _load_env_spec(spec_path: str | Path | None) -> Any:
    if spec_path is None:
        return None
    from toolkit.specs import load_spec

    return load_spec(spec_path, expect="Environment")


class Validator:
    def __init__(self, spec_path: str | Path | None = None, gpus: int | None = None, require_gpu: bool = False,
                 backend: str = "auto", progress: Callable[[str], None] | None = None):
        if gpus is not None and gpus < 1:
            raise ToolkitError(f"--gpus must be at least 1, not {gpus}")
        if backend not in ("auto", "nccl", "gloo"):
            raise ToolkitError(f"unknown backend {backend!r}", hint="auto, nccl or gloo")
        self.loaded = _load_env_spec(spec_path)
        self.spec = self.loaded.model if self.loaded is not None else None
        self.gpus = gpus
        self.require_gpu = require_gpu
        self.backend = backend
        self.progress = progress or (lambda _msg: None)
        self.checks: list[Check] = []
        self.torch: Any = None
        self.capabilities: list[tuple[int, int]] = []
        self.fingerprint: GpuFingerprint | None = None

    # -- plumbing ---------------------------------------------------------------------------------
    def add(self, name: str, fn: Callable[[], tuple[str, str, dict] | tuple[str, str]], gpu: bool = True) -> None:
        self.progress(name)
        try:
            res = fn()
            status, detail, data = res if len(res) == 3 else (*res, {})
        except _Skip as exc:
            gpu_missing = gpu and self.require_gpu and not isinstance(exc, _NotAsked)
            status, detail, data = ("fail" if gpu_missing else "skip"), str(exc), {}
        except Exception as exc:  # noqa: BLE001 - a check that breaks is a failed check, with the cause
            status, detail, data = "fail", f"{type(exc).__name__}: {exc}", {}
        self.checks.append(Check(name, status, detail, data))

    def _need_cuda(self) -> Any:
        if self.torch is None:
            raise _Skip("torch is not importable here")
        if not self.torch.cuda.is_available():
            if any(c.name == "cuda_available" for c in self.checks):
                raise _Skip("no CUDA device (see cuda_available)")
            raise _Skip(f"no CUDA device: torch.cuda.is_available() is False (torch {self.torch.__version__}, "
                        f"built for CUDA {self.torch.version.cuda or 'none'})")
        return self.torch

    # -- checks -----------------------------------------------------------------------------------
    def c_torch(self):
        try:
            import torch
        except ImportError as exc:
            raise _Skip(f"torch is not importable: {exc}") from None
        self.torch = torch
        return "pass", f"torch {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})", \
            {"version": torch.__version__, "cuda_build": torch.version.cuda}

    def c_cuda(self):
        torch = self._need_cuda()
        n = torch.cuda.device_count()
        names = [torch.cuda.get_device_name(i) for i in range(n)]
        self.capabilities = [tuple(torch.cuda.get_device_capability(i)) for i in range(n)]
        return "pass", f"{n} CUDA device(s): {', '.join(sorted(set(names)))}", {"count": n, "names": names}

    def c_cuda_version(self):
        torch = self._need_cuda()
        runtime = torch.version.cuda or ""
        data = {"runtime": runtime, "spec": self.spec.cuda if self.spec is not None else None}
        return (*compare_cuda(runtime, data["spec"]), data)

    def c_driver(self):
        torch = self._need_cuda()
        fp = self.fingerprint
        if not fp or not fp.cuda_version:
            raise _Skip("nvidia-smi gave no driver CUDA version")
        runtime = torch.version.cuda or "0"
        drv = fp.cuda_version
        data = {"driver": fp.driver_version, "driver_cuda": drv, "runtime": runtime}
        if _ver(drv)[:1] >= _ver(runtime)[:1]:  # minor-version compatibility within a major
            return "pass", f"driver {fp.driver_version} (CUDA {drv}) runs CUDA {runtime} programs", data
        return "fail", f"driver {fp.driver_version} supports CUDA {drv}, older than the runtime {runtime}", data

    def c_capability(self):
        torch = self._need_cuda()
        caps = sorted(set(self.capabilities))
        sms = [gflags.sm_name(c) for c in caps]
        arches = torch.cuda.get_arch_list()
        data = {"capabilities": [list(c) for c in self.capabilities], "sm": sms, "torch_arch_list": arches}
        missing = [gflags.sm_name(c) for c in caps if not _has_kernels(c, arches)]
        detail = f"compute capability {', '.join(sms)}; torch kernels for {', '.join(arches)}"
        if self.spec is not None and "TORCH_CUDA_ARCH_LIST" in self.spec.build_args:
            arch_list = self.spec.build_args["TORCH_CUDA_ARCH_LIST"]
            data["spec_arch_list"] = arch_list
            built = {a.strip().replace("+PTX", "") for a in arch_list.replace(";", " ").split()}
            absent = [f"{c[0]}.{c[1]}" for c in caps if f"{c[0]}.{c[1]}" not in built]
            if absent:
                detail += (f"; note: the spec builds extensions for TORCH_CUDA_ARCH_LIST={arch_list}, "
                           f"not for {', '.join(absent)} (matters inside the built image)")
        if missing:
            return "fail", f"{detail}; torch has no kernels for {', '.join(missing)}", data
        return "pass", detail, data

    def c_flags(self):
        self._need_cuda()
        if self.spec is None:
            raise _NotAsked("no --spec: no server flags to check")
        uses = gflags.gated_uses(self.spec)
        if not uses:
            return "pass", "the spec turns on no SM-gated flag", {}
        patch = gflags.sm120_patch(self.loaded)
        rows, worst = [], "pass"
        for cap in sorted(set(self.capabilities)):
            for use in uses:
                status, why = gflags.flag_support(use, cap, patch)
                rows.append({"flag": use.flag, "sm": gflags.sm_name(cap), "status": status, "reason": why,
                             "presets": list(use.presets)})
                worst = "fail" if status == "fail" else worst
        detail = "; ".join(r["reason"] for r in rows)
        return worst, detail, {"flags": rows, "sm120_patch": str(patch) if patch else None}

    def c_nccl(self):
        torch = self._need_cuda()
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_nccl_available():
            return "fail", "torch.distributed has no NCCL backend in this build", {}
        v = torch.cuda.nccl.version()
        text = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        return "pass", f"NCCL {text}", {"version": text}

    def c_collective(self):
        self._need_cuda()
        res = probes.probe_rank(0, 1, "nccl", probes.free_port(), sizes=[16 << 20], iters=10, warmup=3,
                                symm=False)
        if "error" in res:
            return "fail", f"one-GPU NCCL all-reduce failed: {res['error']}", res
        ok = res["sum"]["ok"]
        bw = res["bandwidth"][0]
        return ("pass" if ok else "fail"), \
            (f"one-GPU NCCL all-reduce {'gave' if ok else 'did NOT give'} the right sum on {res['device']} "
             f"(one call {bw['time_us']} us; 1 rank moves no data)"), res

    def c_memory(self):
        torch = self._need_cuda()
        rows = []
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            rows.append({"gpu": i, "free_gib": round(free / 2**30, 2), "total_gib": round(total / 2**30, 2),
                         "free_fraction": round(free / total, 4)})
        need = _mem_fraction(self.spec)
        worst = min(r["free_fraction"] for r in rows)
        detail = ", ".join(f"GPU{r['gpu']} {r['free_gib']}/{r['total_gib']} GiB free" for r in rows)
        data = {"gpus": rows, "mem_fraction_static": need}
        if need is not None and worst < need:
            return "fail", f"{detail}: below the spec's mem-fraction-static {need}", data
        return "pass", detail + (f" (spec's mem-fraction-static {need})" if need is not None else ""), data

    # -- multi-GPU (issue 10) ---------------------------------------------------------------------
    def multi(self) -> None:
        n = self.gpus
        assert n is not None
        backend = self.backend
        if backend == "auto":
            cuda = self.torch is not None and self.torch.cuda.is_available()
            backend = "nccl" if (cuda or self.require_gpu) else "gloo"
        if backend == "nccl":
            have = self.torch.cuda.device_count() if self.torch is not None and self.torch.cuda.is_available() else 0
            if have < n:
                reason = f"--gpus {n} asks for {n} GPUs, {have} visible"
                for name in ("allreduce_sum", "allreduce_busbw", "symm_mem"):
                    self.checks.append(Check(name, "fail" if (have or self.require_gpu) else "skip", reason))
                return
        if self.torch is None:
            for name in ("allreduce_sum", "allreduce_busbw", "symm_mem"):
                self.checks.append(Check(name, "fail" if self.require_gpu else "skip", "torch is not importable"))
            return
        self.progress(f"{n} processes ({backend})")
        results = probes.run_probes(n, backend)
        errors = [f"rank {r['rank']}: {r['error']}" for r in results if "error" in r]
        if errors:
            for name in ("allreduce_sum", "allreduce_busbw", "symm_mem"):
                self.checks.append(Check(name, "fail", "; ".join(errors), {"ranks": results}))
            return
        sums = [r["sum"] for r in results]
        ok = all(s["ok"] for s in sums)
        self.checks.append(Check("allreduce_sum", "pass" if ok else "fail",
                                 f"{backend} all-reduce over {n} process(es): sum {sums[0]['expected']:g} "
                                 f"{'correct on every rank' if ok else 'WRONG on some rank'}", {"ranks": sums}))
        table = _bw_table(results)
        if n == 1:
            detail = ("1 process: all-reduce moves no data (busbw 0 by the nccl-tests formula); per-call time "
                      + ", ".join(f"{_size(r['bytes'])} {r['time_us']} us" for r in table))
        else:
            detail = "; ".join(f"{_size(r['bytes'])}: busbw {r['busbw_gbps']} GB/s (algbw {r['algbw_gbps']})"
                               for r in table)
        self.checks.append(Check("allreduce_busbw", "pass", detail,
                                 {"table": table, "formula": "busbw = algbw * 2(n-1)/n (nccl-tests)",
                                  "timing": "slowest rank's mean per iteration"}))
        if backend != "nccl":
            self.checks.append(Check("symm_mem", "skip", "symmetric memory needs CUDA devices (backend gloo)"))
            return
        sm = [r.get("symm_mem", {}) for r in results]
        good = all(s.get("ok") for s in sm)
        mc = sorted({s.get("multicast_ptr", 0) for s in sm})
        detail = (f"torch symmetric memory over {n} GPU(s), multicast disabled (multicast_ptr {mc}): "
                  + ("every rank read every peer's buffer" if good else
                     "; ".join(s.get("error", f"read {s.get('peer_values')}") for s in sm)))
        self.checks.append(Check("symm_mem", "pass" if good else "fail", detail, {"ranks": sm}))

    # -- run --------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:  # json-edge: the GpuValidation document (--json, -o)
        started = time.time()
        env = probes.no_multicast_env()
        self.fingerprint = gpu_fingerprint()
        self.add("torch", self.c_torch)
        self.add("cuda_available", self.c_cuda)
        self.add("cuda_version", self.c_cuda_version)
        self.add("driver", self.c_driver)
        self.add("compute_capability", self.c_capability)
        self.add("spec_flags", self.c_flags)
        self.add("nccl_version", self.c_nccl)
        self.add("collective_1gpu", self.c_collective)
        self.add("free_memory", self.c_memory)
        if self.gpus is not None:
            self.multi()
        counts = {s: sum(c.status == s for c in self.checks) for s in ("pass", "fail", "skip")}
        return {
            "kind": "GpuValidation",
            "toolkit_version": __version__,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": round(time.time() - started, 2),
            "host": {"hostname": socket.gethostname(), "kernel": platform.release(), "python": platform.python_version()},
            "spec": {"path": str(self.loaded.path), "name": self.spec.name} if self.spec is not None else None,
            "gpus_requested": self.gpus,
            "require_gpu": self.require_gpu,
            "env": env,
            "checks": [asdict(c) for c in self.checks],
            "summary": counts,
            "ok": counts["fail"] == 0,
            "gpu_fingerprint": self.fingerprint.model_dump(mode="json", exclude_unset=True) if self.fingerprint else None,
        }


# json-edge: the GpuValidation document (--json, -o)
def validate(spec_path: str | Path | None = None, gpus: int | None = None, require_gpu: bool = False,
             backend: str = "auto", progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    return Validator(spec_path, gpus, require_gpu, backend, progress).run()


def compare_cuda(runtime: str, wanted: str | None) -> tuple[str, str]:
    """(status, detail): the CUDA runtime's major version against the spec's `cuda`. Pure."""
    if wanted is None:
        return "pass", f"CUDA runtime {runtime} (no spec `cuda` to compare with)"
    want = wanted.split(".")[0]
    if runtime.split(".")[0] == want:
        return "pass", f"CUDA runtime {runtime}: major {want} as the spec asks ({wanted})"
    return "fail", f"CUDA runtime {runtime or 'none'}, but the spec asks for CUDA {wanted} (major {want})"


def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _has_kernels(cap: tuple[int, int], arches: list[str]) -> bool:
    """torch's arch list has SASS for this SM, or PTX (compute_xy) of an older one the driver can JIT."""
    val = cap[0] * 10 + cap[1]
    for a in arches:
        kind, _, num = a.partition("_")
        num = num.rstrip("a").rstrip("f")
        if not num.isdigit():
            continue
        if kind == "sm" and int(num) == val:
            return True
        if kind == "compute" and int(num) <= val:
            return True
    return False


def _mem_fraction(spec: Any) -> float | None:
    if spec is None:
        return None
    vals = [float(a["mem-fraction-static"]) for a in spec.servers.values() if "mem-fraction-static" in a]
    return max(vals) if vals else None


def _bw_table(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for i, row in enumerate(results[0]["bandwidth"]):
        slowest = max((r["bandwidth"][i] for r in results), key=lambda b: b["time_us"])
        rows.append(dict(slowest))
    return rows


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"
