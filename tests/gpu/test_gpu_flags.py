"""SM gating of FlashInfer allreduce fusion / torch symmetric memory, and the SM120 patch that lifts it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from toolkit.gpu import flags
from toolkit.specs import load_spec

ROOT = Path(__file__).resolve().parent.parent.parent
BLACKWELL = ROOT / "envs" / "sglang-cu13-blackwell.yaml"

LIFT = """--- a/python/sglang/srt/server_args.py
+++ b/python/sglang/srt/server_args.py
@@ -1,3 +1,3 @@
-        if not (is_sm90_supported() or is_sm100_supported()):
+        if not (is_sm90_supported() or is_sm100_supported() or is_sm120_supported()):
             raise ValueError("torch symm mem needs SM90/SM100")
"""
UNRELATED = """--- a/python/sglang/srt/utils.py
+++ b/python/sglang/srt/utils.py
@@ -1,2 +1,2 @@
-    timeout = 30
+    timeout = 60
"""


def _env(tmp_path: Path, patch_name: str | None, patch_text: str = LIFT, servers: str | None = None) -> Path:
    patches = "[]"
    if patch_name:
        (tmp_path / patch_name).write_text(patch_text)
        digest = hashlib.sha256(patch_text.encode()).hexdigest()
        patches = f"\n    - path: {patch_name}\n      sha256: {digest}"
    servers = servers or ("  tp8:\n    tp-size: 8\n    enable-torch-symm-mem: true\n"
                          "    flashinfer-allreduce-fusion-backend: trtllm\n"
                          "  plain:\n    tp-size: 8\n    enable-torch-symm-mem: false\n")
    spec = tmp_path / "env.yaml"
    spec.write_text(f"kind: Environment\nname: t\nbase_image: nvidia/cuda:13.0.1-devel-ubuntu24.04\ncuda: '13.0'\n"
                    f"sglang:\n  version: 0.5.23\n  patches: {patches}\nservers:\n{servers}")
    return spec


def test_blackwell_spec_gated_switches_and_its_sm120_patch():
    loaded = load_spec(BLACKWELL)
    uses = {u.flag: u for u in flags.gated_uses(loaded.model)}
    assert "enable-torch-symm-mem" in uses and "SGLANG_ENABLE_TORCH_SYMM_MEM" in uses
    assert {"enable-flashinfer-allreduce-fusion", "flashinfer-allreduce-fusion-backend"} & set(uses)
    assert "baseline" in uses["enable-torch-symm-mem"].presets
    patch = flags.sm120_patch(loaded)
    assert patch is not None and patch.exists() and "sm120" in patch.name
    for use in uses.values():
        assert flags.flag_support(use, (12, 0), patch)[0] == "pass"
        assert flags.flag_support(use, (9, 0), None)[0] == "pass"
        assert flags.flag_support(use, (12, 0), None)[0] == "fail"


def test_sm100_only_backend_stays_gated_on_sm120(tmp_path):
    use = flags.GatedUse("flashinfer-allreduce-fusion-backend", "FlashInfer allreduce fusion", ("p",), ("mnnvl",))
    status, why = flags.flag_support(use, (12, 0), tmp_path / "sm120.patch")
    assert status == "fail" and "mnnvl" in why
    assert flags.flag_support(use, (10, 0), None)[0] == "pass"


def test_false_values_do_not_count(tmp_path):
    uses = flags.gated_uses(load_spec(_env(tmp_path, None)).model)
    assert {u.flag: (u.presets, u.values) for u in uses} == {
        "enable-torch-symm-mem": (("tp8",), ("True",)),
        "flashinfer-allreduce-fusion-backend": (("tp8",), ("trtllm",))}


@pytest.mark.parametrize("cap, status", [((9, 0), "pass"), ((10, 0), "pass"), ((10, 3), "pass"),
                                         ((12, 0), "fail"), ((8, 9), "fail"), ((9, 1), "fail")])
def test_upstream_gate(cap, status):
    use = flags.GatedUse("enable-torch-symm-mem", "torch symmetric memory", ("tp8",))
    got, why = flags.flag_support(use, cap, patch=None)
    assert got == status
    assert flags.sm_name(cap) in why
    if cap == (12, 0):
        assert "SM120 patch" in why


def test_sm120_patch_found_by_its_added_lines(tmp_path):
    loaded = load_spec(_env(tmp_path, "gate.patch"))
    patch = flags.sm120_patch(loaded)
    assert patch == tmp_path / "gate.patch"
    use = flags.GatedUse("enable-torch-symm-mem", "torch symmetric memory", ("tp8",))
    status, why = flags.flag_support(use, (12, 0), patch)
    assert status == "pass" and "gate.patch" in why
    # the patch does not make SM89 (Ada) work
    assert flags.flag_support(use, (8, 9), patch)[0] == "fail"


def test_sm120_patch_found_by_name(tmp_path):
    loaded = load_spec(_env(tmp_path, "sglang-sm120-allreduce.patch", UNRELATED))
    assert flags.sm120_patch(loaded).name == "sglang-sm120-allreduce.patch"


def test_unrelated_patch_does_not_lift_the_gate(tmp_path):
    assert flags.sm120_patch(load_spec(_env(tmp_path, "timeout.patch", UNRELATED))) is None
    # a removed line mentioning sm120 is not a lift either
    removed = UNRELATED.replace("-    timeout = 30", "-    if is_sm120_supported(): timeout = 30")
    assert flags.sm120_patch(load_spec(_env(tmp_path, "other.patch", removed))) is None
