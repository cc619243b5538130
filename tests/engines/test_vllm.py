"""`engine: vllm`: what its presets mean, its flags checked against vLLM 0.24.0's own parser when the spec loads
(a misspelt flag, a value of the wrong type, a malformed --speculative-config: exit 2 at the spec's file:line,
in vLLM's words where its source has them), its /metrics acceptance counters and its last error line.
No process is started here (tests/serve/test_serve_vllm.py starts the fake vLLM)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from toolkit import engines
from toolkit.engines import preset_meaning, vllm, vllm_flags
from toolkit.engines.base import AcceptanceCounts
from toolkit.errors import ToolkitError
from toolkit.schema.manifest import ArmState
from toolkit.serve.base import parse_metrics
from toolkit.specs import load_spec

ROOT = Path(__file__).resolve().parent.parent.parent
PAIR = ROOT / "envs" / "vllm-0.24.0-pair.yaml"
EAGLE3 = '{"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}'

ENV = """\
kind: Environment
name: v
engine: vllm
packages:
  - {name: vllm, version: 0.24.0}
servers:
  baseline:
    model: /models/target
    max-num-seqs: 32
  spec:
    model: /models/target
    %s: %s
"""


def env_with(tmp_path: Path, key: str, value: str, version: str = "0.24.0") -> Path:
    p = tmp_path / "env.yaml"
    p.write_text((ENV % (key, value)).replace("0.24.0", version))
    return p


def test_vllm_is_registered() -> None:
    eng = engines.get("vllm")
    assert eng.name == "vllm" and eng.acceptance == "metrics" and not eng.embedded and eng.builds_image
    assert eng.launchers == {"process", "docker", "container"} and eng.level == "server"
    assert eng.slurm_jobs and eng.tunes_server_flags and eng.flag_check == "load" and not eng.requires_image
    assert not eng.spans_nodes  # --nnodes and its kin are SGLang's: a vLLM job is one node
    assert "vllm" in engines.BUILTIN


def test_what_the_pair_presets_mean() -> None:
    env = load_spec(PAIR).model
    base, eagle, ngram = (preset_meaning(env, a) for a in ("baseline", "eagle3", "ngram"))
    assert not base.speculative and base.cap == 64 and not base.cap_implicit
    assert eagle.speculative and eagle.algorithm == "eagle3"
    assert eagle.reads == {"/tmp/toolkit-pair/target", "/tmp/toolkit-pair/draft"}
    assert ngram.algorithm == "ngram" and ngram.reads == {"/tmp/toolkit-pair/target"}  # no draft model
    assert vllm.pinned_version(env) == "0.24.0" and vllm.served_name(env.servers["eagle3"]) == "pair-target"
    # vLLM's own defaulting: a model "ngram" without a method is ngram, another model is draft_model
    assert vllm.method({"model": "ngram"}) == "ngram" and vllm.method({"model": "/d"}) == "draft_model"


def test_the_table_is_vllm_0_24_0s_own_parser() -> None:
    t = vllm_flags.load_table("0.24.0")
    assert t["version"] == "0.24.0" and t["mode"].startswith("exact") and "vllm-0.24.0" in t["source"]
    assert len(t["by_name"]) > 250
    assert t["by_name"]["speculative-config"]["names"] == ["--speculative-config", "-sc"]
    assert t["by_name"]["max-num-seqs"]["type"] == "int"
    assert "--no-enable-prefix-caching" in t["by_name"]["enable-prefix-caching"]["names"]
    assert {"eagle3", "ngram", "draft_model", "mtp"} <= set(t["speculative"]["methods"])
    assert {"num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max", "model"} <= set(t["speculative"]["fields"])
    assert "cannot be converted to" in t["argparse_errors"]["bad_json"]
    assert vllm_flags.load_table("9.9.9") is None


def test_the_committed_environment_validates() -> None:
    r = run_cli("validate", str(PAIR))
    assert r.returncode == 0, r.stderr
    # the flags pass; the one warning is its image's base, unpinned as every committed GPU Environment's is
    [warning] = load_spec(PAIR).warnings
    assert warning.startswith("base image nvidia/cuda:13.0.1-devel-ubuntu24.04 is not pinned by digest")


@pytest.mark.parametrize("key, value, line, said, hint", [
    ("max-num-seq", "64", 12, "unknown vLLM server flag --max-num-seq in vllm 0.24.0", "did you mean 'max-num-seqs'?"),
    ("max-num-seqs", "many", 12, "--max-num-seqs: argument --max-num-seqs: invalid int value: 'many'", None),
    ("dtype", "bf16", 12, "--dtype: invalid choice: 'bf16' (choose from auto, bfloat16", "did you mean 'bfloat16'?"),
    ("enforce-eager", "3", 12, "--enforce-eager is an on/off flag and takes no value, got 3", None),
    ("speculative-config", "'{\"method\": \"eagle3\", \"model\": \"/d\", \"num_speculative_tokens\": 3'", 12,
     "vllm 0.24.0's parser refuses it: argument --speculative-config/-sc: Value {\"method\": \"eagle3\", "
     "\"model\": \"/d\", \"num_speculative_tokens\": 3 cannot be converted to <function loads>.", "JSON object"),
    ("speculative-config", "'{\"method\": \"eagle3\", \"model\": \"/d\", \"num_speculative_token\": 3}'", 12,
     "num_speculative_token: Extra inputs are not permitted", "did you mean 'num_speculative_tokens'?"),
    ("speculative-config", "'{\"method\": \"eagel3\", \"model\": \"/d\", \"num_speculative_tokens\": 3}'", 12,
     "method: Input should be one of 'ngram'", "did you mean 'eagle3'?"),
    ("speculative-config", "'{\"method\": \"eagle3\", \"model\": \"/d\"}'", 12,
     "num_speculative_tokens must be provided with speculative model unless the draft model config contains an "
     "n_predict parameter.", "num_speculative_tokens"),
    ("speculative-config", "'{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}'", 12,
     "num_speculative_tokens was provided but without speculative model.", "model"),
    ("speculative-config", "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"prompt_lookup_min\": 5, "
     "\"prompt_lookup_max\": 3}'", 12, "prompt_lookup_min=5 must be <= prompt_lookup_max=3", None),
    ("speculative-config", "'{\"method\": \"ngram\", \"num_speculative_tokens\": 0}'", 12,
     "num_speculative_tokens: Input should be greater than 0", None),
])
def test_a_bad_preset_fails_at_its_line(tmp_path: Path, key, value, line, said, hint) -> None:
    p = env_with(tmp_path, key, value)
    with pytest.raises(ToolkitError) as e:
        load_spec(p)
    assert e.value.line == line and said in e.value.message, e.value.message
    assert hint is None or hint in (e.value.hint or ""), e.value.hint


def test_validate_exits_2_with_vllms_words(tmp_path: Path) -> None:
    p = env_with(tmp_path, "speculative-config", "'{method: eagle3}'")
    r = run_cli("validate", str(p))
    assert r.returncode == 2
    assert f"{p}:12:" in r.stderr and "servers.spec.speculative-config" in r.stderr
    assert "Value {method: eagle3} cannot be converted to <function loads>." in r.stderr


def test_good_speculative_configs_pass(tmp_path: Path) -> None:
    for cfg in (EAGLE3, '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}',
                '{"model": "ngram", "num_speculative_tokens": 2}'):
        assert load_spec(env_with(tmp_path, "speculative-config", f"'{cfg}'")).model.engine == "vllm"


def test_a_vllm_environment_pins_its_vllm(tmp_path: Path) -> None:
    p = tmp_path / "env.yaml"
    p.write_text("kind: Environment\nname: v\nengine: vllm\nservers:\n  b: {model: /m}\n")
    with pytest.raises(ToolkitError) as e:
        load_spec(p)
    assert e.value.line == 3 and "no `vllm` under `packages:`" in e.value.message
    p.write_text("kind: Environment\nname: v\nengine: vllm\npackages: [{name: vllm, version: 0.24.0}]\n"
                 "servers:\n  b: {max-num-seqs: 4}\n")
    with pytest.raises(ToolkitError) as e:
        load_spec(p)
    assert "preset b has no `model:`" in e.value.message


def test_a_version_without_a_table_warns(tmp_path: Path) -> None:
    spec = load_spec(env_with(tmp_path, "no-such-flag", "1", version="0.23.0"))
    assert len(spec.warnings) == 1 and "vllm 0.23.0: its server flags were not checked" in spec.warnings[0]


METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="t"} 40.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="t"} 1.7650e+09
vllm:spec_decode_num_drafts_total{engine="1",model_name="t"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="t"} 150.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="t"} 75.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="t"} 25.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="t",position="0"} 40.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="t"} 7.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="t"} 1.0
"""


def test_acceptance_from_the_counters() -> None:
    c = vllm.acceptance_counters(parse_metrics(METRICS))
    # summed over engines and finish reasons; `_created` and the per-position counter are not the totals
    assert c == {vllm.ACCEPTED: 100.0, vllm.DRAFT_TOKENS: 150.0, vllm.DRAFTS: 50.0, vllm.REQUESTS: 8.0}
    zero = {k: 0.0 for k in c}
    got = vllm.acceptance_length(zero, c)
    assert got.accept_length == 1 + 100 / 50 and got.acceptance_rate == 100 / 150 and got.requests == 8
    assert engines.get("vllm").acceptance_counts(parse_metrics(METRICS)) == AcceptanceCounts(150.0, 50.0, 8.0)
    assert vllm.acceptance_length(c, c) is None  # no drafts in between: no figure
    # a plain server (or --disable-log-stats): no spec-decode counters, no figure
    assert vllm.acceptance_counters(parse_metrics('vllm:request_success_total{engine="0"} 3.0\n')) is None


CRASH = textwrap.dedent("""\
    (APIServer pid=11) INFO 12-06 21:03:28 [api_server.py:1] vLLM API server version 0.24.0
    (EngineCore_DP0 pid=12) ERROR 12-06 21:03:40 [core.py:1231] EngineCore failed to start.
    (EngineCore_DP0 pid=12) Traceback (most recent call last):
    (EngineCore_DP0 pid=12)   File "/x/vllm/v1/engine/core.py", line 1222, in run_engine_core
    (EngineCore_DP0 pid=12) ValueError: Target and draft model should have the same vocabulary size.
    (APIServer pid=11) Traceback (most recent call last):
    (APIServer pid=11) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
    """)


def test_the_last_error_line_is_the_root_cause() -> None:
    assert vllm.last_error_line(CRASH) == ("(EngineCore_DP0 pid=12) ValueError: Target and draft model should have "
                                           "the same vocabulary size.")
    assert vllm.last_error_line("usage: vllm serve\nvllm serve: error: unrecognized arguments: --x 1\n") == \
        "vllm serve: error: unrecognized arguments: --x 1"
    assert vllm.last_error_line("(APIServer pid=1) ERROR 12-06 21:03:40 [x.py:2] CUDA out of memory\n") == \
        "(APIServer pid=1) ERROR 12-06 21:03:40 [x.py:2] CUDA out of memory"
    assert vllm.last_error_line("(APIServer pid=1) INFO 12-06 21:03:40 [x.py:2] fine\n") is None


def test_server_state() -> None:
    st = vllm.server_state({})
    assert (st.engine, st.server_info_read, st.said) == ("vllm", False, ("engine", "server_info_read"))
    # the arm's state keeps what was said, and only that (summary.json writes the fields set)
    assert ArmState().add_state(st).model_dump(exclude_unset=True) == {"engine": "vllm", "server_info_read": False}
    st = vllm.server_state({"version": "0.24.0"})
    assert st.engine_version == "0.24.0" and not st.server_info_read and st.max_running_requests is None
    dev = {"version": "0.24.0", "vllm_config": {"scheduler_config": {"max_num_seqs": 128},
                                                 "speculative_config": json.loads(EAGLE3)}}
    st = vllm.server_state(dev)
    assert st.server_info_read and st.max_running_requests == 128
    assert st.speculative == {"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}
