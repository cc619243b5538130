"""Seeded generator of the bundled workloads (toolkit/workloads/data/<domain>.jsonl).

    python -m toolkit.workloads.gen            # rewrite the bundled files (they are committed)
    python -m toolkit.workloads.gen --check    # exit 1 if the committed files differ from a fresh run

Every text fragment in these modules was written for this project; nothing is copied from a public
data set. The same seed always gives the same bytes, and a test checks the committed files.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from toolkit.schema.records import Prompt
from toolkit.workloads.gen import agentic, chat, coding, encyclopedic, mathwp

DOMAINS = ("coding", "agentic", "encyclopedic", "math", "chat")
PER_DOMAIN = 100
SEED = 7
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def _one(domain: str, rng: random.Random) -> tuple[list[dict], list[dict] | None, int]:
    if domain == "agentic":
        return agentic.make(rng)
    module = {"coding": coding, "encyclopedic": encyclopedic, "math": mathwp, "chat": chat}[domain]
    messages, out = module.make(rng)
    return messages, None, out


def generate(domain: str, n: int = PER_DOMAIN, seed: int = SEED) -> list[Prompt]:
    """n distinct prompts of one domain; the same (domain, n, seed) always gives the same prompts."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}")
    rng = random.Random(f"{domain}:{seed}")
    seen: set[str] = set()
    prompts: list[Prompt] = []
    for _ in range(n * 50):
        messages, tools, out = _one(domain, rng)
        key = json.dumps([messages, tools], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        prompts.append(Prompt(id=f"{domain}-{len(prompts):03d}", domain=domain, messages=messages, tools=tools,
                              target_output_len=out))
        if len(prompts) == n:
            return prompts
    raise RuntimeError(f"{domain}: templates gave only {len(prompts)} distinct prompts of {n}")


def render(prompts: list[Prompt]) -> str:
    return "".join(json.dumps(p.model_dump(exclude_none=True), ensure_ascii=False) + "\n" for p in prompts)


def main(argv: list[str]) -> int:
    from toolkit.fsutil import write_atomic

    check = "--check" in argv
    bad = 0
    for domain in DOMAINS:
        text = render(generate(domain))
        path = DATA_DIR / f"{domain}.jsonl"
        if check:
            same = path.exists() and path.read_text() == text
            print(f"{'ok  ' if same else 'DIFF'} {path}")
            bad += not same
        else:
            write_atomic(path, text)
            print(f"wrote {path} ({text.count(chr(10))} prompts)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
