"""The tuned Environment: the original file with only the tuned values changed (comments, order, anchors and
quoting kept), a comment naming the session on each, and a file that validates."""

from __future__ import annotations

import difflib
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.errors import ToolkitError
from toolkit.specs import load_spec
from toolkit.tune.writeback import write_tuned


def changed(a: Path, b: Path) -> list[str]:
    return [ln for ln in difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_embedded_preset_gets_its_request_knobs_with_comments(tmp_path):
    env = load_spec(ROOT / "envs" / "local-cpu.yaml")
    out = write_tuned(env, tmp_path / "OUT.yaml", arm="ngram", engine="transformers",
                      params={"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": 1},
                      note="bench tune quickstart-tune/X (trial t02)", threshold=4,
                      threshold_note="set speculative-disable-batch-threshold: 4 (bench tune quickstart-tune/X)")
    diff = changed(ROOT / "envs" / "local-cpu.yaml", out)
    assert diff == [
        "+  # tuned: set speculative-disable-batch-threshold: 4 (bench tune quickstart-tune/X)",
        "-      prompt_lookup_num_tokens: 8",
        "+      prompt_lookup_num_tokens: 4  # tuned: bench tune quickstart-tune/X (trial t02)",
        "+      max_matching_ngram_size: 1 # tuned: bench tune quickstart-tune/X (trial t02)"]
    m = load_spec(out).model
    assert m.request_params["ngram"]["generation_config"] == {"do_sample": False, "prompt_lookup_num_tokens": 4,
                                                              "max_matching_ngram_size": 1}
    assert m.request_params["baseline"] == load_spec(ROOT / "envs" / "local-cpu.yaml").model.request_params["baseline"]
    assert run_cli("validate", str(out)).returncode == 0


def test_sglang_preset_flags_threshold_and_paths_from_another_folder(tmp_path):
    src = ROOT / "envs" / "sglang-0.5.17-h200.yaml"
    out = write_tuned(load_spec(src), tmp_path / "sub" / "tuned.yaml", arm="eagle3", engine="sglang",
                      params={"speculative-num-steps": 5, "speculative-eagle-topk": 4,
                              "speculative-num-draft-tokens": 8}, note="bench tune X", threshold=16,
                      threshold_note="set speculative-disable-batch-threshold: 16 (bench tune X)")
    m = load_spec(out).model
    assert m.servers["eagle3"]["speculative-num-steps"] == 5
    assert m.servers["eagle3"]["speculative-disable-batch-threshold"] == 16  # the env carries the patch
    # a preset merging eagle3 (`<<: *eagle3`) resolves as it did: only the tuned preset moves (issue 42)
    before = load_spec(src).model
    assert {k: v for k, v in m.servers.items() if k != "eagle3"} == \
        {k: v for k, v in before.servers.items() if k != "eagle3"}
    assert m.request_params == before.request_params
    text = out.read_text()
    assert "# the kernel wheel is carried without its FA3 library" in text and "<<: *baseline" in text
    assert "speculative-num-steps: 5  # tuned: bench tune X" in text
    assert run_cli("validate", str(out)).returncode == 0  # the patch path was rebased to the new folder


def test_a_shared_alias_is_copied_and_a_flow_mapping_becomes_block(tmp_path):
    src = tmp_path / "env.yaml"
    src.write_text(textwrap.dedent("""\
        kind: Environment
        name: t
        engine: transformers
        model: {dummy: {}}
        servers: {baseline: {}, ngram: {}, other: {}}
        request_params:
          ngram: &shared
            generation_config: {do_sample: false, prompt_lookup_num_tokens: 8}
          other: *shared
        """))
    out = write_tuned(load_spec(src), tmp_path / "out.yaml", arm="ngram", engine="transformers",
                      params={"prompt_lookup_num_tokens": 2}, note="n")
    m = load_spec(out).model
    assert m.request_params["ngram"]["generation_config"]["prompt_lookup_num_tokens"] == 2
    assert m.request_params["other"]["generation_config"]["prompt_lookup_num_tokens"] == 8


def test_the_input_is_never_overwritten(tmp_path):
    src = tmp_path / "env.yaml"
    src.write_text((ROOT / "envs" / "local-cpu.yaml").read_text())
    with pytest.raises(ToolkitError, match="is the environment the tune read"):
        write_tuned(load_spec(src), src, arm="ngram", engine="transformers", params={"prompt_lookup_num_tokens": 2},
                    note="n")
    assert src.read_text() == (ROOT / "envs" / "local-cpu.yaml").read_text()


MERGED = """\
kind: Environment
name: t
engine: sglang
base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
cuda: "13.0"
python: "3.12"
sglang: {version: 0.5.17, source: wheel}
dummy_models:
  /m: &llama {hidden_size: 64, intermediate_size: 128, layers: 2, heads: 4, kv_heads: 2, vocab_size: 1000}
servers:
  common: &common
    model-path: /m
    mem-fraction-static: 0.8
  baseline:
    <<: *common
  eagle3: &eagle3
    <<: *common
    speculative-algorithm: EAGLE3
    speculative-num-steps: 3
    speculative-eagle-topk: 1
    speculative-num-draft-tokens: 4
  eagle3-threshold:
    <<: *eagle3
    speculative-disable-batch-threshold: 8
  eagle3-big:
    <<: [*eagle3, *common]
    mem-fraction-static: 0.9
  alias-of-eagle3: *eagle3
"""


def _resolved(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("params", [
    {"speculative-num-steps": 1, "speculative-num-draft-tokens": 2},   # values eagle3 holds itself
    {"mem-fraction-static": 0.7, "speculative-num-steps": 5},          # one it inherits from the shared *common
])
def test_merge_keys_only_the_tuned_preset_changes(tmp_path, params):
    """Write-back through YAML merge keys and anchors: the tuned preset gets the values; every other preset
    (merging the arm, merging the anchor the arm merges, an alias of the arm) resolves identically."""
    src = tmp_path / "env.yaml"
    src.write_text(MERGED)
    out = write_tuned(load_spec(src), tmp_path / "out.yaml", arm="eagle3", engine="sglang", params=params,
                      note="bench tune X")
    before, after = _resolved(src), _resolved(out)
    assert {k: v for k, v in after["servers"].items() if k != "eagle3"} == \
        {k: v for k, v in before["servers"].items() if k != "eagle3"}
    assert after["servers"]["eagle3"] == {**before["servers"]["eagle3"], **params}
    assert {k: v for k, v in after.items() if k != "servers"} == {k: v for k, v in before.items() if k != "servers"}
    text = out.read_text()
    assert "<<: *common" in text and "<<: *eagle3" in text  # the anchors and merges stay
    assert "kept: as eagle3-threshold resolved before the tune of eagle3" in text
    assert load_spec(out).model.servers["eagle3-threshold"]["speculative-disable-batch-threshold"] == 8


def test_a_nested_shared_generation_config_is_not_moved(tmp_path):
    src = tmp_path / "env.yaml"
    src.write_text(textwrap.dedent("""\
        kind: Environment
        name: t
        engine: transformers
        model: {dummy: {}}
        servers: {baseline: {}, ngram: {}, other: {}}
        request_params:
          ngram:
            generation_config: &gc {do_sample: false, prompt_lookup_num_tokens: 8}
          other:
            generation_config: *gc
        """))
    out = write_tuned(load_spec(src), tmp_path / "out.yaml", arm="ngram", engine="transformers",
                      params={"prompt_lookup_num_tokens": 2}, note="n")
    m = load_spec(out).model
    assert m.request_params["ngram"]["generation_config"]["prompt_lookup_num_tokens"] == 2
    assert m.request_params["other"] == load_spec(src).model.request_params["other"]
