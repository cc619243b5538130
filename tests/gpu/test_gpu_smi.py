"""nvidia-smi parsers on REAL output captured on the lent H200 (benchmarks/h200_validate.sh, 2026-12-02),
and the fingerprint wrapper driven through a PATH-injected nvidia-smi that replays that output."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toolkit.errors import ToolFailure
from toolkit.gpu import smi

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu"
XML = (DATA / "h200-nvidia-smi-q.xml").read_text()
TOPO = (DATA / "h200-topo-m.txt").read_text()


def test_h200_xml_fields():
    fp = smi.parse_nvidia_smi_xml(XML)
    assert fp.driver_version == "580.159.04"
    assert fp.cuda_version == "13.0"
    assert fp.count == 1 and len(fp.gpus) == 1
    g = fp.gpus[0]
    assert g.name == "NVIDIA H200"
    assert g.architecture == "Hopper"
    assert g.uuid == "GPU-8bb3f560-524d-977f-fea3-528d57df7555"
    assert g.pci_bus_id == "00000000:00:06.0"
    assert g.memory_total_mib == 143771
    assert g.power_limit_w == 700.0 and g.power_limit_max_w == 700.0
    assert g.power_draw_w == pytest.approx(77.97)  # instant_power_draw, not the average (77.74)
    assert (g.sm_clock_mhz, g.sm_clock_max_mhz, g.mem_clock_max_mhz) == (345, 1980, 3201)
    assert g.ecc_mode == "Enabled"
    assert g.ecc_errors_uncorrected_volatile == 0 and g.ecc_errors_corrected_volatile == 0
    assert g.mig_mode == "Disabled" and g.persistence_mode == "Enabled"


def test_na_values_are_none_not_zero():
    # a figure reported as N/A falls through to the next source, or is None, never 0
    text = XML.replace("<instant_power_draw>77.97 W</instant_power_draw>", "<instant_power_draw>N/A</instant_power_draw>", 1)
    assert smi.parse_nvidia_smi_xml(text).gpus[0].power_draw_w == pytest.approx(77.74)  # average_power_draw
    text = XML.replace("<current_ecc>Enabled", "<current_ecc>N/A").replace("<minor_number>0<", "<minor_number>N/A<")
    g = smi.parse_nvidia_smi_xml(text).gpus[0]
    assert g.ecc_mode is None and g.minor_number is None


def test_two_gpu_log_built_from_the_real_one():
    start, end = XML.index("<gpu id="), XML.index("</gpu>") + len("</gpu>")
    second = XML[start:end].replace("GPU-8bb3f560", "GPU-00000000").replace("00000000:00:06.0", "00000000:00:07.0")
    text = XML[:end] + "\n" + second + XML[end:]
    fp = smi.parse_nvidia_smi_xml(text.replace("<attached_gpus>1<", "<attached_gpus>2<"))
    assert fp.count == 2
    assert [g.index for g in fp.gpus] == [0, 1]
    assert fp.gpus[1].uuid.startswith("GPU-00000000") and fp.gpus[1].pci_bus_id == "00000000:00:07.0"


@pytest.mark.parametrize("text, msg", [
    ("<nvidia_smi_log><gpu>", "malformed XML"),
    ("<?xml version='1.0'?><other/>", "root element is <other>"),
])
def test_bad_xml_is_a_clear_error(text, msg):
    with pytest.raises(ToolFailure, match=msg):
        smi.parse_nvidia_smi_xml(text)


def test_topo_one_gpu_real():
    topo = smi.parse_topo_matrix(TOPO)
    assert topo.gpus == ["GPU0"]
    assert topo.links == {}
    assert topo.affinity["GPU0"] == {"CPU Affinity": "0-15", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}


def test_topo_two_gpus_in_the_same_layout():
    # Same escape codes and tabs as the H200 capture; a 2-GPU layout (no 2-GPU machine was lent).
    text = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \tNV18\tPIX\t0-31\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tSYS\t0-31\t0\t\tN/A\n"
            "NIC0\tPIX\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n")
    topo = smi.parse_topo_matrix(text)
    assert topo.gpus == ["GPU0", "GPU1"]
    assert topo.links == {"GPU0-GPU1": "NV18"}
    assert topo.affinity["GPU1"]["CPU Affinity"] == "0-31"
    assert smi.parse_topo_matrix("").model_dump(exclude_unset=True) == {"gpus": [], "links": {}, "affinity": {}}


def _fake_smi(tmp_path: Path, body: str) -> dict:
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}


def test_fingerprint_through_nvidia_smi(tmp_path, monkeypatch):
    env = _fake_smi(tmp_path, f'case "$1" in\n  -q) cat "{DATA}/h200-nvidia-smi-q.xml";;\n'
                              f'  topo) cat "{DATA}/h200-topo-m.txt";;\n  *) exit 3;;\nesac\n')
    monkeypatch.setenv("PATH", env["PATH"])
    fp = smi.gpu_fingerprint()
    assert fp.gpus[0].name == "NVIDIA H200"
    assert fp.topology.gpus == ["GPU0"] and "CPU Affinity" in fp.topology.text


def test_fingerprint_records_a_failing_driver(tmp_path, monkeypatch):
    env = _fake_smi(tmp_path, 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver"\n'
                              "exit 9\n")
    monkeypatch.setenv("PATH", env["PATH"])
    fp = smi.gpu_fingerprint()
    assert fp.count == 0 and "exit 9" in fp.error and "communicate" in fp.error


def test_fingerprint_none_without_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert smi.gpu_fingerprint() is None


def test_hostinfo_merges_the_gpu_fingerprint(tmp_path, monkeypatch):
    """The archive's host fingerprint (toolkit.bench.hostinfo) carries gpu_fingerprint()'s dict."""
    hostinfo = pytest.importorskip("toolkit.bench.hostinfo")
    env = _fake_smi(tmp_path, f'case "$1" in\n  -q) cat "{DATA}/h200-nvidia-smi-q.xml";;\n'
                              f'  topo) cat "{DATA}/h200-topo-m.txt";;\nesac\n')
    monkeypatch.setenv("PATH", env["PATH"])
    fp = hostinfo.local_fingerprint()
    assert fp.gpu.gpus[0].name == "NVIDIA H200" and fp.gpu.driver_version == "580.159.04"
