"""Config-only model folders for SGLang's `--load-format dummy` (random weights, nothing downloaded):

    python3 benchmarks/sglang_h200/make_models.py /tmp/toolkit-sglang/models

- `llama-1b/`: a Llama of ~1.2B parameters (hidden 2048, 16 layers, MLP 8192, 32 heads, 8 KV heads, bf16, context 16384: the bundled agentic prompts run to ~6k tokens with this small tokenizer)
  with the toolkit's locally trained byte-level BPE tokenizer (toolkit.serve.dummy; its vocabulary, 13040
  tokens, is the model's, so every id the random model emits decodes).
- `eagle3-draft/`: a one-layer EAGLE-3 drafter for it (`LlamaForCausalLMEagle3`, target_hidden_size = the
  target's, draft_vocab_size = vocab_size: a dummy drafter has no token map).

Only config.json and the tokenizer files are written; SGLang fills the weights (the drafter inherits the
target's load format). Deterministic: the same files on every machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

HIDDEN, LAYERS, MLP, HEADS, KV_HEADS, MAX_POS = 2048, 16, 8192, 32, 8, 16384


def llama_config(vocab: int, tok, layers: int, arch: str) -> dict:
    return {
        "architectures": [arch], "model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": MLP,
        "num_hidden_layers": layers, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "head_dim": HIDDEN // HEADS, "vocab_size": vocab, "max_position_embeddings": MAX_POS, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id,
        "attention_bias": False, "mlp_bias": False,
    }


def main(out: Path) -> None:
    from toolkit.serve.dummy import _train_tokenizer

    tok = _train_tokenizer(32000)
    vocab = len(tok)
    target, draft = out / "llama-1b", out / "eagle3-draft"
    for d in (target, draft):
        d.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(d)
    (target / "config.json").write_text(json.dumps(llama_config(vocab, tok, LAYERS, "LlamaForCausalLM"), indent=2))
    dcfg = llama_config(vocab, tok, 1, "LlamaForCausalLMEagle3")
    dcfg.update(draft_vocab_size=vocab, target_hidden_size=HIDDEN)
    (draft / "config.json").write_text(json.dumps(dcfg, indent=2))
    print(f"{target} (vocab {vocab}), {draft}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/toolkit-sglang/models"))
