"""The static flag reader agrees with SGLang's own argparse on the real 0.5.23 source + shipped patches.

SGLang's parser needs triton & co. to import; `toolkit build parser-deps` puts them in the user cache
(about 1 GB, once). This is what lets preflight fall back to the static reader with confidence.
"""

from __future__ import annotations

import shutil

import pytest
from buildutil import ROOT, toolkit

from toolkit.image.flags import FlagTable, exact_table, parser_deps_dir
from toolkit.image.flags_static import static_flags
from toolkit.image.source import apply_patch, fetch_sglang, scratch_tree
from toolkit.patches import read_patch
from toolkit.specs import load_spec, referenced_files

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def patched_tree():
    if not (parser_deps_dir() / "triton").exists():
        r = toolkit("build", "parser-deps", timeout=1800)
        assert r.returncode == 0, r.stderr[-2000:]
    spec = load_spec(ROOT / "envs" / "sglang-cu13-blackwell.yaml")
    pristine = fetch_sglang(spec.model.sglang, "3.11", log=lambda m: None)
    patches = [p for k, p in sorted(referenced_files(spec).items()) if k.startswith("sglang.patches")]
    infos = [(p, read_patch(p)) for p in patches]
    root = scratch_tree(pristine, {f for _, i in infos for f in i.files})
    for p, info in infos:
        assert apply_patch(root, p, info, "0.5.23") == []
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_static_reader_matches_sglang_argparse(patched_tree):
    exact = exact_table(patched_tree, {"p": ["--speculative-disable-batch-threshold", "32", "--tp-size", "8"]})
    assert isinstance(exact, FlagTable), exact
    static = FlagTable(static_flags(patched_tree / "sglang"), "static")
    assert exact.exact_parses == {"p": None}
    assert len(exact.by_name) > 500
    assert set(static.by_name) == set(exact.by_name)
    checked_choices = 0
    for name, e in exact.by_name.items():
        s = static.by_name[name]
        assert (s["takes_value"], s["nargs"], s["deprecated"]) == (e["takes_value"], e["nargs"], e["deprecated"]), name
        if s["type"] != "custom":
            assert s["type"] == e["type"], name
        if s["choices"] is not None:
            assert s["choices"] == e["choices"], name
            checked_choices += 1
    assert checked_choices > 30
    assert exact.by_name["speculative-disable-batch-threshold"]["type"] == "int"


def test_exact_parser_rejects_what_argparse_rejects(patched_tree):
    exact = exact_table(patched_tree, {"bad": ["--cuda-graph-max-bs", "64"], "ok": ["--cuda-graph-max-bs-decode", "64"]})
    assert isinstance(exact, FlagTable), exact
    assert "unrecognized arguments: --cuda-graph-max-bs" in exact.exact_parses["bad"]
    assert exact.exact_parses["ok"] is None


def test_unknown_flag_in_exact_mode_fails_with_suggestion(patched_tree, tmp_path):
    from buildutil import EAGLE, THRESHOLD_PATCH, line_of, write_env

    servers = {"e": {**EAGLE, "speculative-num-step": 3}}
    spec = write_env(tmp_path, {"t.patch": THRESHOLD_PATCH.read_text()}, servers=servers)
    r = toolkit("build", "env", str(spec), "--check", "--flags", "exact",
                env={"DOCKER_HOST": "unix:///nonexistent/toolkit-test-docker.sock"})
    assert r.returncode == 2, r.stderr
    assert f"{spec}:{line_of(spec, 'speculative-num-step:')}:" in r.stderr
    assert "did you mean 'speculative-num-steps'" in r.stderr


CONTROLLER_SCRIPT = r"""
import sglang.srt.speculative.adaptive_runtime_state as m
m._disable_batch_threshold = lambda: 8          # what get_spec() holds with the flag at 8

class Worker:                                   # the AdaptiveSpecWorker protocol, states are step counts
    speculative_num_steps = 3
    def apply_runtime_state(self, state):
        self.speculative_num_steps = state

class Policy:                                   # the EMA policy must not decide in threshold mode
    candidate_steps = [0, 3]
    def get_steps_for_batch(self, batch_size):
        raise AssertionError("policy consulted")
    def on_verify_complete(self, *args):
        raise AssertionError("policy consulted")

c = m.AdaptiveController(Worker(), Policy())
c.register(0, steps=0)
c.register(3, steps=3)
seen = []
for bs in [1, 7, 8, 64, 9, 7, 1]:
    c.activate_step_by_batch(bs)
    c.on_verify_complete([1, 2], bs)
    seen.append(c.worker.speculative_num_steps)
print("STEPS", seen)
"""


def test_threshold_patch_switches_to_plain_decoding_at_n(patched_tree):
    """The patched per-batch check, run on the patched 0.5.23 source (CPU; no GPU kernels involved)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(patched_tree), str(parser_deps_dir())]))
    r = subprocess.run([sys.executable, "-c", CONTROLLER_SCRIPT], capture_output=True, text=True, env=env,
                       cwd=patched_tree, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "STEPS [3, 3, 0, 0, 0, 3, 3]" in r.stdout
