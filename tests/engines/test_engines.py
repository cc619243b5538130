"""Engine knowledge has one home (toolkit/engines/): what a preset means to SGLang and to the embedded
engine, asked by spec, image, serve, bench and tune. Read from real specs (the committed environments) and
from the source itself (no other module spells an engine's flag)."""

from __future__ import annotations

import ast
from pathlib import Path

from toolkit.engines import engine_facts, preset_meaning, sglang, transformers
from toolkit.specs import load_spec
from toolkit.specs.environment import Environment

ROOT = Path(__file__).resolve().parent.parent.parent
PKG = ROOT / "toolkit"


def test_what_a_transformers_preset_means() -> None:
    env = Environment(kind="Environment", name="e", engine="transformers", model={"dummy": {}},
                      servers={"baseline": {}, "ngram": {}, "cb": {"continuous-batching": True}, "asst": {}},
                      request_params={"ngram": {"generation_config": {"prompt_lookup_num_tokens": 4}},
                                      "asst": {"generation_config": {"assistant_model": "/m"}}})
    assert [a for a in env.servers if preset_meaning(env, a).speculative] == ["ngram", "asst"]
    ngram = preset_meaning(env, "ngram")
    assert ngram.algorithm == "prompt lookup" and ngram.cap == 1 and ngram.dummy_weights and not ngram.cap_implicit
    assert preset_meaning(env, "cb").cap is None  # continuous batching: no one-at-a-time cap
    real = Environment.model_validate({**env.model_dump(), "model": {"path": "/models/x"}})
    assert not preset_meaning(real, "ngram").dummy_weights


def test_what_an_sglang_preset_means() -> None:
    sg = Environment(kind="Environment", name="s", base_image="x:1", sglang={"version": "0.5.23"},
                     servers={"baseline": {"tp-size": 8}, "eagle3": {"speculative-algorithm": "EAGLE3"},
                              "capped": {"speculative-algorithm": "NGRAM", "max-running-requests": 64},
                              "rand": {"model-path": "/m/t", "speculative-draft-model-path": "/m/d",
                                       "load-format": "dummy"}})
    base, eagle, capped, rand = (preset_meaning(sg, a) for a in ("baseline", "eagle3", "capped", "rand"))
    assert not base.speculative and base.cap is None and not base.cap_implicit
    assert eagle.speculative and eagle.algorithm == "EAGLE3" and eagle.cap == 48 and eagle.cap_implicit
    assert capped.cap == 64 and not capped.cap_implicit
    assert rand.dummy_weights and rand.reads == {"/m/t", "/m/d"} and not rand.speculative
    assert sglang.implicit_cap_warning("eagle3", sg.servers["eagle3"]) == (
        "servers.eagle3: speculative-algorithm EAGLE3 without max-running-requests: SGLang caps it at 48; "
        "set it explicitly")
    assert sglang.implicit_cap_warning("capped", sg.servers["capped"]) is None


def test_the_committed_h200_presets() -> None:
    """Every speculative preset of the H200 environment: an algorithm, and a cap the preset or SGLang sets."""
    env = load_spec(ROOT / "envs" / "sglang-0.5.17-h200.yaml").model
    spec = {a: preset_meaning(env, a) for a in env.servers if preset_meaning(env, a).speculative}
    assert spec, "the H200 environment has speculative presets"
    for arm, m in spec.items():
        assert m.algorithm == env.servers[arm]["speculative-algorithm"]
        assert m.cap == env.servers[arm].get("max-running-requests", 48)
        assert m.cap_implicit == ("max-running-requests" not in env.servers[arm])


def test_restart_or_request() -> None:
    """SGLang's knobs are server flags (a launch per value); the embedded engine's are request parameters."""
    assert engine_facts("sglang").level == "server"
    assert {k.level for k in engine_facts("sglang").knobs.values()} == {"server"}
    assert engine_facts("transformers").level == "request"
    assert {k.level for k in engine_facts("transformers").knobs.values()} == {"request"}


# the names that carry an engine's meaning in a preset: only toolkit/engines spells them (the archive's own
# field names, such as arm facts' speculative_algorithm, are the schema's)
FLAGS = {sglang.ALGORITHM, sglang.DRAFT_MODEL, sglang.MODEL, sglang.SERVED_NAME, sglang.MAX_RUNNING,
         sglang.LOAD_FORMAT, sglang.THRESHOLD, sglang.STEPS, sglang.TOPK, sglang.DRAFT, sglang.ADAPTIVE,
         sglang.REJECTION, sglang.DETERMINISTIC, transformers.PROMPT_LOOKUP,
         transformers.NGRAM_SIZE, transformers.ASSISTANT, transformers.CONTINUOUS_BATCHING,
         *engine_facts("sglang").knobs, *engine_facts("transformers").knobs}


def spelled_outside(flags: set[str]) -> list[str]:
    """file:line of every string constant equal to one of `flags` in toolkit/ outside toolkit/engines."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        if (PKG / "engines") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in flags:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return out


def test_engine_knowledge_has_one_home() -> None:
    """No module outside toolkit/engines reads an engine's flag by name: it asks preset_meaning, the
    engine's facts or a constant of toolkit/engines, so what a preset means is decided once."""
    assert len(FLAGS) >= 20 and "speculative-algorithm" in FLAGS
    bad = spelled_outside(FLAGS)
    assert not bad, "engine flags spelled outside toolkit/engines (ask toolkit.engines):\n  " + "\n  ".join(bad)


def test_the_one_home_check_bites() -> None:
    """The check names a module that reads a flag itself, with its line."""
    stray = PKG / "bench" / "_stray_engine_probe.py"
    stray.write_text('def f(preset):\n    return "speculative-algorithm" in preset\n')
    try:
        assert spelled_outside(FLAGS) == ["toolkit/bench/_stray_engine_probe.py:2: 'speculative-algorithm'"]
    finally:
        stray.unlink()


def test_every_consumer_asks_the_engines() -> None:
    """spec, image, serve, bench and tune each read engine knowledge from toolkit/engines (and the shared
    types the 48 cap), on a floor below all of them (tests/test_import_cycles.py)."""
    from tests.test_import_cycles import floor_of, imports, modules, package_of

    graph = imports(modules())
    asking = {package_of(m) for m, edges in graph.items() for t in edges
              if package_of(t) == "toolkit.engines"} - {"toolkit.engines"}
    assert {"toolkit.specs", "toolkit.image", "toolkit.serve", "toolkit.bench", "toolkit.tune",
            "toolkit.schema"} <= asking
    floor = floor_of()
    assert all(floor["toolkit.engines"] < floor[p] for p in asking)
