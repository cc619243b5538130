"""The drafter's acceptance on a workload's prompts as the server renders them, offline (CPU is enough).

    python benchmarks/pair_gpu/served_acceptance.py PAIR [--domains coding,agentic,encyclopedic] [--n 24]
        [--tokens 128] [--template FILE]

PAIR is a trained pair (target/, draft/: `python -m toolkit.pair train`, or `.pairw/` pieces untarred). Each
bundled workload prompt is put in the form SGLang 0.5.17 hands the chat template (toolkit.pair.corpus.server_form:
tool-call arguments parsed into mappings, tools as pydantic dumps), rendered with the target's own template (or
--template FILE, e.g. the pair's first template) with the generation prompt, and the drafter's acceptance is
measured as toolkit.pair.train.acceptance measures it (greedy, past end of turn, a chain of `--steps`). Prints
which weights (real: a trained pair, with pair.json's digests) and template, then one line per domain: mean accepted length per verify step, and how many served prompts differ from render_chat's
text (the text the pair was trained on). Figures, not a test: docs/lab/pair.md says what they showed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def load_pair(pair: Path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    from toolkit.pair.train import Draft

    target = AutoModelForCausalLM.from_pretrained(str(pair / "target"), torch_dtype=torch.float32).eval()
    tok = PreTrainedTokenizerFast.from_pretrained(str(pair / "target"))
    cfg = json.loads((pair / "draft" / "config.json").read_text())
    draft = Draft(cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"], cfg["vocab_size"])
    draft.load_state_dict({k: v.float() for k, v in load_file(str(pair / "draft" / "model.safetensors")).items()})
    return target, draft.eval(), tok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pair", type=Path)
    ap.add_argument("--domains", default="coding,agentic,encyclopedic")
    ap.add_argument("--n", type=int, default=24, help="prompts per domain (the first N of the bundled workload)")
    ap.add_argument("--tokens", type=int, default=128, help="answer tokens (the matrices' output_len)")
    ap.add_argument("--steps", type=int, default=3, help="draft chain length (the preset's 3)")
    ap.add_argument("--template", type=Path, help="a chat template to render with instead of the target's own")
    a = ap.parse_args(argv)

    from toolkit.pair.corpus import EOS, render_chat, server_form
    from toolkit.pair.recipes import recipe
    from toolkit.pair.train import acceptance
    from toolkit.workloads.bundled import bundled

    target, draft, tok = load_pair(a.pair)
    record = a.pair / "pair.json"
    weights = json.loads(record.read_text()).get("weights", {}) if record.is_file() else {}
    print(f"real weights: the trained pair at {a.pair} ("
          + (", ".join(f"{k} {v[:12]}" for k, v in weights.items()) or "no pair.json: digests unknown")
          + f"); template: {a.template or 'the target folder'}", flush=True)
    if a.template:
        tok.chat_template = a.template.read_text()
    rec = dataclasses.replace(recipe("gpu"), eval_tokens=a.tokens, eval_steps=a.steps)
    pad = tok.convert_tokens_to_ids(EOS)
    for domain in a.domains.split(","):
        prompts, differ = [], 0
        for p in bundled(domain)[:a.n]:
            if p.messages is None:
                text = p.prompt
            else:
                msgs, tools = server_form(p.messages, p.tools)
                text = tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=True)
                differ += text != render_chat(p.messages, p.tools, True)
            prompts.append(tok(text, add_special_tokens=False).input_ids)
        t0 = time.time()
        acc = acceptance(target, draft, prompts, rec, pad, "cpu")
        print(f"{domain:13s} acceptance {acc.accept_length:.2f} over {acc.verify_steps} verify steps, {len(prompts)} "
              f"prompts ({differ} rendered unlike the trained text); {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
