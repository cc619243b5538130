"""One hash policy, declared on each field (toolkit.specs.base.Hash) and read by spec_hash: `never` fields (a
Matrix's slo and tune) are not hashed, `omit-default` fields (added after hashing began) leave a spec that does
not set them with its old hash. The hash of a matrix written before any of them is pinned."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from toolkit.specs import Environment, Matrix, hash_policy, load_spec, spec_hash

ROOT = Path(__file__).resolve().parents[2]
BASE = ("kind: Matrix\nname: pinned\nenvironment: env.yaml\narms: [baseline, ngram]\n"
        "workloads: [coding, {name: mine, path: prompts.jsonl}]\nconcurrency: [1, 4]\noutput_len: 8\nrequests: 4\n")
PINNED = "75eb80d43d94b1615b938b28303083d13dc3d579b0f6aafd6707e2ebd33605f3"  # tests/specs/test_spec_dummy_hash.py's
SLO = "slo:\n  ttft_ms: {p90: 1000}\n  attainment: 0.9\n"
TUNE = "tune:\n  space:\n    ngram:\n      prompt_lookup_num_tokens: [2, 4]\n  budget: 2\n"


@pytest.fixture
def hash_of(tmp_path):
    (tmp_path / "env.yaml").write_text(
        "kind: Environment\nname: pinned-cpu\nengine: transformers\nmodel:\n"
        "  dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}\n"
        "servers:\n  baseline: {}\n  ngram: {}\n")
    (tmp_path / "prompts.jsonl").write_text('{"id": "p0", "domain": "mine", "prompt": "def f(x):"}\n')

    def of(extra: str = "", base: str = BASE) -> str:
        m = tmp_path / "m.yaml"
        m.write_text(base + extra)
        return spec_hash(load_spec(m))

    return of


def test_the_declared_policies():
    """Each policy is on its field; a field with none is hashed. A new field that must keep old hashes declares
    `omit-default` here, in the model, and nowhere else."""
    declared = {(k.__name__, n): hash_policy(k, n) for k in (Matrix, Environment) for n in k.model_fields
                if hash_policy(k, n)}
    assert declared == {("Matrix", "slo"): "never", ("Matrix", "tune"): "never",
                        ("Matrix", "launches"): "omit-default", ("Matrix", "workers"): "omit-default",
                        ("Matrix", "warmup_launch"): "omit-default", ("Matrix", "launches_auto"): "omit-default",
                        ("Matrix", "concurrency"): "omit-default", ("Matrix", "rates"): "omit-default",
                        ("Matrix", "arrival"): "omit-default", ("Matrix", "max_concurrency"): "omit-default",
                        ("Matrix", "sweep"): "omit-default", ("Matrix", "synthetic_acceptance"): "omit-default",
                        ("Matrix", "ignore_eos"): "omit-default",
                        ("Environment", "dummy_models"): "omit-default",
                        ("Environment", "weights"): "omit-default"}


def test_never_hashed_fields_leave_the_hash(hash_of):
    assert hash_of() == PINNED
    assert hash_of(SLO) == PINNED
    assert hash_of(TUNE) == PINNED
    assert hash_of(SLO + TUNE) == PINNED


def test_omit_default_fields_hash_only_off_their_default(hash_of):
    assert hash_of("launches: 1\n") == PINNED
    assert hash_of("launches: 2\n") != PINNED
    assert hash_of("workers: 2\n") != PINNED
    assert hash_of("workers: 2\n") != hash_of("workers: 3\n")
    assert hash_of("ignore_eos: false\n") == PINNED and hash_of("ignore_eos: true\n") != PINNED


SWEPT = "59bde4620b0dbf3a1814447316143b802cacbb0365f0c26a5e3861207c329c45"  # BASE with `sweep: {points: 3}`,
# hashed before `sweep.spacing` existed


def test_a_sweep_matrix_keeps_its_hash_at_linear_spacing(hash_of):
    def of(sweep: str) -> str:
        return hash_of(base=BASE.replace("concurrency: [1, 4]\n", f"sweep: {sweep}\n"))

    assert of("{points: 3}") == of("{points: 3, spacing: linear}") == SWEPT
    assert of("{points: 3, spacing: geometric}") != SWEPT


def test_tune_stays_in_the_archived_matrix(hash_of, tmp_path):
    """A never-hashed field is still part of the spec: the manifest's resolved matrix (its model_dump) keeps the
    tune block, as it keeps slo."""
    hash_of(SLO + TUNE)
    doc = load_spec(tmp_path / "m.yaml").model.model_dump(mode="json")
    assert doc["tune"]["space"] == {"ngram": {"prompt_lookup_num_tokens": [2, 4]}} and doc["slo"]["attainment"] == 0.9
    assert Matrix.model_validate(doc).tune.budget == 2  # and reads back


def test_no_second_mechanism_keeps_a_field_out_of_the_hash():
    """No class-level lists of hashed-out fields and no pydantic `exclude=True` (which would also drop the field
    from every dump, so from the archive) in the spec models."""
    bad = []
    for path in sorted((ROOT / "toolkit/specs").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id.startswith("HASH_"):
                bad.append(f"{path.name}:{node.lineno} {node.id}")
            if isinstance(node, ast.keyword) and node.arg == "exclude" and isinstance(node.value, ast.Constant) \
                    and node.value.value is True:
                bad.append(f"{path.name}:{node.lineno} exclude=True")
    assert not bad, bad
