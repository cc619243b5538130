"""The run's header says what its weights were (random or trained and pinned), from the archived Environment."""

from __future__ import annotations

from toolkit.results.report.run import weights_fact


def test_random_trained_and_unknown_weights_are_told_apart() -> None:
    assert weights_fact({"model": {"dummy": {"hidden_size": 64}}}).startswith("RANDOM")
    assert weights_fact({"dummy_models": {"/models/t": {}}}).startswith("RANDOM")
    pinned = weights_fact({"model": {"path": "toolkit:quickstart-model"}, "weights": {"toolkit:quickstart-model": "ab" * 32}})
    assert pinned.startswith("real (trained)") and "toolkit:quickstart-model abababababab" in pinned
    assert weights_fact({"model": {"path": "/models/x"}}) is None and weights_fact(None) is None
