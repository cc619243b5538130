"""The bad-input battery of issue 23: each case exits 2 through the real CLI with file:line, the hint that
says what is wrong, and no traceback; nothing is silently accepted or dropped."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli

ENV = textwrap.dedent("""\
    kind: Environment
    name: t-cpu
    engine: transformers
    model:
      dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}
    servers:
      baseline: {}
      ngram: {}
    request_params:
      ngram:
        generation_config: {prompt_lookup_num_tokens: 4}
    """)

MATRIX = textwrap.dedent("""\
    kind: Matrix
    name: t
    environment: env.yaml
    arms: [baseline, ngram]
    workloads: [coding, math]
    concurrency: [1, 2]
    output_len: 8
    requests: 3
    """)


def write(tmp: Path, env: str = ENV, matrix: str = MATRIX) -> tuple[Path, Path]:
    (tmp / "env.yaml").write_text(env)
    (tmp / "m.yaml").write_text(matrix)
    return tmp / "env.yaml", tmp / "m.yaml"


def bad(r, path: Path, line: int, *patterns: str) -> None:
    """Exit 2, `path:line:` named, every pattern in stderr, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    assert f"{path}:{line}:" in r.stderr, r.stderr
    for p in patterns:
        assert re.search(p, r.stderr), (p, r.stderr)


MATRIX_CASES = {
    # a level listed twice ran the c=1 cell twice: the second write died in a slot thread and c=2 never ran
    "concurrency twice": ("concurrency: [1, 2]", "concurrency: [1, 1, 2]", 6,
                          r"concurrency\[1\]: concurrency level 1 is listed twice \(also concurrency\[0\]\)"),
    # was silently de-duplicated: the run measured one coding workload and planned two
    "workload twice": ("workloads: [coding, math]", "workloads: [coding, math, coding]", 5,
                       r"workloads\[2\]: workload coding is listed twice"),
    "arm twice": ("arms: [baseline, ngram]", "arms: [baseline, ngram, baseline]", 4,
                  r"arms\[2\]: arm baseline is listed twice"),
    "workload entry named like a bundled one": (
        "workloads: [coding, math]", "workloads: [coding, {name: coding, path: mine.jsonl}]", 5,
        r"workloads\[1\]: workload coding is listed twice"),
}


@pytest.mark.parametrize("case", list(MATRIX_CASES))
def test_duplicates_in_a_matrix_are_errors_at_their_line(tmp_path: Path, case: str) -> None:
    old, new, line, pattern = MATRIX_CASES[case]
    _, m = write(tmp_path, matrix=MATRIX.replace(old, new))
    bad(run_cli("validate", str(m)), m, line, pattern, r"hint: list each")


def test_misspelt_generation_config_key_is_caught_with_did_you_mean(tmp_path: Path) -> None:
    """transformers' GenerationConfig keeps an unknown key and generate() never reads it: the arm ran without
    speculation and the report called it a speed-up."""
    env, m = write(tmp_path, env=ENV.replace("prompt_lookup_num_tokens: 4", "prompt_lookup_num_tokenz: 4"))
    for args in (("validate", str(env)), ("validate", str(m)), ("bench", "matrix", str(m), "--results",
                                                                 str(tmp_path / "results"))):
        r = run_cli(*args)  # the matrix's validation loads its environment, as the run does: the same error
        bad(r, env, 11, r"request_params\.ngram\.generation_config\.prompt_lookup_num_tokenz: "
                        r"'prompt_lookup_num_tokenz' is not a generation_config key of transformers \d",
            r"did you mean 'prompt_lookup_num_tokens'\?")
    assert not (tmp_path / "results").exists()  # refused before any archive


@pytest.mark.parametrize("dummy, pattern", [
    ("hidden_size: 30, intermediate_size: 64, layers: 1, heads: 4", r"heads \(4\) must divide hidden_size \(30\)"),
    ("hidden_size: 36, intermediate_size: 64, layers: 1, heads: 4", r"hidden_size / heads = 9 must be even"),
])
def test_dummy_model_shapes_transformers_refuses_are_validate_errors(tmp_path: Path, dummy: str, pattern: str) -> None:
    env, m = write(tmp_path, env=ENV.replace("hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2", dummy))
    bad(run_cli("validate", str(env)), env, 5, r"model\.dummy\.heads: " + pattern, r"hint: choose heads among")
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"))
    bad(r, env, 5, pattern)  # the run refuses it too, before transformers would die on it


def test_misspelt_required_key_is_reported_as_the_misspelling(tmp_path: Path) -> None:
    _, m = write(tmp_path, matrix=MATRIX.replace("concurrency:", "concurency:"))
    r = run_cli("validate", str(m))
    bad(r, m, 6, r"concurency: unknown key", r"did you mean 'concurrency'\?")
    r = run_cli("validate", str(m), "--json")
    doc = json.loads(r.stdout)[0]
    assert r.returncode == 2 and doc["line"] == 6 and "concurency: unknown key" in doc["error"]
    # concurrency is not required (`rates:` may replace it): a key that is shows the consequence too
    _, m2 = write(tmp_path, matrix=MATRIX.replace("workloads:", "workload:"))
    r2 = run_cli("validate", str(m2))
    bad(r2, m2, 5, r"workload: unknown key", r"did you mean 'workloads'\?")
    assert "required key is missing" in r2.stderr  # the consequence, named after the cause
    assert doc["hint"] == "did you mean 'concurrency'?"
    assert any("concurrency: required key is missing" in x for x in doc["also"])  # every error, in --json too


def test_tbt_ms_is_pointed_at_itl_ms_not_ttft_ms(tmp_path: Path) -> None:
    _, m = write(tmp_path, matrix=MATRIX + "slo:\n  tbt_ms: {p90: 50}\n")
    r = run_cli("validate", str(m))
    bad(r, m, 10, r"slo\.tbt_ms: unknown key", r"itl_ms", r"tpot_ms")
    assert "ttft_ms" not in r.stderr
    run = "results/sglang-h200/20261202T190515Z-52c8f2"
    r = run_cli("results", "slo", run, "--slo", "tbt_ms.p90=30")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "itl_ms" in r.stderr and "ttft_ms" not in r.stderr, r.stderr


def test_render_onto_an_existing_file_or_folder_is_a_clean_error(tmp_path: Path) -> None:
    env, _ = write(tmp_path)
    target = tmp_path / "existing"
    target.write_text("keep me\n")
    r = run_cli("render", "env", str(env), "-o", str(target))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{target} is a file" in r.stderr and "hint:" in r.stderr
    assert target.read_text() == "keep me\n"  # nothing already written lost
    r = run_cli("render", "env", str(env), "-o", str(target / "sub"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cannot make the output folder" in r.stderr
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("kind: Hosts\nname: h\nhosts:\n  a: {address: 10.0.0.1}\n")
    r = run_cli("render", "hosts", str(hosts), "-o", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "is a folder" in r.stderr


def test_reproduce_target_of_another_scheme_names_the_scheme(tmp_path: Path) -> None:
    r = run_cli("results", "reproduce", "latest", "--root", str(tmp_path), "--target", "ftp://gw.example/v1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "http:// or https://" in r.stderr and "ftp://" in r.stderr
    assert "spec file" not in r.stderr and "not found" not in r.stderr


def test_external_target_needs_no_model_block(tmp_path: Path) -> None:
    """The environment of an external target names presets only; a local run of it says what is missing."""
    env_text = "kind: Environment\nname: ext\nengine: transformers\nservers:\n  baseline: {}\n  ngram: {}\n"
    env, m = write(tmp_path, env=env_text, matrix=MATRIX + 'target: {kind: external, url: "http://127.0.0.1:9"}\n')
    r = run_cli("validate", str(env), str(m))
    assert r.returncode == 0, r.stderr
    local = tmp_path / "local.yaml"
    local.write_text(MATRIX)
    r = run_cli("bench", "matrix", str(local), "--results", str(tmp_path / "results"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "names no model" in r.stderr and "model: {dummy: {}}" in r.stderr
    assert not (tmp_path / "results").exists()
