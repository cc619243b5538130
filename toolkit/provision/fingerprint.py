"""Host fingerprints: what a provisioned host is (CPU, memory, kernel, OS, Docker, GPUs, driver, CUDA,
`nvidia-smi topo -m`), written as JSON on the controller by the `facts` role, in the same shape as
toolkit.bench.hostinfo.local_fingerprint (hostname, os, kernel, cpu, cpu_count, memory_bytes, gpu: {driver_version,
cuda_version, count, gpus, topology}) plus host, address, docker and CPU details.

Where: $TOOLKIT_HOSTS_DIR/<host>.json, default ~/.cache/toolkit/hosts/<host>.json (the latest
fingerprint of each host); every provisioning run also keeps a copy in its run folder (hosts/).

    fp = load_fingerprint("gpu-01")     # a Fingerprint (toolkit.schema.manifest), or None when the host was never
                                        # provisioned here; what the schema does not name (host, address, docker,
                                        # ...) is kept as its extra fields
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.schema.manifest import Fingerprint
from toolkit.settings import settings


def fingerprint_dir() -> Path:
    return settings().hosts_dir


def fingerprint_path(host_name: str) -> Path:
    return fingerprint_dir() / f"{host_name}.json"


def load_fingerprint(host_name: str) -> Fingerprint | None:
    """The latest fingerprint of `host_name` (an inventory name from a Hosts spec), or None.

    Adds `collected_at` (the file's modification time, UTC ISO 8601) and `path`."""
    path = fingerprint_path(host_name)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolkitError(f"host fingerprint {path} is not valid JSON ({exc.msg} at line {exc.lineno})",
                           hint=f"provision the host again: toolkit provision host HOSTS.yaml --limit {host_name}",
                           file=path, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise ToolkitError(f"host fingerprint {path} is not a JSON object", file=path,
                           hint=f"provision the host again: toolkit provision host HOSTS.yaml --limit {host_name}")
    gpu = data.get("gpu")
    if isinstance(gpu, dict) and gpu.get("topology_text"):
        from toolkit.gpu.smi import parse_topo_matrix

        topology = parse_topo_matrix(gpu["topology_text"])
        topology.text = gpu["topology_text"]
        gpu["topology"] = topology
    mtime = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
    return Fingerprint.model_validate({**data, "collected_at": mtime.isoformat(timespec="seconds"), "path": str(path)})
