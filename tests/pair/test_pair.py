"""The model pair's recipe end to end on a CPU (the `test` recipe: seconds), and the facts it must keep.

What the GPU run showed (docs/lab/pair.md): a drafter whose training label was its own input token reached a top-1 of
0.998 in training and an acceptance of 1.02 in SGLang. step_targets() is tested here so that cannot come back;
the weight names are checked against SGLang 0.5.17's own EAGLE-3 loader rules (llama_eagle3.py load_weights).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from toolkit.pair.corpus import render_chat  # noqa: E402
from toolkit.pair.prepare import prepare  # noqa: E402
from toolkit.pair.recipes import recipe  # noqa: E402
from toolkit.pair.train import aux_layers, step_targets, train  # noqa: E402

def test_each_draft_step_predicts_the_token_after_its_input():
    """Row t of step k reads token t+1+k and must predict token t+2+k (labels[t+2+k]), never its own input."""
    W = 12
    x = torch.arange(100, 100 + W)[None]  # the tokens
    labels = x.clone()  # a target that predicts each token exactly: labels[i] = token i
    valid = torch.ones_like(x, dtype=torch.bool)
    valid[0, 0] = False  # no prediction of the first token
    for k in range(3):
        tgt, ok = step_targets(labels, valid, k)
        rows = ok[0].nonzero().flatten().tolist()
        assert rows == list(range(W - 2 - k)), k  # every row whose answer lies inside the window
        for t in rows:
            assert tgt[0, t] == x[0, t + 2 + k]
            assert tgt[0, t] != x[0, t + 1 + k]  # the row's input token


def sglang_param(name: str) -> str:
    """SGLang 0.5.17's LlamaForCausalLMEagle3.load_weights name mapping (legacy names, stacked q/k/v, gate/up)."""
    name = name.replace("midlayer", "layers.0")
    for shard, stacked in ((".q_proj", ".qkv_proj"), (".k_proj", ".qkv_proj"), (".v_proj", ".qkv_proj"),
                           (".gate_proj", ".gate_up_proj"), (".up_proj", ".gate_up_proj")):
        if shard in name:
            name = name.replace(shard, stacked)
            break
    return name if name.startswith("lm_head") else f"model.{name}"


SGLANG_DRAFT_PARAMS = {  # named_parameters() of SGLang's one-layer LlamaForCausalLMEagle3, less the target's embedding
    "model.fc.weight", "model.layers.0.hidden_norm.weight", "model.layers.0.input_layernorm.weight",
    "model.layers.0.post_attention_layernorm.weight", "model.layers.0.self_attn.qkv_proj.weight",
    "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_up_proj.weight",
    "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    if not Path("/usr/share/dictd/gcide.dict.dz").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("dict-gcide and dict-wn are missing: tests/run.sh installs them")
        pytest.skip("Debian's dict-gcide and dict-wn (tests/run.sh installs them)")
    root = tmp_path_factory.mktemp("pair")
    prepare(root / "prep", recipe("test"), log=lambda *_: None)
    train(root / "prep", root / "pair", recipe("test"), device="cpu", log=lambda *_: None)
    return root


def test_the_prepared_folder_says_what_it_holds(pair):
    m = json.loads((pair / "prep" / "manifest.json").read_text())
    for name, sha in m["files"].items():
        assert hashlib.sha256((pair / "prep" / name).read_bytes()).hexdigest() == sha
    assert set(m["tokens"]) == {"code", "encyclopedic", "math", "agentic", "coding"}
    assert m["sources"]["encyclopedic"]["gcide"]["entries"] > 100_000
    assert set(m["prompts"]) == {"draft-coding", "draft-agentic", "eval-coding", "eval-agentic",
                                 "eval-encyclopedic", "eval-math"}


def test_the_target_is_a_llama_with_the_chat_template(pair):
    from transformers import AutoTokenizer, LlamaForCausalLM

    target = pair / "pair" / "target"
    model = LlamaForCausalLM.from_pretrained(target)
    tok = AutoTokenizer.from_pretrained(target)
    assert model.config.tie_word_embeddings and model.config.vocab_size >= len(tok)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{}"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True) == \
        render_chat(messages, tools, True)


def test_the_drafter_is_in_sglangs_eagle3_format(pair):
    from safetensors import safe_open

    draft = pair / "pair" / "draft"
    cfg = json.loads((draft / "config.json").read_text())
    target = json.loads((pair / "pair" / "target" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["num_hidden_layers"] == 1
    # a draft_vocab_size of None would make SGLang's draft-extend CUDA graph size its vocabulary as None
    assert cfg["draft_vocab_size"] == cfg["vocab_size"] == target["vocab_size"]
    assert cfg["target_hidden_size"] == target["hidden_size"] and not cfg["tie_word_embeddings"]
    # SGLang captures the input of layers [2, L//2, L-3] by default; the ids in eagle_config are those minus 1
    layers = target["num_hidden_layers"]
    assert [i + 1 for i in cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]] == aux_layers(layers) == \
        [2, layers // 2, layers - 3]
    with safe_open(str(draft / "model.safetensors"), "pt") as f:
        names = set(f.keys())
        assert {str(f.get_tensor(n).dtype) for n in names} == {"torch.bfloat16"}
        assert tuple(f.get_tensor("fc.weight").shape) == (target["hidden_size"], 3 * target["hidden_size"])
    assert {sglang_param(n) for n in names} == SGLANG_DRAFT_PARAMS
    assert not any("d2t" in n or "t2d" in n for n in names)  # no token map: the full vocabulary


def test_pair_json_hashes_every_file_and_records_acceptance(pair):
    rec = json.loads((pair / "pair" / "pair.json").read_text())
    for name, sha in rec["files"].items():
        assert hashlib.sha256((pair / "pair" / name).read_bytes()).hexdigest() == sha
    assert set(rec["acceptance"]) == {"coding", "agentic", "encyclopedic", "math"}
    for a in rec["acceptance"].values():
        assert a["verify_steps"] > 0 and 1.0 <= a["accept_length"] <= 1 + recipe("test").eval_steps


def test_prepare_refuses_a_tampered_folder(pair, tmp_path):
    from toolkit.pair.train import _check_prep

    prep = tmp_path / "prep"
    shutil.copytree(pair / "prep", prep)
    with open(prep / "tokens.u16", "r+b") as f:
        f.write(b"\xff\xff")
    with pytest.raises(OSError, match="sha256 differs"):
        _check_prep(prep)
