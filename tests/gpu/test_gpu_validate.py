"""`toolkit gpu validate` on a machine with no GPU (CI): GPU checks skipped with the reason and exit 0,
failed under --require-gpu; and the --gpus N path with the gloo backend over real spawned processes
(the same code the H200 ran with NCCL)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolkit.gpu import probes, validate as gv

ROOT = Path(__file__).resolve().parent.parent.parent
BLACKWELL = str(ROOT / "envs" / "sglang-cu13-blackwell.yaml")
REPORTS = sorted((ROOT / "results" / "gpu-validation").glob("h200-1gpu-*/validate.json"))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture
def no_gpu():
    if _cuda():
        pytest.skip("this test is about a machine with no GPU")


def _checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


@pytest.mark.slow
def test_no_gpu_skips_with_reason_and_exits_0(cli, no_gpu, tmp_path):
    proc = cli("gpu", "validate", "--json", "--spec", BLACKWELL, env={"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    checks = _checks(report)
    assert checks["torch"]["status"] == "pass"
    assert checks["cuda_available"]["status"] == "skip"
    assert "torch.cuda.is_available() is False" in checks["cuda_available"]["detail"]
    gpu_checks = [n for n in checks if n != "torch"]
    assert len(gpu_checks) >= 8 and all(checks[n]["status"] == "skip" and checks[n]["detail"] for n in gpu_checks)
    assert report["ok"] is True and report["summary"]["fail"] == 0
    assert report["spec"]["name"] == "sglang-cu13-blackwell"
    assert report["env"] == probes.NO_MULTICAST


@pytest.mark.slow
def test_require_gpu_fails(cli, no_gpu):
    proc = cli("gpu", "validate", "--require-gpu")
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout and "cuda_available" in proc.stdout and "(exit 1)" in proc.stdout
    proc = cli("gpu", "validate", "--require-gpu", "--gpus", "2", "--json")
    checks = _checks(json.loads(proc.stdout))
    assert proc.returncode == 1
    assert checks["allreduce_sum"]["status"] == "fail" and "0 visible" in checks["allreduce_sum"]["detail"]


@pytest.mark.slow
def test_gloo_two_processes_through_the_cli(cli, tmp_path):
    out = tmp_path / "report.json"
    proc = cli("gpu", "validate", "--gpus", "2", "--backend", "gloo", "--json", "-o", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == report
    checks = _checks(report)
    s = checks["allreduce_sum"]
    assert s["status"] == "pass" and len(s["data"]["ranks"]) == 2
    assert all(r["expected"] == 3 and r["got_min"] == r["got_max"] == 3 for r in s["data"]["ranks"])
    table = checks["allreduce_busbw"]["data"]["table"]
    assert [r["bytes"] for r in table] == probes.CPU_SIZES
    for r in table:  # n = 2: busbw = algbw * 2 (n - 1) / n = algbw; algbw = bytes / time
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"], abs=1e-3)
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6) / 1e9, rel=0.01, abs=1e-3)
    assert checks["symm_mem"]["status"] == "skip" and "CUDA" in checks["symm_mem"]["detail"]


@pytest.mark.slow
def test_gloo_three_processes_sum_and_bus_factor():
    results = probes.run_probes(3, "gloo", sizes=[1 << 20], iters=3, warmup=1)
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert all(r["sum"]["ok"] and r["sum"]["expected"] == 6 for r in results)
    row = gv._bw_table(results)[0]
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 4 / 3, abs=2e-3)
    assert row["time_us"] == max(r["bandwidth"][0]["time_us"] for r in results)  # the slowest rank


@pytest.mark.slow
def test_rank_failures_are_reported_not_hung(no_gpu):
    results = probes.run_probes(2, "nccl", timeout_s=120)
    assert len(results) == 2
    assert all("error" in r for r in results)


def test_bad_arguments(cli):
    assert cli("gpu", "validate", "--gpus", "0").returncode == 2
    proc = cli("gpu", "validate", "--spec", "envs/missing.yaml")
    assert proc.returncode == 2 and "missing.yaml" in proc.stderr
    proc = cli("gpu", "validate", "--backend", "mpi")
    assert proc.returncode == 2 and "nccl or gloo" in proc.stderr


def test_pure_helpers():
    assert gv.compare_cuda("13.0", "13.0")[0] == "pass"
    assert gv.compare_cuda("13.1", "13.0")[0] == "pass"  # same major
    status, detail = gv.compare_cuda("12.8", "13.0")
    assert status == "fail" and "12.8" in detail and "13.0" in detail
    assert gv._has_kernels((9, 0), ["sm_80", "sm_90"])
    assert gv._has_kernels((12, 0), ["sm_90", "compute_90"])  # PTX the driver can JIT
    assert not gv._has_kernels((12, 0), ["sm_80", "sm_90"])
    assert gv._has_kernels((10, 0), ["sm_100a"])
    from toolkit.specs import load_spec

    assert gv._mem_fraction(load_spec(BLACKWELL).model) == 0.85
    assert probes.bus_factor(1) == 0 and probes.bus_factor(8) == 1.75


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.parent.name)
def test_committed_h200_reports(path):
    """The reports committed from the H200 runs: what issue 9 asks to see there."""
    report = json.loads(path.read_text())
    checks = _checks(report)
    assert report["ok"] and report["summary"]["fail"] == 0 and report["summary"]["skip"] == 0
    assert "SM90" in checks["compute_capability"]["detail"]
    assert checks["spec_flags"]["status"] == "pass" and "supported upstream on SM90" in checks["spec_flags"]["detail"]
    assert checks["symm_mem"]["status"] == "pass" and checks["symm_mem"]["data"]["ranks"][0]["multicast_ptr"] == 0
    gpu = report["gpu_fingerprint"]["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and report["gpu_fingerprint"]["driver_version"] == "580.159.04"
    assert report["env"]["NCCL_NVLS_ENABLE"] == "0"


def test_two_h200_reports_committed():
    assert len(REPORTS) >= 2
    latest = json.loads(REPORTS[-1].read_text())
    assert _checks(latest)["spec_flags"]["data"]["sm120_patch"].endswith("sm120-allreduce-symm-mem.patch")


def test_the_old_name_still_works_and_points_to_the_new_one(cli):
    """`toolkit env validate` is a hidden alias: same report, one line on stderr naming `gpu validate`."""
    old, new = cli("env", "validate", "--json"), cli("gpu", "validate", "--json")
    assert old.returncode == new.returncode == 0, old.stderr
    names = [[c["name"] for c in json.loads(p.stdout)["checks"]] for p in (old, new)]
    assert names[0] == names[1]
    assert old.stderr.strip().splitlines() == ["warning: `toolkit env validate` is now `toolkit gpu validate`"]
    top = cli("--help").stdout
    assert "gpu" in top and " env " not in top
    assert "--require-gpu" in cli("env", "validate", "--help").stdout
