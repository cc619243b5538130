"""The drafter's training prompts as a training-data file for representativeness (toolkit/workloads/represent.py).

    python -m toolkit.pair sample PREP OUT.jsonl [--n N]

PREP/prompts-draft-<domain>.u16 (the prompts whose greedy answers the drafter learns; offsets in
PREP/manifest.json `prompts`) decoded with PREP/tokenizer, each rendered chat (toolkit/pair/corpus.py
render_chat) parsed back into OpenAI chat: one `{"id", "domain", "messages"[, "tools"]}` line per prompt, the
format `training_data:` and `toolkit bench representativeness --train` read (toolkit/workloads/formats.py).
With --n, the first N prompts of each domain (prepare wrote them in seeded order): the sample is deterministic.
A prompt cut to its last PROMPT_MAX tokens by prepare starts mid-turn: that fragment is a user turn.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from toolkit.pair import PairError
from toolkit.pair.records import PrepManifest

_TURN = re.compile(r"<\|(system|user|assistant|tool|tools)\|>\n")


def parse_rendered(text: str) -> dict:  # json-edge: a sample.jsonl row (chat JSON)
    """A render_chat() text (generation prompt included) back into {"messages", "tools"?}. Tool calls stay in
    the assistant's text (`<|call|>` dropped), as the drafter read them."""
    parts = _TURN.split(text)
    turns: list[tuple[str, str]] = [("user", parts[0])] if parts[0].strip() else []
    turns += list(zip(parts[1::2], parts[2::2]))
    out: dict = {"messages": []}
    for role, body in turns:
        body = body.removesuffix("\n").removesuffix("<|end|>").replace("<|call|>", " ").strip()
        if role == "tools":
            try:
                out["tools"] = json.loads(body)
            except json.JSONDecodeError:  # cut by the PROMPT_MAX window: keep it as text
                out["messages"].append({"role": "system", "content": body})
        elif body or role != "assistant":
            out["messages"].append({"role": role, "content": body})
    if not any(m["role"] in ("user", "tool") for m in out["messages"]):
        out["messages"].append({"role": "user", "content": ""})
    return out


def draft_prompts(prep: Path, n: int | None = None) -> list[dict]:
    """The drafter's training prompts of a prepared folder, per draft domain in the order prepare wrote them
    (the first `n` of each with n)."""
    import numpy as np
    from transformers import PreTrainedTokenizerFast

    prep = Path(prep)
    manifest_path = prep / "manifest.json"
    if not manifest_path.is_file():
        raise PairError(f"{prep}: no manifest.json (not a folder `python -m toolkit.pair prepare` wrote)")
    index = PrepManifest.read(prep).prompts
    domains = [k.removeprefix("draft-") for k in index if k.startswith("draft-")]
    if not domains:
        raise PairError(f"{prep}: the manifest lists no draft-<domain> prompts")
    tok = PreTrainedTokenizerFast.from_pretrained(str(prep / "tokenizer"))
    out = []
    for domain in domains:
        offsets = index[f"draft-{domain}"]
        ids = np.fromfile(prep / f"prompts-draft-{domain}.u16", dtype="<u2").astype(np.int64).tolist()
        count = len(offsets) - 1 if n is None else min(n, len(offsets) - 1)
        for i in range(count):
            text = tok.decode(ids[offsets[i]:offsets[i + 1]], skip_special_tokens=False)
            out.append({"id": f"draft-{domain}-{i}", "domain": domain, **parse_rendered(text)})
    return out


def write_sample(prep: Path, out: Path, n: int | None = None) -> int:
    """Write the sample as JSON lines; the number of prompts written."""
    rows = draft_prompts(prep, n)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                   encoding="utf-8")
    return len(rows)
