"""Config-only model folders for SGLang's `--load-format dummy` (random weights, nothing downloaded), from
the recipe the Environment holds (`dummy_models:`), so the environment hash says what is served:

    python3 benchmarks/sglang_h200/make_models.py [ENV]      # ENV default: envs/sglang-0.5.17-h200.yaml

For envs/sglang-0.5.17-h200.yaml that is /tmp/toolkit-sglang/models/:
- `llama-1b/`: a Llama of ~1.2B parameters (hidden 2048, 16 layers, MLP 8192, 32 heads, 8 KV heads, bf16,
  context 16384: the bundled agentic prompts run to ~6k tokens with this small tokenizer) with the toolkit's
  locally trained byte-level BPE tokenizer (toolkit.serve.dummy; its vocabulary, 13040 tokens, is the
  model's, so every id the random model emits decodes).
- `eagle3-draft/`: a one-layer EAGLE-3 drafter for it (`LlamaForCausalLMEagle3`, target_hidden_size = the
  target's, draft_vocab_size = vocab_size: a dummy drafter has no token map).

Only config.json, the tokenizer files and toolkit-dummy.json (the recipe) are written; SGLang fills the
weights (the drafter inherits the target's load format). Deterministic: the same files on every machine.
A folder that already holds its recipe is left as it is. The process launcher does the same before a
server starts (toolkit.serve.sglang.SGLangProcessLauncher), so this script is only needed ahead of time.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(env_path: Path) -> None:
    from toolkit.serve.dummy import ensure_config_folders
    from toolkit.specs import load_spec

    models = load_spec(env_path, expect="Environment").model.dummy_models or {}
    if not models:
        sys.exit(f"{env_path} declares no dummy_models")
    written = set(ensure_config_folders(models))
    for path in models:
        print(f"{path} ({'written' if path in written else 'already there'})")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "envs" / "sglang-0.5.17-h200.yaml")
