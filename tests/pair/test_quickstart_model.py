"""The quickstart's trained target (toolkit/_data/quickstart-model/, the `quickstart` recipe; docs/pair.md):
the shipped folder is the recipe's model, small, pinned by the environment, loads in the embedded engine, and
its n-gram (prompt lookup) acceptance differs by domain in a real run of the engine: higher on coding prompts
(an answer repeats the prompt's identifiers) than on encyclopedic ones."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from toolkit.fsutil import folder_digest
from toolkit.pair.recipes import recipe
from toolkit.specs import load_spec, packaged_dir
from toolkit.results import compact

MODEL = ROOT / "toolkit" / "_data" / "quickstart-model"
ENV = ROOT / "envs" / "local-cpu-pair.yaml"


def test_the_shipped_model_is_the_quickstart_recipe_small_and_pinned():
    r = recipe("quickstart")
    cfg = json.loads((MODEL / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["vocab_size"],
            cfg["intermediate_size"]) == (r.hidden, r.layers, r.heads, r.vocab_size, r.intermediate)
    size = sum(p.stat().st_size for p in MODEL.rglob("*") if p.is_file())
    assert size < 4 * 2**20, size
    assert (MODEL / "model.safetensors").is_file() and (MODEL / "tokenizer.json").is_file()
    assert "chat_template" in (MODEL / "tokenizer_config.json").read_text() or (MODEL / "chat_template.jinja").is_file()
    record = json.loads((MODEL / "pair.json").read_text())
    assert record["recipe"] == json.loads(json.dumps(r.record()))  # the recipe it was trained with is the one named here
    # the environment serves it by its packaged name and pins exactly these files
    spec = load_spec(ENV)
    env = spec.model
    assert env.model.path == "toolkit:quickstart-model" and env.engine == "transformers"
    assert spec.path_of(("model", "path")) == packaged_dir() / "quickstart-model" == MODEL.resolve()
    assert env.weights == {"toolkit:quickstart-model": folder_digest(MODEL)}
    # and the quickstart runs on it
    assert load_spec(ROOT / "envs" / "matrices" / "quickstart.yaml").model.environment == "../local-cpu-pair.yaml"


def test_greedy_answers_are_no_loops_in_any_domain():
    """The trained target's greedy answers to the bundled prompts are text, not one token repeated: the
    acceptance differences below come from the prompts, not from a degenerate model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from toolkit.workloads.bundled import bundled

    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    model = transformers.AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
    for domain in ("coding", "encyclopedic"):
        for p in bundled(domain)[:3]:
            ids = tok.apply_chat_template(p.messages, tools=p.tools, add_generation_prompt=True, return_tensors="pt")
            ids = ids["input_ids"] if hasattr(ids, "keys") else ids
            with torch.no_grad():
                out = model.generate(ids, max_new_tokens=48, do_sample=False)[0, ids.shape[1]:].tolist()
            assert len(out) >= 8, (domain, out)
            assert len(set(out)) >= len(out) // 4, (domain, tok.decode(out))  # not a loop of a few tokens


@pytest.mark.slow
def test_ngram_acceptance_differs_by_domain_on_the_engine(tmp_path: Path):
    """A reduced quickstart on the real embedded engine (< 60 s on 2 cores): the n-gram arm's acceptance
    (accepted tokens per step, the engine's own count) is higher on coding than on encyclopedic prompts."""
    m = tmp_path / "q.yaml"
    m.write_text(textwrap.dedent(f"""\
        extends: {ROOT / "envs" / "matrices" / "quickstart.yaml"}
        name: quick
        requests: 6
        warmup: 1
        output_len: 32
        """))
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "res"), "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    cells = json.loads(compact.read_text(run / "summary.json"))["cells"]
    acc = {(c["arm"], c["domain"]): c["metrics"]["accept_length"]["mean"] for c in cells if c["status"] == "ok"}
    assert set(acc) == {(a, d) for a in ("baseline", "ngram") for d in ("coding", "encyclopedic")}, acc
    assert acc["baseline", "coding"] == acc["baseline", "encyclopedic"] == 1.0
    assert acc["ngram", "coding"] > acc["ngram", "encyclopedic"] + 0.3, acc
    assert not re.search(r"random-weights", (run / "report.md").read_text())
