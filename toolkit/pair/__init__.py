"""A real small model pair, made here: a Llama target and its EAGLE-3 drafter (issue 41).

There is no model hub on these machines, so the project makes its own pair from offline text:

    corpus.py    four domains of documents from offline sources (Python's standard library for code,
                 Debian's GCIDE and WordNet for encyclopedic prose, the toolkit's own agentic and math
                 generators), plus chat-formatted prompt/answer documents in the toolkit's prompt styles
    prepare.py   a byte-level BPE tokenizer trained on that corpus, the corpus tokenized, the prompts the
                 drafter learns from: one folder that travels to the GPU (`python -m toolkit.pair prepare`)
    train.py     the target (transformers' LlamaForCausalLM), the target's own greedy answers to coding
                 and agentic prompts, an EAGLE-3 drafter trained on them in SGLang's format, and the
                 drafter's own acceptance per domain (`python -m toolkit.pair train`)
    recipes.py   the seeded sizes: `gpu` (the real pair) and `test` (a tiny one for CPU tests)

The drafter sees coding and agentic answers only, the seed case in miniature: acceptance measured on
encyclopedic or math prompts tells how far the prompts are from what the drafter was trained on.
"""


class PairError(Exception):
    """A source is missing or unreadable, or a prepared folder is not what it says (the message says how to fix)."""
