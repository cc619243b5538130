"""Collective probes: one process per GPU, an all-reduce that must give the right sum, its bus
bandwidth at a few message sizes, and a torch symmetric-memory probe.

    run_probes(world=2, backend="nccl")   # spawns 2 processes (torch.multiprocessing, spawn)
    run_probes(world=2, backend="gloo")   # the same code on CPU processes (tests, no GPU)
    probe_rank(0, 1, "nccl", ...)         # in this process: the one-GPU collective

Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, and for all-reduce
busbw = algbw * 2 (n - 1) / n, the figure comparable to the link's peak whatever n is (0 at n = 1).

NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1): it can take shared GPUs out of service. The symmetric-memory probe uses
peer pointers only (rendezvous, get_buffer, barrier) and never a multicast object.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import traceback
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
GPU_SIZES = [1 << 20, 16 << 20, 256 << 20]   # bytes per rank: 1 MiB, 16 MiB, 256 MiB
CPU_SIZES = [64 << 10, 1 << 20, 8 << 20]     # gloo on CPU: 64 KiB, 1 MiB, 8 MiB


def no_multicast_env() -> dict[str, str]:  # data-keyed: variable names
    """Force the multicast-off variables into this process's environment; what was set."""
    os.environ.update(NO_MULTICAST)
    return dict(NO_MULTICAST)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bus_factor(world: int) -> float:
    return 2 * (world - 1) / world


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _bandwidth(dist: Any, device: Any, world: int, sizes: list[int], iters: int, warmup: int) -> list[dict]:
    import torch

    rows = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        for _ in range(warmup):
            dist.all_reduce(x)
        _sync(device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        _sync(device)
        elapsed = (time.perf_counter() - t0) / iters
        algbw = nbytes / elapsed / 1e9
        rows.append({"bytes": nbytes, "iters": iters, "time_us": round(elapsed * 1e6, 2),
                     "algbw_gbps": round(algbw, 3), "busbw_gbps": round(algbw * bus_factor(world), 3)})
        del x
    return rows


def _symm_mem(dist: Any, device: Any, rank: int, world: int) -> dict[str, Any]:  # json-edge: part of rank<k>.json
    """Allocate a symmetric buffer, rendezvous, write own rank, read every peer's buffer directly."""
    import torch
    import torch.distributed._symmetric_memory as symm_mem

    group = dist.group.WORLD
    group_name = group.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by torch < 2.8, deprecated since
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            symm_mem.enable_symm_mem_for_group(group_name)
    numel = 1 << 16
    buf = symm_mem.empty(numel, dtype=torch.float32, device=device)
    handle = symm_mem.rendezvous(buf, group_name)
    buf.fill_(float(rank + 1))
    torch.cuda.synchronize(device)
    handle.barrier()
    seen = []
    for peer in range(world):
        peer_buf = handle.get_buffer(peer, (numel,), torch.float32)
        seen.append(float(peer_buf.sum().item()) / numel)
    handle.barrier()
    expected = [float(p + 1) for p in range(world)]
    return {"ok": seen == expected, "peer_values": seen, "expected": expected,
            "multicast_ptr": int(getattr(handle, "multicast_ptr", 0) or 0),
            "buffer_bytes": numel * 4, "torch": torch.__version__}


def probe_rank(rank: int, world: int, backend: str, port: int, out_dir: str | None = None,
               sizes: list[int] | None = None, iters: int = 20, warmup: int = 5,
               symm: bool = True) -> dict[str, Any]:  # json-edge: rank<k>.json
    """The probe one rank runs; rank 0's result (or this process's, world 1) is returned/written."""
    no_multicast_env()
    if backend == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    result: dict[str, Any] = {"rank": rank, "world": world, "backend": backend}
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        else:
            device = torch.device("cpu")
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=120),
                                **({"device_id": device} if backend == "nccl" else {}))
        try:
            x = torch.full((1024,), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(x)
            want = world * (world + 1) / 2
            got = x.cpu()
            result["sum"] = {"ok": bool(torch.all(got == want)), "expected": want,
                             "got_min": float(got.min()), "got_max": float(got.max())}
            result["device"] = str(device)
            if backend == "nccl":
                result["device_name"] = torch.cuda.get_device_name(device)
            result["bandwidth"] = _bandwidth(dist, device, world,
                                             sizes or (GPU_SIZES if backend == "nccl" else CPU_SIZES),
                                             iters, warmup)
            if symm and backend == "nccl":
                try:
                    result["symm_mem"] = _symm_mem(dist, device, rank, world)
                except Exception as exc:  # noqa: BLE001 - reported as the probe's failure
                    result["symm_mem"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            dist.barrier()
        finally:
            dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - a rank's failure is data for the report
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=6)
    if out_dir is not None:
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    return result


def _spawned(rank: int, world: int, backend: str, port: int, out_dir: str, sizes: list[int] | None,
             iters: int, warmup: int, symm: bool) -> None:
    probe_rank(rank, world, backend, port, out_dir, sizes, iters, warmup, symm)


def run_probes(world: int, backend: str, sizes: list[int] | None = None, iters: int = 20,
               warmup: int = 5, symm: bool = True, timeout_s: float = 300) -> list[dict[str, Any]]:
    """Spawn `world` processes running probe_rank; every rank's result, in rank order.

    A rank that died or hung past timeout_s appears as {"rank": r, "error": ...}."""
    import torch.multiprocessing as mp

    no_multicast_env()  # children inherit it; probe_rank sets it again in each
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="toolkit-probe-") as out_dir:
        ctx = mp.start_processes(_spawned, args=(world, backend, port, out_dir, sizes, iters, warmup, symm),
                                 nprocs=world, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        failure = None
        try:
            while not ctx.join(timeout=1):
                if time.monotonic() > deadline:
                    failure = f"probe processes still running after {timeout_s:.0f} s: killed"
                    break
        except Exception as exc:  # noqa: BLE001 - ProcessExitedException etc.
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join(5)
        results = []
        for r in range(world):
            f = Path(out_dir, f"rank{r}.json")
            if f.exists():
                results.append(json.loads(f.read_text()))
            else:
                results.append({"rank": r, "world": world, "backend": backend,
                                "error": failure or "rank wrote no result"})
    return results
