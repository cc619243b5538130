"""The environment a tune session writes into its own specs/ folder names the patches, CA bundle and model
by absolute paths, also when the spec was named by a relative path through `..` (as the H200 tune matrix
names it): the copy lives in another folder, where a relative path found nothing (a dry run of
benchmarks/sglang_h200/run_tune.sh failed on exactly this before any server started)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT
from toolkit.specs import load_spec
from toolkit.tune.specs import trial_environment


def test_patch_paths_are_absolute_and_exist(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    env_spec = load_spec(Path("benchmarks/sglang_h200/../../envs/sglang-0.5.17-h200.yaml"))
    data = trial_environment(env_spec, "eagle3", "baseline", "server",
                             {"t00": {"speculative-num-steps": 1, "speculative-num-draft-tokens": 2}})
    paths = [Path(p["path"]) for p in data["sglang"]["patches"]]
    assert paths and all(p.is_absolute() and p.is_file() for p in paths)
    assert paths[0] == (ROOT / "envs/patches/sglang-0.5.17-spec-disable-batch-threshold.patch").resolve()
    assert data["servers"]["t00"]["speculative-num-steps"] == 1
