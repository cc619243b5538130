"""Issue 43, did-you-mean: every refused Literal or Enum value of a spec (alone or as one member of a union)
gets `did you mean ...?` when a choice is close (one helper, toolkit.errors.did_you_mean, in the one error
formatter), and so does a misspelt arm where one is expected. `warmup: concurency` got "expected a valid
integer" and no suggestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import TINY_ENV
from toolkit.errors import SpecError, did_you_mean
from toolkit.specs import load_spec

HEAD = "kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline, ngram]\nworkloads: [chat]\n"
BODY = "concurrency: [1]\nrequests: 2\n"

# Matrix body (after HEAD and BODY, from line 8), the dotted key, the suggestion
MATRIX = {
    "warmup": ("warmup: concurency\n", "warmup", "concurrency"),
    "api": ("api: chatt\n", "api", "chat"),
    "api case": ("api: Chat\n", "api", "chat"),
    "target kind": ("target: {kind: locl}\n", "target.kind", "local"),
    "launcher": ("target: {launcher: procces}\n", "target.launcher", "process"),
    "arrival": ("arrival: {process: poison}\n", "arrival.process", "poisson"),
    "slurm runtime": ("target:\n  kind: slurm\n  slurm: {container_runtime: pyxsi}\n",
                      "target.slurm.container_runtime", "pyxis"),
    "baseline arm": ("baseline: ngarm\n", "", "ngram"),
}


@pytest.mark.parametrize("case", list(MATRIX))
def test_matrix_values_get_a_suggestion(tmp_path: Path, case: str) -> None:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    body, key, choice = MATRIX[case]
    if case == "arrival":
        body = body.replace("arrival", "rates: [1]\narrival").replace("", "")
    f = tmp_path / "m.yaml"
    f.write_text(HEAD + (BODY if case != "arrival" else "requests: 2\n") + body)
    with pytest.raises(SpecError) as info:
        load_spec(f)
    text = str(info.value)
    assert f"did you mean {choice!r}?" in text, (case, text)
    assert info.value.message.startswith(f"{key}: " if key else ""), (case, text)
    assert info.value.line and info.value.line >= 8, (case, text)


def test_environment_values_get_a_suggestion(tmp_path: Path) -> None:
    for src, dst, key, choice in (("engine: transformers", "engine: transformer", "engine", "transformers"),
                                  ("layers: 1,", "layers: 1, dtype: bflot16,", "model.dummy.dtype", "bfloat16")):
        f = tmp_path / "env.yaml"
        f.write_text(TINY_ENV.replace(src, dst))
        with pytest.raises(SpecError) as info:
            load_spec(f)
        assert info.value.message.startswith(f"{key}: expected ") and f"did you mean {choice!r}?" in str(
            info.value), str(info.value)


def test_nothing_close_lists_no_guess(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    f = tmp_path / "m.yaml"
    f.write_text(HEAD + BODY + "api: zzzz\n")
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert "did you mean" not in str(info.value) and "got 'zzzz'" in info.value.message, str(info.value)
    assert "'chat', 'completions' or 'generate'" in info.value.message


def test_the_helper() -> None:
    assert did_you_mean("concurency", ["concurrency"]) == "did you mean 'concurrency'?"
    assert did_you_mean("LOCAL", ["local", "hosts"]) == "did you mean 'local'?"
    assert did_you_mean("zzz", ["local", "hosts"]) is None


def test_a_misspelt_arm_at_plan_time(tmp_path: Path) -> None:
    """An arm that is not a preset of the environment: found by the run's plan (and validate's), at the arm's
    line, with the preset it is close to."""
    from toolkit.bench.plan import load_environment

    (tmp_path / "env.yaml").write_text(TINY_ENV)
    f = tmp_path / "m.yaml"
    f.write_text(HEAD.replace("[baseline, ngram]", "\n  - baseline\n  - ngarm") + BODY)
    with pytest.raises(SpecError) as info:
        load_environment(load_spec(f))
    assert info.value.line == 6 and info.value.hint == "did you mean 'ngram'?", str(info.value)


def test_validate_prints_the_suggestion(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    f = tmp_path / "m.yaml"
    f.write_text(HEAD + BODY + "warmup: concurency\n")
    r = run_cli("validate", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"FAIL {f}:8:" in r.stderr and "hint: did you mean 'concurrency'?" in r.stderr, r.stderr
