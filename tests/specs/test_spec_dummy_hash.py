"""The environment hash covers everything that changes what is served, the dummy models' recipes included
(issue 25: the SGLang H200 environment kept its hash when its dummy model's context went from 4096 to
16384, because the folder was made by a script outside the spec). Specs without the new fields keep the
hash they had (build records are keyed by it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from toolkit.specs import environment, load_spec, spec_hash
from toolkit.specs.environment import DummyConfig, DummyModel

# Written before dummy_models and recipe versions existed; their hashes then (spec_hash without a template
# version), which must hold.
CPU = {"kind": "Environment", "name": "pinned-cpu", "engine": "transformers",
       "model": {"dummy": {"architecture": "llama", "hidden_size": 64, "intermediate_size": 128, "layers": 2,
                           "heads": 4, "vocab_size": 2048, "seed": 0}},
       "servers": {"baseline": {}, "ngram": {}},
       "request_params": {"ngram": {"generation_config": {"do_sample": False, "prompt_lookup_num_tokens": 8}}}}
SGLANG = {"kind": "Environment", "name": "pinned-sglang", "engine": "sglang",
          "base_image": "nvidia/cuda:13.0.1-devel-ubuntu24.04", "sglang": {"version": "0.5.17"},
          "servers": {"baseline": {"model-path": "/models/target", "load-format": "dummy"},
                      "eagle3": {"model-path": "/models/target", "load-format": "dummy",
                                 "speculative-algorithm": "EAGLE3"}}}
PINNED = {"cpu": (CPU, "c1d03f3fb003d21e311019087d8b11f7677959052122684dd4fab18830d8ba34"),
          "sglang": (SGLANG, "1d0cadf1e93bd00f9075a246d5c6115f0d1a2b98d7593a4b6fe099bc84fc1bbe")}
TARGET, DRAFT = "/tmp/toolkit-sglang/models/llama-1b", "/tmp/toolkit-sglang/models/eagle3-draft"
WITH_MODELS = {**SGLANG, "dummy_models": {
    TARGET: {"hidden_size": 2048, "layers": 16, "max_position_embeddings": 16384},
    DRAFT: {"architecture": "llama-eagle3", "eagle3_draft_of": TARGET, "hidden_size": 2048, "layers": 1}},
    "servers": {"eagle3": {"model-path": TARGET, "load-format": "dummy", "speculative-algorithm": "EAGLE3",
                           "speculative-draft-model-path": DRAFT}}}


def hash_of(tmp: Path, doc: dict) -> str:
    f = tmp / f"{len(list(tmp.iterdir()))}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return spec_hash(load_spec(f))


@pytest.mark.parametrize("name", PINNED)
def test_specs_without_the_new_fields_keep_their_hash(tmp_path, name):
    doc, pinned = PINNED[name]
    assert hash_of(tmp_path, doc) == pinned


def test_a_matrix_with_models_in_its_lists_keeps_its_hash(tmp_path):
    """A Matrix whose workloads mix names and objects (models inside a list) hashes as before (the bytes of the
    files it references are part of its hash: written here exactly)."""
    (tmp_path / "env.yaml").write_text(
        "kind: Environment\nname: pinned-cpu\nengine: transformers\nmodel:\n"
        "  dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}\n"
        "servers:\n  baseline: {}\n  ngram: {}\n")
    (tmp_path / "prompts.jsonl").write_text('{"id": "p0", "domain": "mine", "prompt": "def f(x):"}\n')
    m = tmp_path / "m.yaml"
    m.write_text("kind: Matrix\nname: pinned\nenvironment: env.yaml\narms: [baseline, ngram]\n"
                 "workloads: [coding, {name: mine, path: prompts.jsonl}]\nconcurrency: [1, 4]\noutput_len: 8\n"
                 "requests: 4\n")
    assert spec_hash(load_spec(m)) == "75eb80d43d94b1615b938b28303083d13dc3d579b0f6aafd6707e2ebd33605f3"


def other(field, value):
    """Another valid value of a recipe field."""
    ann = field.annotation
    if getattr(ann, "__origin__", None) is not None and str(ann).startswith("typing.Literal"):
        return next(v for v in ann.__args__ if v != value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):  # doubled: head counts still divide sizes (validated shapes)
        return value * 2 if value else 1
    raise AssertionError(f"no other value for {field}")


@pytest.mark.parametrize("name", [n for n in DummyModel.model_fields if n != "architecture"])
def test_every_field_of_the_embedded_engines_dummy_changes_the_hash(tmp_path, name):
    base = hash_of(tmp_path, CPU)
    current = DummyModel.model_validate(CPU["model"]["dummy"])
    doc = json.loads(json.dumps(CPU))
    doc["model"]["dummy"][name] = other(DummyModel.model_fields[name], getattr(current, name))
    assert hash_of(tmp_path, doc) != base


@pytest.mark.parametrize("name", [n for n in DummyConfig.model_fields if n not in ("architecture", "eagle3_draft_of")])
@pytest.mark.parametrize("folder", [TARGET, DRAFT])
def test_every_field_of_a_config_only_folder_changes_the_hash(tmp_path, name, folder):
    base = hash_of(tmp_path, WITH_MODELS)
    doc = json.loads(json.dumps(WITH_MODELS))
    current = DummyConfig.model_validate(doc["dummy_models"][folder])
    new = other(DummyConfig.model_fields[name], getattr(current, name))
    doc["dummy_models"][folder][name] = new
    if name == "vocab_size":  # a drafter shares its target's vocabulary (validated): change both
        doc["dummy_models"][TARGET if folder == DRAFT else DRAFT][name] = new
    assert hash_of(tmp_path, doc) != base


def test_the_drafters_target_and_architecture_change_the_hash(tmp_path):
    base = hash_of(tmp_path, WITH_MODELS)
    doc = json.loads(json.dumps(WITH_MODELS))
    doc["dummy_models"]["/tmp/other-target"] = doc["dummy_models"][TARGET]
    with_spare = hash_of(tmp_path, doc)
    assert with_spare != base
    doc["dummy_models"][DRAFT]["eagle3_draft_of"] = "/tmp/other-target"
    assert hash_of(tmp_path, doc) != with_spare
    doc = json.loads(json.dumps(WITH_MODELS))
    doc["dummy_models"][DRAFT] = {"hidden_size": 2048, "layers": 1}  # a plain llama, not a drafter
    assert hash_of(tmp_path, doc) != base


def test_a_new_recipe_version_changes_the_hash(tmp_path, monkeypatch):
    cpu, sg = hash_of(tmp_path, CPU), hash_of(tmp_path, WITH_MODELS)
    monkeypatch.setattr(environment, "DUMMY_RECIPE", "toolkit-dummy-v2")
    assert hash_of(tmp_path, CPU) != cpu
    monkeypatch.setattr(environment, "CONFIG_RECIPE", "toolkit-dummy-config-v2")
    assert hash_of(tmp_path, WITH_MODELS) != sg


def test_a_dummy_folder_the_spec_does_not_hold_is_named(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump(SGLANG))
    warnings = load_spec(f).warnings
    assert any("preset baseline serves random weights from model-path /models/target" in w
               and "dummy_models" in w for w in warnings)
    f.write_text(yaml.safe_dump(WITH_MODELS))
    assert not [w for w in load_spec(f).warnings if "dummy_models" in w]


@pytest.mark.parametrize("bad, says", [
    ({"relative/path": {}}, "not an absolute path"),
    ({TARGET: {}, DRAFT: {"architecture": "llama-eagle3"}}, "eagle3_draft_of"),
    ({TARGET: {}, DRAFT: {"architecture": "llama-eagle3", "eagle3_draft_of": "/nowhere"}}, "is not a llama folder"),
    ({TARGET: {}, DRAFT: {"architecture": "llama-eagle3", "eagle3_draft_of": TARGET, "vocab_size": 4096}},
     "differs from its target's"),
])
def test_bad_dummy_models_are_clear_errors(tmp_path, bad, says):
    from toolkit.errors import SpecError

    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump({**SGLANG, "dummy_models": bad}))
    with pytest.raises(SpecError, match=says):
        load_spec(f)


def test_the_folder_is_what_the_recipe_says_and_follows_it(tmp_path):
    """The config-only folder comes from the spec's recipe (the context SGLang serves is its
    max_position_embeddings); a changed recipe writes it again, an unchanged one leaves it."""
    from toolkit.serve.dummy import ensure_config_folders

    target, draft = str(tmp_path / "llama"), str(tmp_path / "draft")
    models = {target: DummyConfig(hidden_size=256, intermediate_size=512, layers=2, heads=8, kv_heads=2,
                                  vocab_size=1024, max_position_embeddings=4096),
              draft: DummyConfig(architecture="llama-eagle3", eagle3_draft_of=target, hidden_size=256,
                                 intermediate_size=512, layers=1, heads=8, kv_heads=2, vocab_size=1024)}
    assert ensure_config_folders(models) == [target, draft]
    cfg = json.loads((Path(target) / "config.json").read_text())
    assert cfg["max_position_embeddings"] == 4096 and cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["vocab_size"] <= 1024 and (Path(target) / "tokenizer.json").is_file()
    dcfg = json.loads((Path(draft) / "config.json").read_text())
    assert dcfg["architectures"] == ["LlamaForCausalLMEagle3"] and dcfg["draft_vocab_size"] == cfg["vocab_size"]
    assert dcfg["target_hidden_size"] == 256 and dcfg["num_hidden_layers"] == 1
    assert ensure_config_folders(models) == []  # already there
    models[target] = models[target].model_copy(update={"max_position_embeddings": 16384})
    assert ensure_config_folders(models) == [target, draft]  # the drafter records its target's recipe too
    assert json.loads((Path(target) / "config.json").read_text())["max_position_embeddings"] == 16384


def test_the_h200_environment_holds_the_recipe_of_the_folders_it_served():
    """envs/sglang-0.5.17-h200.yaml's dummy_models give the configs the H200 runs served (the make_models.py
    constants of that run: hidden 2048, 16 layers, MLP 8192, 32 heads, 8 KV heads, context 16384, bf16)."""
    from toolkit.serve.dummy import _train_tokenizer, config_json

    env = load_spec(Path(__file__).resolve().parents[2] / "envs" / "sglang-0.5.17-h200.yaml").model
    t = env.dummy_models[TARGET]
    tok = _train_tokenizer(t.vocab_size)
    assert len(tok) == 13040  # what the toolkit's BPE reaches of the 32000 asked: the served vocabulary
    cfg = config_json(t, tok)
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"], cfg["num_attention_heads"],
            cfg["num_key_value_heads"], cfg["max_position_embeddings"], cfg["torch_dtype"], cfg["rope_theta"]) == (
        2048, 16, 8192, 32, 8, 16384, "bfloat16", 500000.0)
    d = config_json(env.dummy_models[DRAFT], tok, t)
    assert d["num_hidden_layers"] == 1 and d["target_hidden_size"] == 2048 and d["draft_vocab_size"] == 13040
    for preset in env.servers.values():
        assert preset["model-path"] in env.dummy_models
        assert preset.get("speculative-draft-model-path", TARGET) in env.dummy_models
