"""`bench tune`'s search space: bad knobs and values fail before anything runs (exit 2, file:line, hint, no
session folder), and SGLang 0.5.17's rules between its speculative flags decide which settings are trials."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.errors import SpecError
from toolkit.specs import load_spec, spec_hash
from toolkit.engines.sglang import canonical as canonical_sglang
from toolkit.tune.space import check_space

LOCAL_ENV = textwrap.dedent("""\
    kind: Environment
    name: t-cpu
    engine: transformers
    model:
      dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512}
    servers:
      baseline: {}
      ngram: {}
    request_params:
      ngram:
        generation_config: {prompt_lookup_num_tokens: 4}
    """)

SGLANG_ENV = textwrap.dedent("""\
    kind: Environment
    name: t-sglang
    base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
    sglang: {version: 0.5.17}
    servers:
      baseline: {model-path: /m}
      eagle3:
        model-path: /m
        speculative-algorithm: EAGLE3
        speculative-draft-model-path: /d
        speculative-num-steps: 3
        speculative-eagle-topk: 1
        speculative-num-draft-tokens: 4
      ngram: {model-path: /m, speculative-algorithm: NGRAM}
    """)


def write(tmp: Path, env: str, space: str, arms: str = "[baseline, ngram]", extra: str = "") -> Path:
    (tmp / "env.yaml").write_text(env)
    m = tmp / "m.yaml"
    m.write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: t
        environment: env.yaml
        arms: {arms}
        target: {{kind: local, launcher: process}}
        workloads: [coding]
        concurrency: [1]
        requests: 4
        tune:
          space:
        """) + textwrap.indent(textwrap.dedent(space), "    ") + extra)
    return m


def space_error(tmp: Path, env: str, space: str, arm: str, arms: str = "[baseline, ngram]") -> SpecError:
    m = write(tmp, env, space, arms)
    spec = load_spec(m)
    with pytest.raises(SpecError) as exc:
        check_space(spec, load_spec(tmp / "env.yaml"), arm)
    return exc.value


def test_unknown_knob_of_the_embedded_engine_exits_2_with_line_and_hint_before_anything_runs(tmp_path):
    m = write(tmp_path, LOCAL_ENV, """\
        ngram:
          prompt_lookup_num_token: [2, 4]
        """)
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "res"))
    assert r.returncode == 2, r.stderr
    assert f"{m}:12:7:" in r.stderr and "unknown knob 'prompt_lookup_num_token'" in r.stderr
    assert "did you mean 'prompt_lookup_num_tokens'?" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "res").exists()  # no session, no server


def test_a_server_flag_on_the_embedded_engine_is_named_as_such(tmp_path):
    e = space_error(tmp_path, LOCAL_ENV, """\
        ngram:
          speculative-num-steps: [1, 2]
        """, "ngram")
    assert "no server flags to tune" in e.message and e.line == 12
    assert "prompt_lookup_num_tokens" in e.hint


@pytest.mark.parametrize("values, msg, hint", [
    ("[2, 0]", "0 is out of range: it must be >= 1", "allowed: a whole number >= 1"),
    ("[2, '4']", "takes whole numbers, got '4'", "without quotes"),
    ("[2, 2.5]", "takes whole numbers, got 2.5", "without quotes"),
])
def test_bad_values_point_at_the_value(tmp_path, values, msg, hint):
    e = space_error(tmp_path, LOCAL_ENV, f"""\
        ngram:
          prompt_lookup_num_tokens: {values}
        """, "ngram")
    assert msg in e.message and hint in e.hint
    assert (e.line, e.column) == (12, 37)  # the second item of the list


def test_a_value_listed_twice_is_refused_at_the_second(tmp_path):
    m = write(tmp_path, LOCAL_ENV, """\
        ngram:
          prompt_lookup_num_tokens: [2, 2]
        """)
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "lists 2 twice" in r.stderr and "remove the second" in r.stderr, r.stderr


def test_ngram_size_without_prompt_lookup_has_no_effect(tmp_path):
    env = LOCAL_ENV.replace("{prompt_lookup_num_tokens: 4}", "{do_sample: false}")
    assert env != LOCAL_ENV
    e = space_error(tmp_path, env, """\
        ngram:
          max_matching_ngram_size: [1, 2]
        """, "ngram")
    assert "has no effect without prompt lookup" in e.message


def test_the_arm_must_have_a_space_and_not_be_the_baseline(tmp_path):
    e = space_error(tmp_path, LOCAL_ENV, "ngram: {prompt_lookup_num_tokens: [2, 4]}\n", "baseline")
    assert "no search space for arm 'baseline'" in e.message
    e = space_error(tmp_path, LOCAL_ENV, "baseline: {prompt_lookup_num_tokens: [2, 4]}\n", "baseline")
    assert "is the baseline" in e.message


def test_the_embedded_space_is_the_grid_and_the_incumbent_is_recorded(tmp_path):
    m = write(tmp_path, LOCAL_ENV, """\
        ngram:
          prompt_lookup_num_tokens: [2, 8]
          max_matching_ngram_size: [1, 3]
        """)
    s = check_space(load_spec(m), load_spec(tmp_path / "env.yaml"), "ngram")
    assert s.level == "request" and s.engine == "transformers"
    assert s.candidates == [{"prompt_lookup_num_tokens": 2, "max_matching_ngram_size": 1},
                            {"prompt_lookup_num_tokens": 2, "max_matching_ngram_size": 3},
                            {"prompt_lookup_num_tokens": 8, "max_matching_ngram_size": 1},
                            {"prompt_lookup_num_tokens": 8, "max_matching_ngram_size": 3}]
    assert s.base == {"prompt_lookup_num_tokens": 4, "max_matching_ngram_size": None}


def test_confirm_launches_on_request_level_knobs_exits_2_at_its_line_before_anything_runs(tmp_path):
    """The embedded engine's knobs are request parameters on one shared server: no launch between the arms, so
    `confirm_launches: 2` has nothing to repeat; an error at its line, nothing started."""
    m = write(tmp_path, LOCAL_ENV, "ngram: {prompt_lookup_num_tokens: [2, 4]}\n", extra="  confirm_launches: 2\n")
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "res"))
    assert r.returncode == 2, r.stderr
    assert f"{m}:12:3:" in r.stderr and "tune.confirm_launches: 2 launches per arm" in r.stderr and "one shared server" in r.stderr
    assert "remove `confirm_launches:`" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "res").exists()  # no session, no server
    m.write_text(m.read_text().replace("confirm_launches: 2", "confirm_launches: 1"))
    assert check_space(load_spec(m), load_spec(tmp_path / "env.yaml"), "ngram").level == "request"  # 1: the default


@pytest.mark.parametrize("n", [0, 11])
def test_confirm_launches_is_bounded(tmp_path, n):
    m = write(tmp_path, SGLANG_ENV, "eagle3: {speculative-num-steps: [1, 2]}\n", "[baseline, eagle3]",
              extra=f"  confirm_launches: {n}\n")
    with pytest.raises(SpecError) as exc:
        load_spec(m)
    assert "confirm_launches" in str(exc.value) and exc.value.line == 12


def test_the_tune_block_is_not_part_of_the_matrix_hash(tmp_path):
    m = write(tmp_path, LOCAL_ENV, "ngram: {prompt_lookup_num_tokens: [2, 4]}\n")
    with_block = spec_hash(load_spec(m))
    text = m.read_text()
    m.write_text(text[:text.index("tune:")])
    assert spec_hash(load_spec(m)) == with_block


# -- SGLang 0.5.17's rules (srt/arg_groups/speculative_hook.py, srt/speculative/eagle_utils.py)

EAGLE = {"speculative-algorithm": "EAGLE3"}


@pytest.mark.parametrize("params, expect", [
    # topk 1: SGLang sets draft tokens = steps + 1 (speculative_hook.py:657-665)
    ({"speculative-num-steps": 3, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 8},
     {"speculative-num-draft-tokens": 4}),
    # a tree of 2 steps x topk 2 holds 2 + 1 x 4 = 6 candidates: 7 draft tokens (6 verified) fit, 8 do not
    ({"speculative-num-steps": 2, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 7},
     {"speculative-num-draft-tokens": 7}),
    ({"speculative-num-steps": 2, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 8}, "torch.topk"),
    # the three are set together or not at all (the assert at speculative_hook.py:588-595)
    ({"speculative-eagle-topk": 2}, "speculative_hook.py:588-595"),
    ({"speculative-num-steps": 2, "speculative-eagle-topk": 2}, "together"),
    ({}, {}),
    ({"speculative-num-steps": 3, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 4,
      "attention-backend": "trtllm_mha"}, "trtllm_mha"),
    ({"speculative-num-steps": 3, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 4,
      "speculative-use-rejection-sampling": True}, "rejection-sampling requires topk 1"),
    ({"speculative-num-steps": 3, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 4,
      "page-size": 16, "attention-backend": "flashmla"}, "page-size > 1"),
    ({"speculative-num-steps": 3, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 4,
      "page-size": 16, "attention-backend": "triton"}, {}),
    ({"speculative-adaptive": True, "speculative-num-draft-tokens": 4}, "speculative-adaptive"),
])
def test_eagle_rules(params, expect):
    got, why = canonical_sglang({**EAGLE, **params})
    if isinstance(expect, str):
        assert got is None and expect in why
    else:
        assert got == {**EAGLE, **params, **expect}, why


def test_ngram_topk_and_dflash_steps_are_overridden_by_sglang():
    got, why = canonical_sglang({"speculative-algorithm": "NGRAM", "speculative-eagle-topk": 2})
    assert got is None and "speculative-ngram-max-bfs-breadth" in why and ":699" in why
    assert canonical_sglang({"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 8})[0]
    got, why = canonical_sglang({"speculative-algorithm": "DFLASH", "speculative-num-steps": 3})
    assert got is None and "one step with topk 1" in why
    got, why = canonical_sglang({"speculative-num-steps": 3})
    assert got is None and "without speculative-algorithm" in why


def test_sglang_space_rewrites_and_drops_combinations_and_keeps_the_rest(tmp_path):
    m = write(tmp_path, SGLANG_ENV, """\
        eagle3:
          speculative-num-steps: [1, 3]
          speculative-eagle-topk: [1, 2]
          speculative-num-draft-tokens: [2, 4, 8]
        """, arms="[baseline, eagle3]")
    s = check_space(load_spec(m), load_spec(tmp_path / "env.yaml"), "eagle3")
    got = [(c["speculative-num-steps"], c["speculative-eagle-topk"], c["speculative-num-draft-tokens"])
           for c in s.candidates]
    # topk 1: (1,1,*) -> (1,1,2) and (3,1,*) -> (3,1,4); topk 2, 1 step: 2 candidates, so 2 draft tokens only;
    # topk 2, 3 steps: 2 + 2 x 4 = 10 candidates, all three fit
    assert got == [(1, 1, 2), (1, 2, 2), (3, 1, 4), (3, 2, 2), (3, 2, 4), (3, 2, 8)]
    assert s.level == "server" and s.base == {"speculative-num-steps": 3, "speculative-eagle-topk": 1,
                                              "speculative-num-draft-tokens": 4}
    assert any("topk 1 sets draft tokens" in n for n in s.notes)
    assert any("refuses" in n for n in s.notes)


@pytest.mark.parametrize("space, line, col, msg", [
    # 64 draft tokens need 63 candidates; the largest tree here (3 steps x topk 4) holds 4 + 2 x 16 = 36
    ("eagle3:\n  speculative-num-steps: [1, 3]\n  speculative-eagle-topk: [1, 4]\n"
     "  speculative-num-draft-tokens: [4, 64]\n", 14, 41, "the largest draft tree here (3 steps x topk 4) holds 36"),
    ("ngram:\n  speculative-eagle-topk: [1, 2]\n", 12, 32, "speculative-ngram-max-bfs-breadth"),
    ("eagle3:\n  speculative-num-step: [1, 2]\n", 12, 7, "did you mean 'speculative-num-steps'?"),
    ("eagle3:\n  speculative_num_steps: [1, 2]\n", 12, 7, "did you mean 'speculative-num-steps'?"),
    ("eagle3:\n  speculative-num-draft-tokens: [1, 4]\n", 12, 38, "out of range: it must be >= 2"),
])
def test_values_sglang_would_reject_fail_at_their_line(tmp_path, space, line, col, msg):
    m = write(tmp_path, SGLANG_ENV, space, arms="[baseline, eagle3, ngram]")
    arm = space.split(":")[0]
    r = run_cli("bench", "tune", str(m), "--arm", arm, "--results", str(tmp_path / "res"))
    assert r.returncode == 2, r.stderr
    assert f"{m}:{line}:{col}:" in r.stderr and msg in r.stderr + "\n", r.stderr
    assert "hint:" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "res").exists()


def test_quickstart_space_checks():
    spec = load_spec(ROOT / "envs" / "matrices" / "quickstart.yaml")
    s = check_space(spec, load_spec(ROOT / "envs" / "local-cpu.yaml"), "ngram")
    assert len(s.candidates) == 12 and s.level == "request"
