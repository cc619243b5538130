"""Sampling values outside their valid range are refused by `toolkit validate` (and so by the run) at the spec's
line, with the range (issue 43: `top_p: 2.0` in a generation_config passed, because transformers' GenerationConfig
takes it). toolkit/specs/sampling.py holds the ranges; top_k's "off" value is the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.helpers import TINY_ENV
from toolkit.specs.sampling import bad_sampling

GEN = "generation_config: {prompt_lookup_num_tokens: 4}"
# generation_config of the embedded engine (transformers' generate()): value, the words of the error
EMBEDDED = {
    "top_p: 2.0": "top_p 2.0 is outside its valid range (0, 1]",
    "top_p: 0": "top_p 0 is outside its valid range (0, 1]",
    "temperature: -0.5": "temperature -0.5 is outside its valid range >= 0",
    "top_k: -1": "top_k -1 is outside its valid range: 0 (off) or a whole number >= 1",
    "min_p: 1.5": "min_p 1.5 is outside its valid range [0, 1]",
    "repetition_penalty: 0": "repetition_penalty 0 is outside its valid range > 0",
    "typical_p: 1.2": "typical_p 1.2 is outside its valid range (0, 1]",
    "top_p: .nan": "top_p nan is outside its valid range (0, 1]",
}
# the request body of an SGLang preset (top level, or its sampling_params section)
SGLANG = {
    "top_p: 2.0": "top_p 2.0 is outside its valid range (0, 1]",
    "top_k: 0": "top_k 0 is outside its valid range: -1 (off) or a whole number >= 1",
    "frequency_penalty: 3": "frequency_penalty 3 is outside its valid range [-2, 2]",
    "sampling_params: {ignore_eos: true, min_p: -0.1}": "min_p -0.1 is outside its valid range [0, 1]",
    "presence_penalty: abc": "presence_penalty 'abc' is outside its valid range [-2, 2]",
}


@pytest.mark.parametrize("text", list(EMBEDDED))
def test_validate_refuses_a_generation_config_value_out_of_range_at_its_line(tmp_path: Path, text: str) -> None:
    env = tmp_path / "env.yaml"
    env.write_text(TINY_ENV.replace(GEN, "generation_config: {prompt_lookup_num_tokens: 4, " + text + "}"))
    out = run_cli("validate", str(env))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{env}:12:" in out.stderr and EMBEDDED[text] in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "remove" in out.stderr


def _sglang(tmp_path: Path, line: str) -> Path:
    src = (ROOT / "envs/sglang-0.5.17-pair.yaml").read_text()
    env = tmp_path / "envs" / "sglang.yaml"
    env.parent.mkdir(exist_ok=True)
    assert "\nrequest_params:" not in src  # the pair's presets send nothing of their own (envs/sglang-0.5.17-pair.yaml)
    env.write_text(src + f"request_params:\n  ngram:\n    {line}\n")
    return env


@pytest.mark.parametrize("text", list(SGLANG))
def test_validate_refuses_a_request_body_value_out_of_range_at_its_line(tmp_path: Path, text: str) -> None:
    env = _sglang(tmp_path, text)
    line = next(n for n, x in enumerate(env.read_text().splitlines(), 1) if x.strip() == text)
    out = run_cli("validate", str(env))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{env}:{line}:" in out.stderr and SGLANG[text] in out.stderr, out.stderr


def test_values_in_range_pass_and_the_engine_says_what_turns_top_k_off(tmp_path: Path) -> None:
    env = _sglang(tmp_path, "sampling_params: {top_p: 1.0, top_k: -1, min_p: 0, temperature: 0, repetition_penalty: 1.1}")
    out = run_cli("validate", str(env))
    assert out.returncode == 0, out.stderr
    assert bad_sampling("top_k", 0, (-1, 0)) is None and bad_sampling("top_k", 0, (-1,)) is not None  # vLLM, SGLang
    assert bad_sampling("top_k", 1.5) and bad_sampling("top_p", True) and bad_sampling("max_tokens", -1) is None
    assert bad_sampling("top_p", 1) is None and bad_sampling("temperature", 0) is None
    assert bad_sampling("top_p", None) is None  # `top_p: null` drops the key from the request
