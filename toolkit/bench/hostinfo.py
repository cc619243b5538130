"""What an archive records about where it ran: host fingerprint (this machine's, or the provisioned
host's) and engine versions, scrubbed so that secrets never land in an archive."""

from __future__ import annotations

import functools
import os
import platform
from importlib import metadata

from toolkit.schema.manifest import Fingerprint, GpuDevice, Hardware, HostRecord, MachineRecord
from toolkit.scrub import scrub


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# Inherited variables that change what an engine does (a process-launched server gets the toolkit's whole
# environment, the Environment's `env:` on top): recorded, so that two runs that differ only there say so in
# the environment diff (a replay with TOOLKIT_INJECT_FORWARD_SLEEP_MS set, an NCCL or SGLANG_ switch, HF_HOME).
ENGINE_ENV_PREFIXES = ("SGLANG_", "SGL_", "TOOLKIT_INJECT_", "NCCL_", "NVSHMEM_", "TORCH_", "PYTORCH_",
                       "TORCHINDUCTOR_", "CUDA_", "CUBLAS_", "FLASHINFER_", "TRITON_", "HF_", "TRANSFORMERS_",
                       "TOKENIZERS_", "VLLM_", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                       # how Python starts the server's processes: bytecode not written means every start
                       # compiles what it imports (a warm start is mostly imports: docs/lab/starts.md)
                       "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONOPTIMIZE", "PYTHONHASHSEED")


def engine_env(environ=None) -> dict[str, str]:  # data-keyed: variable names
    """The controller's variables with an engine prefix (secrets are masked by the caller's scrub)."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENGINE_ENV_PREFIXES)}


def local_fingerprint() -> Fingerprint:
    """This machine's fingerprint (secrets in what it read masked)."""
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    fp = {
        "hostname": platform.node(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_bytes": mem,
        "python": platform.python_version(),
        "engines": {d: _version(d) for d in ("torch", "transformers", "sglang", "flashinfer-python")},
        "env": engine_env(),
    }
    try:
        from toolkit.gpu.fingerprint import gpu_fingerprint

        gpu = gpu_fingerprint()
    except ImportError:
        gpu = None
    fp["gpu"] = gpu.model_dump(mode="json", exclude_unset=True) if gpu is not None else None  # scrubbed with the rest
    return Fingerprint.model_validate(scrub(fp))


def host_fingerprint(slots) -> HostRecord:
    """This machine's fingerprint, plus the provisioned fingerprint of every host the arms run on (scrubbed as
    read)."""
    from toolkit import targets

    hosts = {}
    for s in slots:
        got = targets.get(s.target.kind).host_fingerprint(s)  # a provisioned host's (kind hosts)
        if got is not None:
            hosts[got[0]] = got[1].model_dump(mode="json", exclude_unset=True)  # as kept, to be scrubbed
    return HostRecord(controller=local_fingerprint(), hosts=scrub(hosts))


@functools.lru_cache(maxsize=None)
def _local_gpus() -> tuple[tuple[int, str], ...]:
    """(index, UUID or serial) of this machine's GPUs, read once per process (none without nvidia-smi)."""
    try:
        from toolkit.gpu.fingerprint import gpu_fingerprint

        fp = gpu_fingerprint()
    except ImportError:
        fp = None
    return _indexed(fp.gpus if fp else [])


@functools.lru_cache(maxsize=None)
def _host_gpus(host: str) -> tuple[tuple[int, str], ...]:
    """(index, UUID or serial) of a provisioned host's GPUs, from its fingerprint (none without one)."""
    try:
        from toolkit.provision.fingerprint import load_fingerprint

        fp = load_fingerprint(host) or Fingerprint()
    except Exception:  # noqa: BLE001 - no fingerprint: the launch's GPUs stay unknown, said so in the record
        fp = Fingerprint()
    return _indexed(fp.devices)


def _indexed(gpus: list[GpuDevice]) -> tuple[tuple[int, str], ...]:
    """(index, UUID or serial) of each GPU that has one (its place in the list where no index is recorded)."""
    return tuple((g.index if g.index is not None else i, g.identity) for i, g in enumerate(gpus) if g.identity)


def launch_machine(hardware: Hardware | None, slot_name: str | None = None, local_gpus=None,
                   host_gpus=None) -> MachineRecord:
    """The machine one launch runs on, for its launch record: {host, gpus, gpu_ids}. `hardware` is the slot's (or
    a Slurm job's) host and GPUs: "localhost" is this machine (its host name, GPUs from nvidia-smi); another host
    a provisioned one (GPUs from its fingerprint, under the address or the slot's inventory name); a Slurm node's GPUs are not known here (gpus None). gpus: the
    UUIDs (serials where a driver gives none) of the GPUs the launch used, by the slot's indices ("all": every
    one). local_gpus / host_gpus: the (index, id) readers (tests give their own)."""
    host, ids = (hardware.host, hardware.gpus) if hardware is not None else (None, None)
    local = host in (None, "localhost")
    read = host_gpus or _host_gpus
    found = (local_gpus or _local_gpus)() if local else read(str(host)) or (read(slot_name) if slot_name else ())
    if ids in (None, "all"):
        gpus = [u for _, u in found]
    else:
        want = {int(x) for x in str(ids).split(",") if x.strip().isdigit()}
        gpus = [u for i, u in found if i in want]
    return MachineRecord(host=platform.node() if local else host, gpus=gpus or None,
                         gpu_ids=ids if isinstance(ids, str) else None)
