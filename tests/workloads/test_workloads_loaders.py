"""Loaders: each format loads a valid file and rejects a malformed one with file and line;
seeded sampling, holdout, bundled workloads, hashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.errors import ToolkitError
from toolkit.specs.matrix import Workload
from toolkit.workloads import BUNDLED, load_workload
from toolkit.workloads.formats import approx_tokens, read_jsonl
from toolkit.workloads.gen import DATA_DIR, main as gen_main, render, generate

SHAREGPT = {"conversations": [{"from": "system", "value": "Be brief."},
                              {"from": "human", "value": "Write a haiku about rain."},
                              {"from": "gpt", "value": "Soft rain on the roof / the gutters hum a low song / tea cools by the door"}]}
OPENAI = {"messages": [{"role": "user", "content": "What is the weather in Oslo?"},
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                       {"role": "tool", "tool_call_id": "c1", "content": "{\"temp_c\": 4}"}],
          "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]}
PLAIN = {"prompt": "Translate 'good morning' to French.", "completion": "Bonjour."}

# (format, a valid record, a malformed line that must be rejected, words the error must contain)
CASES = [
    ("sharegpt", SHAREGPT, json.dumps({"conversations": [{"from": "narrator", "value": "x"}]}), "narrator"),
    ("sharegpt", SHAREGPT, json.dumps({"conversations": [{"from": "human"}]}), "`value`"),
    ("openai", OPENAI, json.dumps({"messages": [{"role": "user", "content": 42}]}), "content must be a string"),
    ("openai", OPENAI, json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}), "function name"),
    ("plain", PLAIN, json.dumps({"prompt": ""}), "empty"),
    ("plain", PLAIN, '{"prompt": "unterminated', "not valid JSON"),
    ("plain", PLAIN, json.dumps({"question": "x"}), "unknown record shape"),
]


def _write(path: Path, records: list, extra_line: str | None = None, at: int = 2) -> Path:
    lines = [json.dumps(r) for r in records]
    if extra_line is not None:
        lines.insert(at - 1, extra_line)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("fmt,valid,bad,words", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_loader_accepts_valid_and_rejects_malformed_with_file_and_line(tmp_path, fmt, valid, bad, words):
    good = _write(tmp_path / f"{fmt}.jsonl", [valid, valid | {"id": "second"}])
    items = read_jsonl(good)
    assert len(items) == 2 and items[1].prompt.id == "second"

    broken = _write(tmp_path / f"bad-{fmt}.jsonl", [valid, valid | {"id": "b"}, valid | {"id": "c"}], bad, at=3)
    with pytest.raises(ToolkitError) as exc:
        read_jsonl(broken)
    assert exc.value.line == 3 and Path(exc.value.file) == broken
    assert words in exc.value.message
    assert f"bad-{fmt}.jsonl:3" in str(exc.value)


def test_formats_convert_to_prompts(tmp_path):
    items = read_jsonl(_write(tmp_path / "mix.jsonl", [SHAREGPT, OPENAI, PLAIN]))
    share, oai, plain = (it.prompt for it in items)
    # a final assistant turn is the reference completion: removed, its length is the target
    assert [m["role"] for m in share.messages] == ["system", "user"]
    assert items[0].completion.startswith("Soft rain")
    assert share.target_output_len == approx_tokens(items[0].completion) == 18  # 16 words, 2 slashes
    assert oai.tools[0]["function"]["name"] == "weather" and oai.messages[-1]["role"] == "tool"
    assert plain.prompt.startswith("Translate") and plain.messages is None and items[2].completion == "Bonjour."
    assert share.id == "mix-1" and plain.domain == "mix"


def test_cli_names_file_and_line_of_a_malformed_training_file(tmp_path, cli):
    bad = _write(tmp_path / "train.jsonl", [PLAIN, PLAIN | {"id": "x"}], "[1, 2]", at=2)
    r = cli("bench", "representativeness", "--train", str(bad), "--workload", "coding")
    assert r.returncode == 2, r.stderr
    assert f"{bad}:2" in r.stderr and "expected a JSON object" in r.stderr
    assert "Traceback" not in r.stderr


def test_duplicate_ids_and_empty_files_are_rejected(tmp_path):
    with pytest.raises(ToolkitError, match="duplicate id 'a'") as exc:
        read_jsonl(_write(tmp_path / "dup.jsonl", [PLAIN | {"id": "a"}, PLAIN | {"id": "a"}]))
    assert exc.value.line == 2
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ToolkitError, match="no records"):
        read_jsonl(tmp_path / "empty.jsonl")


def test_bundled_workloads_have_80_varied_labelled_prompts():
    for name in BUNDLED:
        wl = load_workload(name, base_dir=Path("."), seed=0)
        assert len(wl.prompts) >= 80, name
        assert {p.domain for p in wl.prompts} == {name}
        assert len({p.id for p in wl.prompts}) == len(wl.prompts)
        lengths = sorted(len(p.as_text()) for p in wl.prompts)
        assert lengths[-1] >= 3 * lengths[0], f"{name}: prompt lengths barely vary"
        assert all(p.target_output_len >= 16 for p in wl.prompts)
    agentic = load_workload("agentic", base_dir=Path("."), seed=0).prompts
    assert all(p.tools for p in agentic)
    assert all(any(m.get("tool_calls") for m in p.messages) and any(m["role"] == "tool" for m in p.messages)
               for p in agentic)
    coding = load_workload("coding", base_dir=Path("."), seed=0).prompts
    assert sum("```" in p.as_text() for p in coding) >= 60


def test_committed_data_equals_a_fresh_generation(capsys):
    assert gen_main(["--check"]) == 0, capsys.readouterr().out
    assert (DATA_DIR / "math.jsonl").read_text() == render(generate("math"))


def test_seeded_sampling_is_stable_and_seed_dependent():
    a = load_workload("coding", base_dir=Path("."), seed=1, n=20)
    b = load_workload("coding", base_dir=Path("."), seed=1, n=20)
    c = load_workload("coding", base_dir=Path("."), seed=2, n=20)
    assert [p.id for p in a.prompts] == [p.id for p in b.prompts] and a.hash == b.hash
    assert len(a.prompts) == 20 and [p.id for p in a.prompts] != [p.id for p in c.prompts]
    assert a.hash != c.hash
    with pytest.raises(ToolkitError, match="only 100 are available"):
        load_workload("coding", base_dir=Path("."), seed=1, n=101)


def test_holdout_excludes_prompts_in_the_training_file_by_normalised_hash(tmp_path):
    wl_file = _write(tmp_path / "mine.jsonl", [{"id": f"q{i}", "prompt": f"Question number {i}: why?"} for i in range(10)])
    # the training file holds three of them in another format, case and spacing
    train = _write(tmp_path / "train.jsonl", [
        {"conversations": [{"from": "human", "value": "QUESTION   number 3:  why?"}, {"from": "gpt", "value": "ok"}]},
        {"messages": [{"role": "user", "content": "question number 5: why?\n"}]},
        {"prompt": "Question number 7: why?", "completion": "ok"},
        {"prompt": "Something else entirely"}])
    wl = load_workload(Workload(name="mine", path="mine.jsonl", holdout="train.jsonl"), base_dir=tmp_path, seed=0)
    assert sorted(p.id for p in wl.prompts) == [f"q{i}" for i in (0, 1, 2, 4, 6, 8, 9)]
    assert wl.excluded == 3 and "minus 3 prompts" in wl.source
    sampled = load_workload(Workload(name="mine", path=str(wl_file), holdout=str(train), sample=4), base_dir=tmp_path, seed=0)
    assert len(sampled.prompts) == 4 and {p.id for p in sampled.prompts} <= {p.id for p in wl.prompts}


def test_workload_hash_is_stable_and_changes_with_content(tmp_path):
    f = _write(tmp_path / "w.jsonl", [PLAIN, PLAIN | {"id": "two", "prompt": "Say hi."}])
    h1 = load_workload(str(f), base_dir=tmp_path, seed=0).hash
    assert h1 == load_workload(str(f), base_dir=tmp_path, seed=9).hash  # no sampling: seed does not matter
    assert h1 == load_workload(Workload(name="w", path="w.jsonl"), base_dir=tmp_path, seed=0).hash
    _write(f, [PLAIN, PLAIN | {"id": "two", "prompt": "Say hi!"}])
    assert load_workload(str(f), base_dir=tmp_path, seed=0).hash != h1
    # the bundled hash is pinned by the committed data
    assert load_workload("math", base_dir=tmp_path, seed=0).hash == load_workload("math", base_dir=tmp_path, seed=5).hash


def test_unknown_workload_and_missing_training_are_clear_errors(tmp_path):
    with pytest.raises(ToolkitError, match="unknown bundled workload 'poetry'"):
        load_workload("poetry", base_dir=tmp_path, seed=0)
    with pytest.raises(ToolkitError, match="needs the drafter's training data"):
        load_workload("match-training", base_dir=tmp_path, seed=0)
    with pytest.raises(ToolkitError, match="not found"):
        load_workload(Workload(name="x", path="nope.jsonl"), base_dir=tmp_path, seed=0)


def test_holdout_that_leaves_nothing_is_a_clear_error(tmp_path, cli):
    f = _write(tmp_path / "w.jsonl", [PLAIN, PLAIN | {"id": "b"}])
    r = cli("bench", "representativeness", "--train", str(f), "-w", str(f), "--holdout")
    assert r.returncode == 2 and "all 2 prompts are also in the holdout file" in r.stderr, r.stderr
