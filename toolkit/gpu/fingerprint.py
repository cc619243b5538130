"""The GPU part of a host fingerprint (what toolkit.bench.hostinfo merges in): see smi.gpu_fingerprint.

    from toolkit.gpu.fingerprint import gpu_fingerprint
    gpu_fingerprint()   # GpuFingerprint(driver_version, cuda_version, count, gpus=[...], topology) or None
"""

from toolkit.gpu.smi import gpu_fingerprint, parse_nvidia_smi_xml, parse_topo_matrix

__all__ = ["gpu_fingerprint", "parse_nvidia_smi_xml", "parse_topo_matrix"]
