"""Dummy models made locally and deterministically, nothing downloaded; the spec holds their recipe, so
the environment hash changes when what is served does (toolkit.specs: DummyModel, DummyConfig and the
recipe versions DUMMY_RECIPE, CONFIG_RECIPE):

- `model.dummy` (the embedded engine): random Llama weights from a seed and a byte-level BPE tokenizer
  trained with `tokenizers` on a text generated from a seeded word list. Cached in <cache>/models/<hash>.
- `dummy_models` (SGLang): config-only folders at the spec's paths, config.json and the same tokenizer;
  SGLang fills random weights (`--load-format dummy`). An EAGLE-3 drafter's config points at its target.

    path = ensure_dummy_model(DummyModel(hidden_size=64, layers=2))   # a directory `transformers serve` loads
    ensure_config_folders(env.dummy_models)                           # the folders SGLang's presets read
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from toolkit.settings import cache_dir
from toolkit.specs.environment import CONFIG_RECIPE, DUMMY_RECIPE, DummyConfig, DummyModel

RECIPE = DUMMY_RECIPE  # bump it (toolkit/specs/environment.py) when the recipe below changes: a new hash, a new directory
MARKER = "toolkit-dummy.json"
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] if m['content'] is string else '' }}\n"
    "{% endfor %}{% if add_generation_prompt %}<s>assistant: {% endif %}"
)

# A fixed vocabulary of prose and code words; the corpus is sampled from it with a seeded RNG, so the
# tokenizer is the same on every machine and Python version.
WORDS = """the of and to in is that for it as was with be by on not he this are or his from at which
but have an they you were her she there been one all we their has would when if so no what up out can
more about into them some could time other than then now only its over also after two first may
such these like our well how any where most people model server request token batch cache draft
speculative decoding latency throughput concurrency prompt output input answer question code function
return value list dict class import def self print error test data file path json yaml docker image
build python torch kernel memory gpu cpu host port health metric percentile median mean sample seed
translate summarize explain write story poem math number sum product equal greater less""".split()
CODE = ["def f(x):", "return x + 1", "for i in range(10):", "if a == b:", "print(value)", "import os",
        "{", "}", "(", ")", "[", "]", ":", ",", ".", "=", "+", "-", "*", "/", "0", "1", "2", "3", "42", "\n"]


SYLLABLES = [c + v for c in "bcdfghklmnprstvwz" for v in "aeiou"] + ["th", "st", "er", "ing", "ion", "ly"]


def corpus(lines: int = 6000, seed: int = 1234) -> list[str]:
    """Prose-like lines: real words, code fragments and seeded pseudo-words (enough merges for a large vocab)."""
    rng = random.Random(seed)
    pseudo = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(6000)]
    out = []
    for _ in range(lines):
        toks = []
        for _ in range(rng.randint(4, 24)):
            r = rng.random()
            toks.append(rng.choice(WORDS) if r < 0.5 else rng.choice(pseudo) if r < 0.85 else rng.choice(CODE))
        out.append(" ".join(toks))
    return out


def model_hash(spec: DummyModel) -> str:
    blob = json.dumps({"recipe": RECIPE, "spec": spec.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _build(spec: DummyModel, out: Path) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tok = _train_tokenizer(spec.vocab_size)
    config = LlamaConfig(
        vocab_size=max(len(tok), spec.vocab_size), hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.heads,
        max_position_embeddings=spec.max_position_embeddings, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=False,
    )
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config).to(getattr(torch, spec.dtype))
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id, do_sample=False)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "toolkit-dummy.json").write_text(json.dumps({"recipe": RECIPE, **spec.model_dump(mode="json")},
                                                       indent=2, sort_keys=True) + "\n")


def ensure_dummy_model(spec: DummyModel, cache: Path | None = None) -> Path:
    """The model directory for `spec`, made once (under a file lock, written to a temp dir then renamed)."""
    cache = cache or cache_dir() / "models"
    target = cache / model_hash(spec)
    if (target / "toolkit-dummy.json").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "toolkit-dummy.json").is_file():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=cache))
        try:
            _build(spec, tmp)
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_tokenizer(path: Path):
    """The model's fast tokenizer (the load generator counts tokens with it when a server gives no usage)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path))


# -- config-only folders for SGLang's --load-format dummy

def config_json(d: DummyConfig, tok, target: DummyConfig | None = None) -> dict:  # json-edge: config.json
    """config.json of a config-only folder; its vocabulary is the tokenizer's (every emitted id decodes)."""
    vocab = len(tok)
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3" if d.architecture == "llama-eagle3" else "LlamaForCausalLM"],
        "model_type": "llama", "hidden_size": d.hidden_size, "intermediate_size": d.intermediate_size,
        "num_hidden_layers": d.layers, "num_attention_heads": d.heads, "num_key_value_heads": d.kv_heads,
        "head_dim": d.hidden_size // d.heads, "vocab_size": vocab, "max_position_embeddings": d.max_position_embeddings,
        "rms_norm_eps": 1e-5, "rope_theta": d.rope_theta, "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": d.dtype, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id, "attention_bias": False, "mlp_bias": False,
    }
    if target is not None:  # a dummy drafter has no token map: its vocabulary is the target's
        cfg.update(draft_vocab_size=vocab, target_hidden_size=target.hidden_size)
    return cfg


def _config_marker(d: DummyConfig, target: DummyConfig | None) -> dict:  # json-edge: the config marker file
    return {"recipe": CONFIG_RECIPE, **d.model_dump(mode="json"),
            "target": target.model_dump(mode="json") if target is not None else None}


def ensure_config_folder(path: str | Path, d: DummyConfig, target: DummyConfig | None = None) -> bool:
    """Write the folder for recipe `d` at path unless it already holds it (its toolkit-dummy.json says so);
    a folder made from another recipe is replaced. Atomic: a temp folder beside it, then a rename. Returns
    whether it wrote."""
    path = Path(path)
    want = _config_marker(d, target)
    try:
        if json.loads((path / MARKER).read_text()) == want:
            return False
    except (OSError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".toolkit-dummy.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            tok = _train_tokenizer(d.vocab_size)
            tok.save_pretrained(tmp)
            (tmp / "config.json").write_text(json.dumps(config_json(d, tok, target), indent=2))
            (tmp / MARKER).write_text(json.dumps(want, indent=2, sort_keys=True) + "\n")
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return True


def ensure_config_folders(models: dict[str, DummyConfig] | None, only: set[str] | None = None) -> list[str]:
    """Every folder of an environment's dummy_models (or those in `only`), targets before drafters; returns
    the paths written."""
    models = models or {}
    order = sorted(models, key=lambda p: models[p].eagle3_draft_of is not None)
    return [p for p in order if (only is None or p in only)
            and ensure_config_folder(p, models[p], models.get(models[p].eagle3_draft_of or ""))]
