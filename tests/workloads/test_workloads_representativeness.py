"""Representativeness: with a training set of known mix (mostly coding and agentic), coding and
agentic workloads are close, encyclopedic is far, and the verdicts say why. match-training follows
the training mix."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.workloads.synth import MIX, write_training
from toolkit.workloads import load_workload
from toolkit.workloads.classify import classify
from toolkit.workloads.bundled import read_prompts
from toolkit.workloads.loader import allocate
from toolkit.workloads.represent import js_divergence, representativeness


@pytest.fixture(scope="module")
def train_file(tmp_path_factory) -> Path:
    return write_training(tmp_path_factory.mktemp("train") / "train.jsonl")


def _report(train_file, name):
    wl = load_workload(name, base_dir=Path("."), seed=0, training=train_file)
    return representativeness(read_prompts(train_file), wl.prompts, workload_name=name, workload_hash=wl.hash)


def test_training_mix_is_recovered_by_the_classifier(train_file):
    mix = Counter(classify(p).domain for p in read_prompts(train_file))
    assert mix == Counter(MIX)


@pytest.mark.parametrize("name", ["coding", "agentic"])
def test_in_domain_workloads_are_close(train_file, name):
    r = _report(train_file, name)
    assert r.verdict == "close", r.reason
    assert r.workload.domain_mix[name] == 1.0 and r.train.domain_mix[name] == MIX[name] / 100
    assert f"{name} 100%" in r.reason and f"{name} {MIX[name]}%" in r.reason


def test_encyclopedic_workload_is_far(train_file):
    r = _report(train_file, "encyclopedic")
    assert r.verdict == "far"
    assert r.js_domain == 1.0 and r.score >= 0.75
    assert r.reason.startswith("far from the drafter's training data")
    assert "encyclopedic 100%" in r.reason and "encyclopedic 0%" in r.reason
    close = _report(train_file, "coding")
    assert r.score > close.score and r.vocab_coverage < close.vocab_coverage


def test_match_training_draws_the_training_mix(train_file):
    a = load_workload("match-training", base_dir=Path("."), seed=3, training=train_file, n=40)
    b = load_workload("match-training", base_dir=Path("."), seed=3, training=train_file, n=40)
    assert [p.id for p in a.prompts] == [p.id for p in b.prompts] and a.hash == b.hash
    assert Counter(p.domain for p in a.prompts) == Counter(allocate(MIX, 40))
    r = representativeness(read_prompts(train_file), a.prompts)
    assert r.verdict == "close" and r.js_domain < 0.05


def test_js_divergence_bounds():
    assert js_divergence([1, 0], [1, 0]) == 0.0
    assert js_divergence([1, 0], [0, 1]) == 1.0
    assert 0 < js_divergence([0.5, 0.5], [0.9, 0.1]) < 0.2


def test_allocate_sums_to_n():
    assert allocate({"a": 1, "b": 1, "c": 1}, 10) == {"a": 4, "b": 3, "c": 3}
    assert sum(allocate({"coding": 45, "agentic": 40, "chat": 10, "math": 5}, 7).values()) == 7


def test_cli_reports_side_by_side_with_json_and_strict(train_file, cli):
    r = cli("bench", "representativeness", "--train", str(train_file), "-w", "coding", "-w", "encyclopedic", "--json")
    assert r.returncode == 0, r.stderr
    reports = json.loads(r.stdout)
    assert [x["workload"]["name"] for x in reports] == ["coding", "encyclopedic"]
    assert [x["verdict"] for x in reports] == ["close", "far"]
    assert set(reports[0]) >= {"train", "workload", "js_domain", "js_length", "score", "reason", "vocab_coverage",
                               "workload_hash"}
    text = cli("bench", "representativeness", "--train", str(train_file), "--workload", "encyclopedic")
    assert text.returncode == 0 and "verdict: FAR" in text.stdout and "length p50" in text.stdout
    strict = cli("bench", "representativeness", "--train", str(train_file), "-w", "encyclopedic", "--strict")
    assert strict.returncode == 1
    ok = cli("bench", "representativeness", "--train", str(train_file), "-w", "coding", "--strict")
    assert ok.returncode == 0, ok.stdout


def test_rule_classifier_on_the_hand_written_probe_set():
    """46 prompts phrased unlike the bundled templates, in all three formats (benchmarks/classifier_accuracy.py
    prints the confusion matrix). A floor, so a rule change that breaks generalisation fails here."""
    probe = read_prompts(Path(__file__).parent / "data" / "classifier_probe.jsonl")
    right = Counter(p.domain for p in probe if classify(p).domain == p.domain)
    total = Counter(p.domain for p in probe)
    assert sum(right.values()) / len(probe) >= 0.85, (right, total)
    assert all(right[d] / total[d] >= 0.6 for d in total), (right, total)


def test_matrix_match_training_needs_training_data_and_resolves_from_the_matrix_folder(train_file, tmp_path):
    from toolkit.specs.matrix import Matrix

    base = dict(kind="Matrix", name="m", environment="env.yaml", arms=["a"], concurrency=[1], requests=4)
    with pytest.raises(ValueError, match="training_data"):
        Matrix(**base, workloads=["coding", "match-training"])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(train_file.read_text())
    m = Matrix(**base, workloads=["coding", {"name": "match-training", "sample": 20}], training_data="data/train.jsonl")
    wl = load_workload(m.workloads[1], base_dir=tmp_path, seed=m.seed, training=Path(m.training_data))
    assert wl.name == "match-training" and len(wl.prompts) == 20
    assert Counter(p.domain for p in wl.prompts) == Counter(allocate(MIX, 20))
