"""Issue 43, values of a fixed form: a Slurm `sbatch:` or `mounts:` item of the wrong form was answered with the
bare regex (`does not match the pattern ^/[^\\s,:]*:/...`). Every pattern-checked value of a spec carries a
description of its form with an example, and the one error formatter (toolkit.specs.validation_error) says the
value is not of the form its key takes, with that description as the hint, never the regex."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, get_args, get_origin

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tests.helpers import TINY_ENV
from toolkit.errors import SpecError
from toolkit.specs import KINDS, load_spec


def _pattern(metadata) -> bool:
    return any(getattr(m, "pattern", None) for m in metadata)


def _pattern_fields() -> list[tuple[str, str | None]]:
    """(where, the description the error formatter shows) of every pattern-checked value of every spec kind."""
    out, seen = [], set()

    def walk(t, where: str) -> None:
        if get_origin(t) is Annotated:
            base, *metas = get_args(t)
            out.extend((where, fi.description) for fi in metas if isinstance(fi, FieldInfo) and _pattern(fi.metadata))
            walk(base, where)
        elif isinstance(t, type) and issubclass(t, BaseModel):
            if t not in seen:
                seen.add(t)
                for name, f in t.model_fields.items():
                    if _pattern(f.metadata):
                        out.append((f"{t.__name__}.{name}", f.description))
                    walk(f.annotation, f"{t.__name__}.{name}")
        else:
            for a in get_args(t):
                walk(a, where)

    for model in KINDS.values():
        walk(model, "")
    return out


def test_every_pattern_has_a_form_and_an_example() -> None:
    fields = _pattern_fields()
    assert len(fields) >= 20  # the walk found them
    for where, description in fields:
        assert description and ("e.g." in description or "sha256sum" in description), where


SLURM = ("kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline]\nworkloads: [chat]\nrequests: 2\n"
         "concurrency: [1]\ntarget:\n  kind: slurm\n")  # lines 1-9
CONTAINER = SLURM.replace("  kind: slurm\n", "  kind: slurm\n  launcher: container\n") + \
    "  slurm:\n    container_image: x.sif\n"

# spec text, its bad line, words of the hint
CASES = {
    "sbatch without a dash": (SLURM + "  slurm: {sbatch: [qos=high]}\n", 10, "e.g. '--qos=high'"),
    "sbatch empty dash": (SLURM + "  slurm: {sbatch: ['-']}\n", 10, "starting with - or --"),
    "sbatch a bare word": (SLURM + "  slurm: {sbatch: [exclusive]}\n", 10, "--qos=high"),
    "mount relative source": (CONTAINER + "    mounts: [models:/models]\n", 13, "e.g. /models:/models:ro"),
    "mount relative target": (CONTAINER + "    mounts: ['/models:models']\n", 13, "SRC:DST"),
    "mount no target": (CONTAINER + "    mounts: [/models]\n", 13, "SRC:DST"),
    "mount bad mode": (CONTAINER + "    mounts: ['/models:/models:rx']\n", 13, ":ro|:rw"),
    "mount a space": (CONTAINER + "    mounts: ['/my models:/models']\n", 13, "without spaces"),
    "mount a comma": (CONTAINER + "    mounts: ['/a,b:/models']\n", 13, "commas"),
    "partition two words": (SLURM + "  slurm: {partition: 'gpu big'}\n", 10, "e.g. gpu"),
    "account a quote": (SLURM + "  slurm: {account: \"l'm\"}\n", 10, "no spaces or quotes"),
    "time limit in hours": (SLURM + "  slurm: {time_limit: 2h}\n", 10, "e.g. '2:00:00'"),
    "mem with a space": (SLURM + "  slurm: {mem: 200 G}\n", 10, "e.g. 200G"),
    "gres with a space": (SLURM + "  slurm: {gres: 'gpu: 8'}\n", 10, "e.g. gpu:rtx6000:8"),
    "gpus with a space": (SLURM.replace("  kind: slurm\n", "  kind: local\n  gpus: ['0, 1']\n"), 10, "e.g. '0,1'"),
    "api key env with a dash": (SLURM.replace("  kind: slurm\n", "  kind: external\n  url: http://h:1\n"
                                                              "  api_key_env: MY-KEY\n"), 11, "OPENAI_API_KEY"),
    "a matrix name in capitals": (SLURM.replace("name: t", "name: My Matrix"), 2, "e.g. chat-h100"),
    "an arm with a space": (SLURM.replace("[baseline]", "['base line']"), 4, "lower-case name"),
    "a tune knob in capitals": (SLURM.replace("target:\n  kind: slurm\n", "tune:\n  space:\n    baseline:\n"
                                                                        "      Speculative: [1]\n"), 11,
                                "e.g. speculative-num-steps"),
}

ENV = TINY_ENV.replace("engine: transformers\n", "engine: transformers\npython: '3'\n")  # line 4
ENV_CASES = {
    "python without a minor": (ENV, 4, "e.g. 3.12"),
    "cuda without a minor": (TINY_ENV.replace("engine: transformers\n", "engine: transformers\ncuda: '13'\n"), 4,
                             "e.g. 13.0"),
    "a patch sha256 in capitals": (TINY_ENV + "weights: {draft: " + "A" * 64 + "}\n", 13, "sha256sum"),
}


def _check(path: Path, line: int, hint: str) -> None:
    with pytest.raises(SpecError) as e:
        load_spec(path)
    exc = e.value
    assert (exc.file, exc.line) == (path, line), str(exc)
    assert "is not of the form this key takes" in exc.message, exc.message
    assert "pattern" not in str(exc) and "^" not in str(exc), str(exc)
    assert exc.hint and exc.hint.startswith("expected ") and hint in exc.hint, exc.hint


@pytest.mark.parametrize("case", list(CASES))
def test_a_matrix_value_of_the_wrong_form_gets_its_form_and_an_example(tmp_path: Path, case: str) -> None:
    text, line, hint = CASES[case]
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    (tmp_path / "m.yaml").write_text(text)
    _check(tmp_path / "m.yaml", line, hint)


@pytest.mark.parametrize("case", list(ENV_CASES))
def test_an_environment_value_of_the_wrong_form_gets_its_form(tmp_path: Path, case: str) -> None:
    text, line, hint = ENV_CASES[case]
    (tmp_path / "env.yaml").write_text(text)
    _check(tmp_path / "env.yaml", line, hint)
