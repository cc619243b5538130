"""Everything the pair's training needs, made on a CPU in one folder that travels to the GPU.

    python -m toolkit.pair prepare OUT [--recipe gpu]

OUT/tokenizer/      the tokenizer (byte-level BPE trained here) with the chat template: copied into both models
OUT/tokens.u16      the training text, tokenized, documents shuffled (seeded) and joined by <|endoftext|>
OUT/prompts-*.u16   token ids of prompt sets, with their offsets in manifest.json:
                    draft-<domain>: the prompts whose greedy answers the drafter learns (held out: other seeds
                    than the corpus and the bundled workloads); eval-<domain>: the bundled workload prompts,
                    on which the drafter's own acceptance is measured
OUT/manifest.json   the recipe, the sources with their hashes, token counts, every file's sha256
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from toolkit.pair import PairError
from toolkit.pair.corpus import CHAT_TEMPLATE, EOS, SPECIAL, Corpus, build, render_chat, server_form
from toolkit.pair.recipes import Recipe
from toolkit.pair.records import PrepManifest

PROMPT_MAX = 3072  # the drafter's prompts are cut to their last PROMPT_MAX tokens


class PrepareError(PairError):
    pass


def train_tokenizer(texts, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>", pad_token=EOS, bos_token=None,
                                   chat_template=CHAT_TEMPLATE, model_max_length=1 << 20)


def check_template(tok, chats) -> None:
    """The tokenizer's Jinja template and render_chat() must write the same text for every conversation, also
    from the form a server hands the template (corpus.server_form: what the drafter is served must be what it
    learned)."""
    for domain, messages, tools in chats:
        b = render_chat(messages, tools, False)
        for form, (msgs, tls) in (("as sent", (messages, tools)), ("as SGLang passes it", server_form(messages, tools))):
            a = tok.apply_chat_template(msgs, tools=tls, tokenize=False)
            if a != b:
                i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                raise PrepareError(f"chat template ({form}) and render_chat differ ({domain}) at {i}: "
                                   f"{a[max(0, i - 40):i + 40]!r} vs {b[max(0, i - 40):i + 40]!r}")


def _write_u16(path: Path, ids: list[int]) -> None:
    import numpy as np

    np.asarray(ids, dtype="<u2").tofile(path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# data-keyed: prompt set name
def _prompt_sets(recipe: Recipe) -> dict[str, list[tuple[list[dict], list[dict] | None]]]:
    from toolkit.workloads.bundled import bundled
    from toolkit.workloads.gen import _one

    sets = {}
    for domain in recipe.draft_domains:
        rng = random.Random(f"pair-draft:{domain}:{recipe.seed}")
        sets[f"draft-{domain}"] = [_one(domain, rng)[:2] for _ in range(recipe.draft_prompts)]
    for domain in recipe.eval_domains:
        sets[f"eval-{domain}"] = [(p.messages, p.tools) for p in bundled(domain)[:recipe.eval_prompts]]
    return sets


def write_prompts(out: Path, tok, recipe: Recipe) -> dict:  # data-keyed: prompt set name
    index = {}
    for name, prompts in _prompt_sets(recipe).items():
        ids, offsets = [], [0]
        for messages, tools in prompts:
            one = tok.encode(render_chat(messages, tools, True), add_special_tokens=False)[-PROMPT_MAX:]
            ids += one
            offsets.append(len(ids))
        _write_u16(out / f"prompts-{name}.u16", ids)
        index[name] = offsets
    return index


def tokenize_corpus(out: Path, tok, corpus: Corpus, seed: int) -> dict[str, int]:  # data-keyed: domain
    eos = tok.convert_tokens_to_ids(EOS)
    docs = [(d, t) for d, texts in corpus.docs.items() for t in texts]
    docs += [(d, render_chat(m, tools, False)) for d, m, tools in corpus.chats]
    random.Random(f"pair-order:{seed}").shuffle(docs)
    counts: dict[str, int] = {}
    ids: list[int] = []
    encoded = tok.backend_tokenizer.encode_batch([t for _, t in docs], add_special_tokens=False)
    for (domain, _), enc in zip(docs, encoded):
        ids += enc.ids + [eos]
        counts[domain] = counts.get(domain, 0) + len(enc.ids) + 1
    _write_u16(out / "tokens.u16", ids)
    return counts


def prepare(out: Path, recipe: Recipe, code_root: Path | None = None, log=print) -> PrepManifest:
    import tokenizers
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    log(f"corpus ({recipe.name}) ...")
    corpus = build(recipe, code_root)
    log(f"  characters: {corpus.chars()}, chat documents: {len(corpus.chats)}")
    texts = [t for v in corpus.docs.values() for t in v] + [render_chat(m, t, False) for _, m, t in corpus.chats]
    log(f"tokenizer (BPE, {recipe.vocab_size}) ...")
    tok = train_tokenizer(texts, recipe.vocab_size)
    check_template(tok, corpus.chats)
    tok.save_pretrained(out / "tokenizer")
    log("tokenize ...")
    counts = tokenize_corpus(out, tok, corpus, recipe.seed)
    prompts = write_prompts(out, tok, recipe)
    files = {p.relative_to(out).as_posix(): _sha256(p) for p in sorted(out.rglob("*")) if p.is_file()
             and p.name != "manifest.json"}
    manifest = PrepManifest(recipe=recipe.record(), sources=corpus.sources, tokens=counts,
                            tokens_total=sum(counts.values()), vocab_size=len(tok), prompts=prompts,
                            prompt_max=PROMPT_MAX, files=files,
                            versions={"tokenizers": tokenizers.__version__, "transformers": transformers.__version__})
    manifest.write(out / "manifest.json")
    log(f"  tokens: {counts} (total {manifest.tokens_total:,}); vocabulary {len(tok)}")
    return manifest
