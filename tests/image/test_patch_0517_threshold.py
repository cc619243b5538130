"""The 0.5.17 port of --speculative-disable-batch-threshold, on the real pristine 0.5.17 wheel source.

The patch is applied with the toolkit's own helpers (fetch_sglang, scratch_tree, apply_patch: GNU patch,
as the Dockerfile runs it) and must apply with no fuzz and no offset. The decision logic it adds
(speculative/batch_threshold.py), the validation hook and the patched AdaptiveController then run on
CPU in a subprocess: SGLang 0.5.17 does not import without torch & co., so the script loads the patched
modules under stub parent packages (the modules touched here import only logging/json/bisect and
`sglang.srt.utils.log_info_on_rank0`, which the stub provides).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from buildutil import ROOT

from toolkit.image.flags_static import static_flags
from toolkit.image.source import apply_patch, compile_touched, fetch_sglang, scratch_tree
from toolkit.patches import read_patch
from toolkit.specs import load_spec, referenced_files

SPEC = ROOT / "envs" / "sglang-0.5.17-h200.yaml"
PATCH = ROOT / "envs" / "patches" / "sglang-0.5.17-spec-disable-batch-threshold.patch"


@pytest.fixture(scope="module")
def patched_tree():
    spec = load_spec(SPEC)
    assert spec.model.sglang.version == "0.5.17"
    pristine = fetch_sglang(spec.model.sglang, spec.model.python, log=lambda m: None)
    patches = [p for k, p in sorted(referenced_files(spec).items()) if k.startswith("sglang.patches")]
    assert [p.name for p in patches] == [PATCH.name]
    info = read_patch(PATCH)
    assert info.layout == "git" and info.strip == 2
    root = scratch_tree(pristine, set(info.files))
    assert apply_patch(root, PATCH, info, "0.5.17") == []  # no fuzz, no offset
    compile_touched(root, {f: (PATCH, info) for f in info.files})
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_patch_touches_what_its_header_says(patched_tree):
    assert set(read_patch(PATCH).files) == {
        "sglang/srt/server_args.py",
        "sglang/srt/arg_groups/speculative_hook.py",
        "sglang/srt/speculative/adaptive_runtime_state.py",
        "sglang/srt/speculative/batch_threshold.py",
        "sglang/srt/managers/scheduler.py",
    }
    sched = (patched_tree / "sglang/srt/managers/scheduler.py").read_text()
    assert 'ret["toolkit_threshold"] = adaptive.batch_threshold.stats()' in sched


def test_flag_is_an_int_option_of_0517(patched_tree):
    flags = {n[2:]: f for f in static_flags(patched_tree / "sglang") for n in f["names"] if n.startswith("--")}
    assert flags["speculative-disable-batch-threshold"]["type"] == "int"
    assert flags["speculative-disable-batch-threshold"]["takes_value"]
    # the preset's other flags exist in 0.5.17 (cuda-graph-max-bs: see the deprecated alias)
    for name in ("load-format", "attention-backend", "mem-fraction-static", "speculative-algorithm",
                 "speculative-draft-model-path", "speculative-num-steps", "speculative-eagle-topk",
                 "speculative-num-draft-tokens", "max-running-requests", "enable-metrics",
                 "served-model-name", "cuda-graph-max-bs"):
        assert name in flags, name


SCRIPT = r"""
import json, logging, sys, types, tempfile, os
from types import SimpleNamespace as NS

root = sys.argv[1]
logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s", stream=sys.stdout)

def pkg(name, path=None):
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [os.path.join(root, path)]
    sys.modules[name] = m
    return m

pkg("sglang", "sglang"); pkg("sglang.srt", "sglang/srt")
pkg("sglang.srt.speculative", "sglang/srt/speculative"); pkg("sglang.srt.arg_groups", "sglang/srt/arg_groups")
utils = pkg("sglang.srt.utils")
utils.log_info_on_rank0 = lambda logger, msg: logger.info(msg)
overrides = pkg("sglang.srt.arg_groups.overrides")
overrides.resolved_view = lambda sa: sa

from sglang.srt.speculative.batch_threshold import BatchThresholdSwitch
from sglang.srt.arg_groups.speculative_hook import _handle_disable_batch_threshold
import sglang.srt.speculative.adaptive_runtime_state as ars

out = {}

# 1. the pure decision
sw = BatchThresholdSwitch(8, 3)
out["switch_steps"] = [sw.steps_for_batch(bs) for bs in [1, 7, 8, 64, 9, 0, 7, 1, 8]]
out["switch_stats"] = sw.stats()
errs = []
for args in [(0, 3), (8, 0)]:
    try:
        BatchThresholdSwitch(*args)
    except ValueError as e:
        errs.append(str(e))
out["switch_errors"] = errs

# 2. the validation hook
def args(**kw):
    base = dict(speculative_disable_batch_threshold=8, speculative_algorithm="EAGLE3", speculative_num_steps=3,
                speculative_eagle_topk=1, speculative_adaptive=False, speculative_adaptive_config=None,
                enable_dp_attention=False, enable_multi_layer_eagle=False, enable_two_batch_overlap=False,
                enable_pdmux=False)
    base.update(kw)
    return NS(**base)

ok = args()
_handle_disable_batch_threshold(ok)
out["hook_ok"] = [ok.speculative_adaptive, json.load(open(ok.speculative_adaptive_config))]
hook_errors = {}
for name, kw in {"zero": dict(speculative_disable_batch_threshold=0),
                 "ngram": dict(speculative_algorithm="NGRAM"),
                 "adaptive": dict(speculative_adaptive=True),
                 "no_steps": dict(speculative_num_steps=None),
                 "topk": dict(speculative_eagle_topk=4),
                 "dp": dict(enable_dp_attention=True)}.items():
    try:
        _handle_disable_batch_threshold(args(**kw))
        hook_errors[name] = None
    except ValueError as e:
        hook_errors[name] = str(e)
out["hook_errors"] = hook_errors

# 3. the patched AdaptiveController, with the adaptive config the hook wrote
class Worker:
    server_args = ok
    speculative_num_steps = 3
    def build_adaptive_runtime_state(self, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        return NS(speculative_num_steps=speculative_num_steps, speculative_num_draft_tokens=speculative_num_draft_tokens)
    def apply_runtime_state(self, state):
        self.speculative_num_steps = state.speculative_num_steps

w = Worker()
c = ars.AdaptiveController(w, config_path=ok.speculative_adaptive_config)
c.register(NS(speculative_num_steps=3, speculative_num_draft_tokens=4))
c.init_states(cuda_graph_bs=[1, 2, 4, 8, 16, 32, 64])
seen = []
for bs in [1, 7, 8, 64, 9, 7, 1]:
    c.activate_step_by_batch(bs)
    for _ in range(20):  # acceptance feedback must not move the steps in threshold mode
        c.on_verify_complete([0, 0], bs)
    seen.append(w.speculative_num_steps)
out["controller_steps"] = seen
out["controller_stats"] = c.batch_threshold.stats()

class Plain(Worker):  # no threshold: upstream behaviour, no switch object
    server_args = NS()
out["no_threshold"] = ars.AdaptiveController(Plain(), config_path=None).batch_threshold is None
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def script_run(patched_tree):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(patched_tree)], capture_output=True, text=True,
                       env=env, cwd=patched_tree, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), r.stdout


def test_switch_decides_by_batch_size_and_counts(script_run):
    out, _ = script_run
    # batch >= 8: 0 draft steps (plain decoding); below: 3; an empty batch keeps the state
    assert out["switch_steps"] == [3, 3, 0, 0, 0, 0, 3, 3, 0]
    assert out["switch_stats"] == {"threshold": 8, "drafting": False, "steps_spec": 4, "steps_plain": 4,
                                   "switches": 3, "last_batch_size": 8}
    assert len(out["switch_errors"]) == 2


def test_switch_logs_one_line_per_switch(script_run):
    _, stdout = script_run
    lines = [ln for ln in stdout.splitlines() if "toolkit-threshold: batch" in ln]
    prefix = "LOG sglang.srt.speculative.batch_threshold "
    assert lines[:3] == [prefix + "toolkit-threshold: batch 8 >= 8: drafting off",
                         prefix + "toolkit-threshold: batch 7 < 8: drafting on",
                         prefix + "toolkit-threshold: batch 8 >= 8: drafting off"]
    assert "toolkit-threshold: enabled, threshold 8, draft steps 3" in stdout


def test_hook_validates_and_sets_up_two_adaptive_states(script_run):
    out, _ = script_run
    assert out["hook_ok"] == [True, {"1": {"candidate_steps": [0, 3]}}]
    errs = out["hook_errors"]
    assert "must be an integer >= 1, got 0" in errs["zero"]
    assert "EAGLE or EAGLE3, got 'NGRAM'" in errs["ngram"]
    assert "drop --speculative-adaptive" in errs["adaptive"]
    assert "explicit --speculative-num-steps" in errs["no_steps"]
    assert "topk" in errs["topk"]
    assert "dp_attention" in errs["dp"]


def test_controller_switches_to_plain_decoding_at_n(script_run):
    out, stdout = script_run
    assert out["controller_steps"] == [3, 3, 0, 0, 0, 3, 3]
    assert out["controller_stats"] == {"threshold": 8, "drafting": True, "steps_spec": 4, "steps_plain": 3,
                                       "switches": 2, "last_batch_size": 1}
    assert "Adaptive spec params updated" not in stdout  # the EMA policy never moved the steps
    assert out["no_threshold"] is True
