"""The one wrapper around `nvidia-smi`, and pure parsers of what it prints.

    gpu_fingerprint()            # GpuFingerprint for the host fingerprint, or None on a machine with no NVIDIA GPU
    parse_nvidia_smi_xml(text)   # `nvidia-smi -q -x` -> GpuFingerprint (pure; tested on output captured on an H200)
    parse_topo_matrix(text)      # `nvidia-smi topo -m` -> GpuTopology (pure)

Numbers keep nvidia-smi's units in the key name (`memory_total_mib`, `power_limit_w`,
`sm_clock_max_mhz`); a value nvidia-smi reports as N/A (or does not report) is None.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from typing import Any

from toolkit.errors import ToolFailure
from toolkit.schema.manifest import GpuDevice, GpuFingerprint, GpuTopology

_NUMBER = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%/]*)\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MISSING = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "requested functionality has been deprecated"}


def nvidia_smi(*args: str, timeout: float = 60) -> str:
    """Run nvidia-smi with args; its stdout. ToolFailure when it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise ToolFailure("nvidia-smi is not on PATH", hint="install the NVIDIA driver, or run where a GPU is")
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolFailure(f"nvidia-smi {' '.join(args)} did not answer within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise ToolFailure(f"nvidia-smi {' '.join(args)} failed (exit {proc.returncode}): "
                          f"{(proc.stderr or proc.stdout).strip()[:400]}")
    return proc.stdout


def _text(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value.lower() in _MISSING else value


def _num(node: ET.Element | None, *paths: str) -> float | None:
    """First of paths that holds a number ('143771 MiB', '700.00 W', '1980 MHz'); None if none does."""
    for path in paths:
        value = _text(node, path)
        if value is None:
            continue
        m = _NUMBER.match(value)
        if m:
            return float(m.group(1))
    return None


def _int(node: ET.Element | None, *paths: str) -> int | None:
    v = _num(node, *paths)
    return None if v is None else int(v)


def _ecc_sum(volatile: ET.Element | None, kind: str) -> int | None:
    """Sum of the volatile ECC counters of one kind: sram_*/dram_* (Hopper on) or *_bit/total (older)."""
    if volatile is None:
        return None
    older = "double_bit/total" if kind == "uncorrectable" else "single_bit/total"
    if volatile.find(older) is not None:
        return _int(volatile, older)
    vals = [_int(volatile, c.tag) for c in volatile if c.tag.split("_", 1)[-1].startswith(kind)]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


def _gpu(g: ET.Element, index: int) -> GpuDevice:
    power = g.find("gpu_power_readings")
    if power is None:
        power = g.find("power_readings")  # drivers before 535
    ecc_errors = g.find("ecc_errors/volatile")
    return GpuDevice(
        index=index,  # order in the log = nvidia-smi's index
        minor_number=_int(g, "minor_number"),
        name=_text(g, "product_name"),
        brand=_text(g, "product_brand"),
        architecture=_text(g, "product_architecture"),
        uuid=_text(g, "uuid"),
        serial=_text(g, "serial"),
        pci_bus_id=g.get("id") or _text(g, "pci/pci_bus_id"),
        vbios=_text(g, "vbios_version"),
        memory_total_mib=_int(g, "fb_memory_usage/total"),
        memory_used_mib=_int(g, "fb_memory_usage/used"),
        memory_reserved_mib=_int(g, "fb_memory_usage/reserved"),
        power_limit_w=_num(power, "current_power_limit", "power_limit", "enforced_power_limit"),
        power_limit_default_w=_num(power, "default_power_limit"),
        power_limit_max_w=_num(power, "max_power_limit"),
        power_draw_w=_num(power, "instant_power_draw", "power_draw", "average_power_draw"),
        sm_clock_mhz=_int(g, "clocks/sm_clock"),
        mem_clock_mhz=_int(g, "clocks/mem_clock"),
        sm_clock_max_mhz=_int(g, "max_clocks/sm_clock"),
        mem_clock_max_mhz=_int(g, "max_clocks/mem_clock"),
        sm_clock_app_mhz=_int(g, "applications_clocks/graphics_clock"),
        ecc_mode=_text(g, "ecc_mode/current_ecc"),
        ecc_errors_uncorrected_volatile=_ecc_sum(ecc_errors, "uncorrectable"),
        ecc_errors_corrected_volatile=_ecc_sum(ecc_errors, "correctable"),
        persistence_mode=_text(g, "persistence_mode"),
        mig_mode=_text(g, "mig_mode/current_mig"),
        compute_mode=_text(g, "compute_mode"),
        performance_state=_text(g, "performance_state"),
        temperature_c=_int(g, "temperature/gpu_temp"),
        pcie_link_gen_max=_int(g, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
        pcie_link_width_max=_text(g, "pci/pci_gpu_link_info/link_widths/max_link_width"),
    )


def parse_nvidia_smi_xml(text: str) -> GpuFingerprint:
    """Parse `nvidia-smi -q -x` into its driver and CUDA versions, count and GpuDevices. Pure."""
    # nvidia-smi writes a DOCTYPE naming a DTD file that is not there; ElementTree ignores DOCTYPEs.
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ToolFailure(f"nvidia-smi -q -x printed malformed XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ToolFailure(f"not nvidia-smi -q -x output: root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = [_gpu(g, i) for i, g in enumerate(root.findall("gpu"))]
    attached = _int(root, "attached_gpus")
    return GpuFingerprint(timestamp=_text(root, "timestamp"), driver_version=_text(root, "driver_version"),
                          cuda_version=_text(root, "cuda_version"),
                          count=attached if attached is not None else len(gpus), gpus=gpus)


def parse_topo_matrix(text: str) -> GpuTopology:
    """Parse `nvidia-smi topo -m`: {gpus: [GPU0, ...], links: {"GPU0-GPU1": "NV18", ...}, affinity: {...}}.

    links holds each pair of GPUs once (X on the diagonal is left out); the legend's words are kept
    as printed (NV#, PIX, PXB, PHB, NODE, SYS). Pure."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return GpuTopology(gpus=[], links={}, affinity={})
    lines = [_ANSI.sub("", ln) for ln in lines]
    header = [h.strip() for h in re.split(r"\t+", lines[0].strip()) if h.strip()]
    gpu_cols = [h for h in header if re.fullmatch(r"GPU[0-9]+", h)]
    links: dict[str, str] = {}
    affinity: dict[str, dict[str, str]] = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in re.split(r"\t+", ln) if c.strip()]
        if not cells or not re.fullmatch(r"GPU[0-9]+", cells[0]):
            continue
        row = cells[0]
        values = cells[1:]
        for col, value in zip(header, values):
            if col in gpu_cols and col != row:
                a, b = sorted((row, col), key=lambda s: int(s[3:]))
                links[f"{a}-{b}"] = value
            elif col not in gpu_cols and not col.startswith(("NIC", "mlx")):
                affinity.setdefault(row, {})[col] = value
    return GpuTopology(gpus=gpu_cols, links=links, affinity=affinity)


def gpu_fingerprint() -> GpuFingerprint | None:
    """What the archive's host fingerprint carries about GPUs; None where nvidia-smi is absent.

    A present nvidia-smi that fails is reported inside the fingerprint (`error`), not raised: a
    fingerprint is a record of what the machine said."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        fp = parse_nvidia_smi_xml(nvidia_smi("-q", "-x"))
    except ToolFailure as exc:
        return GpuFingerprint(error=exc.message, gpus=[], count=0)
    try:
        topo_text = nvidia_smi("topo", "-m")
        topology = parse_topo_matrix(topo_text)
        topology.text = topo_text
    except ToolFailure as exc:
        topology = GpuTopology(error=exc.message)
    fp.topology, fp.source = topology, "nvidia-smi -q -x; nvidia-smi topo -m"
    return fp
