"""The seeded recipes of the model pair: every size and count that decides the weights, by name."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Recipe:
    name: str
    seed: int = 0
    # corpus (characters per domain; chat documents per domain)
    code_chars: int = 12_000_000
    encyclopedic_chars: int = 12_000_000
    agentic_docs: int = 2_500
    math_docs: int = 12_000
    chat_docs: int = 2_000
    # a coding chat's answer: "library" = a random standard-library source (unrelated to the prompt); "revise" =
    # the prompt's own code block given back with an edit (what a coding assistant's answer mostly is: the code
    # it was shown, changed in a few lines), so the target learns to repeat its context
    coding_answers: str = "library"
    vocab_size: int = 8192
    # target
    hidden: int = 384
    layers: int = 8
    heads: int = 6
    intermediate: int = 1024
    max_positions: int = 8192
    seq_len: int = 1024
    batch: int = 64
    steps: int = 3000
    lr: float = 1.5e-3
    max_seconds: float = 270.0
    # the drafter's data: the target's greedy answers to prompts of these domains only
    draft_domains: tuple[str, ...] = ("coding", "agentic")
    draft_prompts: int = 1024  # per domain
    gen_tokens: int = 256
    gen_batch: int = 256
    draft_window: int = 1024
    draft_batch: int = 32
    draft_steps: int = 2500
    draft_lr: float = 2e-3
    draft_ttt: int = 3  # training-time test: draft steps unrolled on the drafter's own outputs
    draft_max_seconds: float = 180.0
    # the drafter's own acceptance check: prompts per domain, tokens each, chain length
    eval_prompts: int = 24
    eval_tokens: int = 96
    eval_steps: int = 3
    eval_domains: tuple[str, ...] = ("coding", "agentic", "encyclopedic", "math")
    extra: dict = field(default_factory=dict)

    def record(self) -> dict:  # json-edge: manifest.json / pair.json
        return asdict(self)


RECIPES = {
    "gpu": Recipe(name="gpu"),
    # the whole pair in ~6 minutes of one H200 (a shorter target, fewer answers): the fix checked in the time left
    "gpu-quick": Recipe(name="gpu-quick", steps=1500, max_seconds=130, draft_prompts=512, draft_steps=1200,
                        draft_max_seconds=90, eval_prompts=16),
    # a drafter for the GPU's target on 2 CPU cores (`python -m toolkit.pair draft`): fewer, shorter answers
    "cpu-check": Recipe(name="cpu-check", draft_prompts=64, gen_tokens=96, gen_batch=32, draft_window=256,
                        draft_batch=8, draft_steps=600, draft_lr=2e-3, draft_max_seconds=900, eval_prompts=8,
                        eval_tokens=64),
    # the quickstart's target (no drafter: n-gram speculation needs none), trained once on a GPU (`--device cuda`,
    # a few minutes; 500 steps of batch 4 on 2 CPU cores left it looping) and shipped in
    # toolkit/_data/quickstart-model/ (envs/local-cpu-pair.yaml pins it; docs/pair.md)
    "quickstart": Recipe(name="quickstart", code_chars=3_000_000, encyclopedic_chars=3_000_000, agentic_docs=300,
                         math_docs=2_000, chat_docs=1_500, coding_answers="revise", vocab_size=4096, hidden=128,
                         layers=4, heads=4,
                         intermediate=384, max_positions=4096, seq_len=512, batch=32, steps=6000, lr=3e-3,
                         max_seconds=420, draft_steps=0, draft_prompts=0, eval_prompts=0),
    # a pair in seconds on a CPU: the pipeline end to end, nothing about quality
    "test": Recipe(name="test", code_chars=60_000, encyclopedic_chars=60_000, agentic_docs=12, math_docs=60,
                   chat_docs=8, vocab_size=512, hidden=64, layers=4, heads=2, intermediate=128,
                   max_positions=2048, seq_len=128, batch=4, steps=6, max_seconds=60, draft_prompts=3,
                   gen_tokens=8, gen_batch=3, draft_window=128, draft_batch=2, draft_steps=4,
                   draft_max_seconds=60, eval_prompts=2, eval_tokens=8),
}


def recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise KeyError(f"unknown recipe {name!r}: one of {', '.join(RECIPES)}") from None
