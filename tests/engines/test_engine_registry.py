"""One Engine per serving engine, looked up by name (toolkit/engines/__init__.py): nothing outside
toolkit/engines/ branches on an engine's name, an unknown name is refused with a did-you-mean, and a third
engine registered at run time is one that validate and the plan accept through the registry alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit import engines
from toolkit.engines import Engine, EngineFacts, KnobInfo, PresetMeaning
from toolkit.errors import ToolkitError
from toolkit.specs import load_spec

from tests.helpers import write_matrix

PKG = Path(__file__).resolve().parent.parent.parent / "toolkit"
# an engine's name compared, or an engine compared with a name: the Engine is asked instead
BRANCHES = [
    re.compile(r"\bengine\s*(==|!=)"),
    re.compile(r"\bengine\s+(not\s+)?in\s*[(\[{]"),
    re.compile(r"(==|!=)\s*[\"'](sglang|transformers|vllm)[\"']\s*(and|or|else|:|\))?\s*$"),
    re.compile(r"[\"'](sglang|transformers)[\"']\s*(==|!=)"),
    re.compile(r"\bengine\s*(==|!=|in)\s*[\"'(]"),
]
# `fmt == "sglang"` names a result file's format (results import), not an engine
ALLOWED = re.compile(r"\bfmt\s*(==|!=)|\[0\]\s*==\s*\"sglang\"")


def test_no_engine_branch_outside_the_engines() -> None:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path.is_relative_to(PKG / "engines"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if any(p.search(line) for p in BRANCHES) and not ALLOWED.search(line):
                found.append(f"{path.relative_to(PKG.parent)}:{n}: {line.strip()}")
    assert not found, "ask the Engine (toolkit.engines.get(name)) instead:\n" + "\n".join(found)


def test_the_pattern_list_catches_a_branch() -> None:
    for line in ('if env.engine == "sglang":', "if self.engine != 'transformers':", 'if engine in ("a", "b"):',
                 'x = A if env_spec.model.engine == "sglang" else B'):
        assert any(p.search(line) for p in BRANCHES), line


def test_the_registry_names_each_engine() -> None:
    assert engines.names()[:2] == ["sglang", "transformers"]
    sg, tf = engines.get("sglang"), engines.get("transformers")
    assert sg.builds_image and sg.reports_server_info and sg.supports_launcher("docker") and sg.acceptance == "metrics"
    assert tf.embedded and not tf.builds_image and not tf.supports_launcher("container") and tf.acceptance == "log"
    assert sg.knobs is sg.facts.knobs and tf.level == "request" and sg.level == "server"
    with pytest.raises(ToolkitError) as e:
        engines.get("sglan")
    assert "unknown engine 'sglan'" in e.value.message and "did you mean 'sglang'?" in e.value.hint
    with pytest.raises(ToolkitError) as e:
        engines.get("zzz")
    assert "sglang, transformers" in e.value.hint
    assert engines.lookup("zzz") is None and engines.lookup(None) is None


def test_server_info_is_read_by_the_engine() -> None:
    info = {"version": "0.5.17", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
            "max_running_requests": 48, "internal_states": [{"max_running_requests": 32,
                                                             "avg_spec_accept_length": 2.5}]}
    st = engines.get("sglang").server_state(info)
    assert st.max_running_requests == 32 and st.avg_spec_accept_length == 2.5
    assert st.speculative == {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}
    assert engines.get("transformers").server_state(info).said == ()
    from toolkit.serve.sglang import server_state

    assert server_state(info) == st  # the serve name is the engine's function


class FakeEngine(Engine):
    """A third engine: a process the toolkit starts (no image), no /server_info, request-level knobs."""

    name = "fakeengine"
    facts = EngineFacts("fakeengine", {"depth": KnobInfo("depth", "request", 1, "a fake knob")}, level="request")
    launchers = frozenset({"process", "docker"})
    knob_separator = "_"

    def meaning(self, env, arm: str) -> PresetMeaning:
        return PresetMeaning(self.name, speculative=bool((env.servers.get(arm) or {}).get("draft")),
                             algorithm="fake" if (env.servers.get(arm) or {}).get("draft") else None)


FAKE_ENV = """\
kind: Environment
name: fake
engine: fakeengine
servers:
  baseline: {}
  spec: {draft: 2}
"""


@pytest.fixture
def fake_engine():
    eng = engines.register(FakeEngine())
    try:
        yield eng
    finally:
        engines.unregister(eng.name)


def test_an_unregistered_engine_is_refused_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(FAKE_ENV)
    with pytest.raises(ToolkitError) as e:
        load_spec(tmp_path / "env.yaml")
    assert e.value.line == 3 and "engine: expected 'sglang', 'transformers' or 'vllm', got 'fakeengine'" in str(e.value)


def test_a_registered_third_engine_validates_and_plans(tmp_path: Path, fake_engine) -> None:
    from toolkit.bench.plan import plan_run
    from toolkit.cli import app
    from toolkit.engines import preset_meaning

    assert engines.get("fakeengine") is fake_engine
    m = write_matrix(tmp_path, """\
        arms: [baseline, spec]
        workloads: [coding]
        concurrency: [1]
        requests: 2
        output_len: 8
        """, env=FAKE_ENV)
    env_spec = load_spec(tmp_path / "env.yaml")
    assert env_spec.model.engine == "fakeengine" and not env_spec.warnings  # no sglang base image to pin
    assert preset_meaning(env_spec.model, "spec").algorithm == "fake"
    out = CliRunner().invoke(app, ["validate", str(tmp_path / "env.yaml"), str(m)])
    assert out.exit_code == 0, out.output
    plan = plan_run(load_spec(m))
    assert plan.engine == "fakeengine" and plan.build is None  # it builds no image
    assert [c.arm for c in plan.todo["spec"]] == ["spec"]
    kw = plan.launcher_kwargs(plan.slots[0], "spec", tmp_path)
    assert kw.kind == "docker"  # not embedded: a launcher of serve's, by kind
    from toolkit.bench.acceptance import Probe, probe_for

    assert type(probe_for(object(), "fakeengine", speculative=True, flushed=None, warmup=0)) is Probe
