"""A synthetic 'drafter training set' of known domain mix, written in ShareGPT form with completions.

The prompts come from the bundled generators with a different seed than the bundled files, so they
are new prompts of the same kinds, not copies of the workloads."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.workloads.gen import generate

# mostly coding and agentic, as the drafter in the project's story
MIX = {"coding": 45, "agentic": 40, "chat": 10, "math": 5}
COMPLETIONS = {
    "coding": "```python\ndef solve(items):\n    seen = set()\n    return [x for x in items if not (x in seen or seen.add(x))]\n```\n"
              "This keeps the first occurrence of each item.",
    "agentic": '{"status": "done", "summary": "refund issued after checking the order", "actions": ["get_orders", "issue_refund"]}',
    "chat": "That sounds like a lovely plan. Start small, keep it regular, and be kind to yourself along the way.",
    "math": "First compute the total, then apply the discount: 6 x 37 = 222, and 0.75 x 222 = 166.5. Answer: 179.82.",
}
ROLE = {"system": "system", "user": "human", "assistant": "gpt", "tool": "observation"}


def to_sharegpt(prompt, completion: str) -> dict:
    conv = []
    for m in prompt.messages:
        if m.get("tool_calls"):
            conv.append({"from": "function_call", "value": json.dumps(m["tool_calls"][0]["function"])})
        else:
            conv.append({"from": ROLE[m["role"]], "value": m["content"]})
    conv.append({"from": "gpt", "value": completion})
    rec = {"id": f"train-{prompt.id}", "conversations": conv}
    if prompt.tools:
        rec["tools"] = json.dumps(prompt.tools)
    return rec


def write_training(path: Path, mix: dict[str, int] = MIX, seed: int = 1234) -> Path:
    lines = []
    for domain, n in mix.items():
        for p in generate(domain, n, seed=seed):
            lines.append(json.dumps(to_sharegpt(p, COMPLETIONS[domain])))
    path.write_text("\n".join(lines) + "\n")
    return path
