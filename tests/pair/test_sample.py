"""`python -m toolkit.pair sample`: the drafter's training prompts of a prepared folder (the `test` recipe) as a
training-data file that representativeness reads, with the prompts the recipe wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from toolkit.pair.__main__ import main  # noqa: E402
from toolkit.pair.corpus import render_chat  # noqa: E402
from toolkit.pair.prepare import _prompt_sets, prepare  # noqa: E402
from toolkit.pair.recipes import recipe  # noqa: E402
from toolkit.pair.sample import parse_rendered  # noqa: E402


@pytest.fixture(scope="module")
def prep(tmp_path_factory) -> Path:
    if not Path("/usr/share/dictd/gcide.dict.dz").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("dict-gcide and dict-wn are missing: tests/run.sh installs them")
        pytest.skip("Debian's dict-gcide and dict-wn (tests/run.sh installs them)")
    out = tmp_path_factory.mktemp("pair") / "prep"
    prepare(out, recipe("test"), log=lambda *_: None)
    return out


def test_parse_rendered_inverts_render_chat() -> None:
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi\nthere"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "{\"x\": 1}"}]
    tools = [{"type": "function", "function": {"name": "f"}}]
    got = parse_rendered(render_chat(msgs, tools, True))
    assert got["tools"] == tools
    assert [(m["role"], m["content"]) for m in got["messages"]] == [
        ("system", "be brief"), ("user", "hi\nthere"), ("assistant", "f {}"), ("tool", "{\"x\": 1}")]
    cut = parse_rendered("of a cut turn<|end|>\n<|assistant|>\n")  # cut by the PROMPT_MAX window
    assert cut["messages"] == [{"role": "user", "content": "of a cut turn"}]


def test_sample_writes_the_drafters_prompts(prep: Path, tmp_path: Path, capsys) -> None:
    from toolkit.workloads.bundled import read_prompts
    from toolkit.workloads.represent import representativeness
    from toolkit.workloads.loader import load_workload

    out = tmp_path / "sample.jsonl"
    assert main(["sample", str(prep), str(out), "--n", "3"]) == 0
    assert "wrote 6 prompts" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["domain"] for r in rows] == ["coding"] * 3 + ["agentic"] * 3
    want = _prompt_sets(recipe("test"))
    for r in rows:  # the user turns the recipe wrote, decoded back
        i = int(r["id"].rsplit("-", 1)[1])
        messages, _ = want[f"draft-{r['domain']}"][i]
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert [m["content"] for m in r["messages"] if m["role"] == "user"][-1] == users[-1].strip()
    train = read_prompts(out)  # the format training_data: reads
    assert len(train) == 6
    coding = load_workload("coding", base_dir=tmp_path, seed=0)
    rep = representativeness(train, coding.prompts)
    assert rep.verdict == "close" and rep.train.domain_mix["coding"] > 0
    same = tmp_path / "again.jsonl"
    assert main(["sample", str(prep), str(same), "--n", "3"]) == 0 and same.read_bytes() == out.read_bytes()


def test_sample_refuses_a_folder_without_manifest(tmp_path: Path, capsys) -> None:
    assert main(["sample", str(tmp_path), str(tmp_path / "x.jsonl")]) == 2
    assert "no manifest.json" in capsys.readouterr().err
