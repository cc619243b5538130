"""Train the pair from a prepared folder: the target, its own answers, the EAGLE-3 drafter, the drafter's acceptance.

    python -m toolkit.pair train PREP OUT [--recipe gpu] [--device cuda]

OUT/target/   a Llama (transformers' LlamaForCausalLM, bf16 safetensors, tied embeddings) with the tokenizer:
              SGLang, the embedded CPU engine and transformers load it as any Llama
OUT/draft/    its EAGLE-3 drafter in SGLang's format (config `LlamaForCausalLMEagle3`, one decoder layer whose
              attention reads [input_layernorm(embed), hidden_norm(hidden)], `fc` over the target's hidden
              states before layers 2, L/2 and L-3, its own lm_head = the target's; no token map)
OUT/pair.json the recipe, the losses, timings, the drafter's own acceptance per domain, every file's sha256

The drafter mirrors sglang/srt/models/llama_eagle3.py step for step (Draft.layer below) and is trained with
training-time test (SpecForge's TTT): step k > 0 reads the drafter's own pre-norm output of step k - 1 where
step 0 read the target's hidden states, at the positions and with the keys it sees when serving.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from toolkit.fsutil import folder_digest
from toolkit.pair.recipes import Recipe
from toolkit.pair.records import DraftAcceptance, PairRecord, PrepManifest

EPS = 1e-5
ROPE_THETA = 10000.0


def aux_layers(layers: int) -> list[int]:
    """SGLang's default EAGLE-3 capture points: the input of these target layers (HF hidden_states[i])."""
    return [2, layers // 2, layers - 3]


# ---------------------------------------------------------------- the target


def target_config(recipe: Recipe, tok):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=recipe.vocab_size, hidden_size=recipe.hidden, intermediate_size=recipe.intermediate,
                       num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads,
                       num_key_value_heads=recipe.heads, max_position_embeddings=recipe.max_positions,
                       rms_norm_eps=EPS, rope_theta=ROPE_THETA, tie_word_embeddings=True, hidden_act="silu",
                       bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|end|>"),
                       pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), attn_implementation="sdpa")


def _lr(step: int, steps: int, peak: float, warmup: int = 100) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, steps - warmup)))))


def _autocast(device: str):
    return torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)


def train_target(tokens: np.ndarray, recipe: Recipe, tok, device: str, log) -> tuple[nn.Module, dict]:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM(target_config(recipe, tok)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=device == "cuda")
    data = torch.from_numpy(tokens.astype(np.int64))
    g = torch.Generator().manual_seed(recipe.seed)
    t0, first, step = time.time(), None, 0
    for step in range(recipe.steps):
        if time.time() - t0 > recipe.max_seconds:
            log(f"target: stopped at step {step} (max_seconds {recipe.max_seconds})")
            break
        starts = torch.randint(0, len(data) - recipe.seq_len - 1, (recipe.batch,), generator=g)
        batch = torch.stack([data[s:s + recipe.seq_len + 1] for s in starts.tolist()]).to(device)
        for group in opt.param_groups:
            group["lr"] = _lr(step, recipe.steps, recipe.lr)
        with _autocast(device):
            logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step == 0:
            first = loss.item()
        if step % 250 == 0:
            log(f"target step {step}: loss {loss.item():.3f} ({time.time() - t0:.0f} s)")
    else:
        step = recipe.steps
    secs = time.time() - t0
    info = {"steps": step, "seconds": round(secs, 1), "tokens_seen": step * recipe.batch * recipe.seq_len,
            "loss_first": first, "loss_last": loss.item(),
            "params": sum(p.numel() for p in model.parameters())}
    log(f"target: {info}")
    return model.eval(), info


@torch.no_grad()
def generate(model, prompts: list[list[int]], new_tokens: int, batch: int, pad: int, device: str) -> list[list[int]]:
    """Greedy answers of `new_tokens` tokens each, past end of turn (as the benchmark's ignore_eos asks)."""
    out: list[list[int] | None] = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for b in range(0, len(order), batch):
        idx = order[b:b + batch]
        width = max(len(prompts[i]) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for r, i in enumerate(idx):  # left padding
            ids[r, width - len(prompts[i]):] = torch.tensor(prompts[i])
            mask[r, width - len(prompts[i]):] = 1
        ids, mask = ids.to(device), mask.to(device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        past, nxt, new = None, None, []
        for s in range(new_tokens):
            with _autocast(device):
                res = model(input_ids=ids if past is None else nxt, attention_mask=mask, position_ids=pos,
                            past_key_values=past, use_cache=True)
            past = res.past_key_values
            nxt = res.logits[:, -1].argmax(-1, keepdim=True)
            new.append(nxt)
            mask = torch.cat([mask, torch.ones_like(nxt)], dim=1)
            pos = pos[:, -1:] + 1
        gen = torch.cat(new, dim=1).tolist()
        for r, i in enumerate(idx):
            out[i] = prompts[i] + gen[r]
    return out  # type: ignore[return-value]


@torch.no_grad()
def features(model, seqs: list[list[int]], device: str, batch: int = 16) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per sequence: the target's hidden states at the capture points (N x 3H) and its greedy predictions (N).
    Batches are right-padded: causal attention leaves every real position as it would be alone."""
    layers = aux_layers(model.config.num_hidden_layers)
    out: list = [None] * len(seqs)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for b in range(0, len(order), batch):
        idx = order[b:b + batch]
        width = max(len(seqs[i]) for i in idx)
        ids = torch.zeros((len(idx), width), dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
        with _autocast(device):
            res = model(input_ids=ids.to(device), output_hidden_states=True)
        feats = torch.cat([res.hidden_states[i] for i in layers], dim=-1).to(torch.bfloat16)
        preds = res.logits.argmax(-1)
        for r, i in enumerate(idx):
            n = len(seqs[i])
            out[i] = (feats[r, :n].clone(), preds[r, :n].clone())
    return out


# ---------------------------------------------------------------- the drafter


class RMSNorm(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * self.weight


def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Neox-style rotary embedding (transformers' Llama and SGLang's): x (B, h, T, d), pos (B, T)."""
    d = x.shape[-1]
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = pos.float()[..., None] * inv  # B, T, d/2
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return (x.float() * cos + torch.cat([-x2, x1], -1).float() * sin).to(x.dtype)


class Draft(nn.Module):
    """sglang/srt/models/llama_eagle3.py's LlamaForCausalLMEagle3, one layer; names as SGLang loads them."""

    def __init__(self, hidden: int, heads: int, intermediate: int, vocab: int, n_aux: int = 3):
        super().__init__()
        self.h, self.heads, self.hd = hidden, heads, hidden // heads
        self.fc = nn.Linear(n_aux * hidden, hidden, bias=False)
        self.midlayer = nn.Module()
        m = self.midlayer
        m.input_layernorm, m.hidden_norm, m.post_attention_layernorm = RMSNorm(hidden), RMSNorm(hidden), RMSNorm(hidden)
        m.self_attn = nn.Module()
        for name in ("q_proj", "k_proj", "v_proj"):
            setattr(m.self_attn, name, nn.Linear(2 * hidden, hidden, bias=False))
        m.self_attn.o_proj = nn.Linear(hidden, hidden, bias=False)
        m.mlp = nn.Module()
        m.mlp.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        m.mlp.up_proj = nn.Linear(hidden, intermediate, bias=False)
        m.mlp.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def qkv(self, embeds, hidden, pos):
        """The layer's input half: (q, k, v) with rotary applied, and the residual (= hidden)."""
        m = self.midlayer
        x = torch.cat([m.input_layernorm(embeds), m.hidden_norm(hidden)], dim=-1)
        B, T = x.shape[:2]
        split = lambda t: t.view(B, T, self.heads, self.hd).transpose(1, 2)  # noqa: E731
        q, k, v = (split(getattr(m.self_attn, n)(x)) for n in ("q_proj", "k_proj", "v_proj"))
        return rope(q, pos), rope(k, pos), v

    def rest(self, attn, residual):
        """The layer's output half: o_proj, fused add + norm, MLP, final norm; (hidden for logits, pre-norm aux)."""
        m = self.midlayer
        B, _, T, _ = attn.shape
        residual = m.self_attn.o_proj(attn.transpose(1, 2).reshape(B, T, self.h)) + residual
        x = m.post_attention_layernorm(residual)
        aux = m.mlp.down_proj(F.silu(m.mlp.gate_proj(x)) * m.mlp.up_proj(x)) + residual
        return self.norm(aux), aux


def attend(q, k0, v0, extra: list[tuple[torch.Tensor, torch.Tensor]], causal_len: int | None = None):
    """Attention of queries q (B,h,T,d) over step-0 keys k0 (B,h,S,d): key s visible to query t when s <= t + off
    (off = S - T), plus, per earlier draft step, one key each (B,h,T,d): the same row's key of that step."""
    d = q.shape[-1]
    scores = torch.matmul(q.float(), k0.float().transpose(-1, -2)) / math.sqrt(d)
    T, S = q.shape[2], k0.shape[2]
    visible = torch.arange(S, device=q.device)[None, :] <= torch.arange(T, device=q.device)[:, None] + (S - T)
    scores = scores.masked_fill(~visible, float("-inf"))
    diag = [((q.float() * k.float()).sum(-1, keepdim=True) / math.sqrt(d)) for k, _ in extra]
    p = torch.softmax(torch.cat([scores] + diag, dim=-1), dim=-1)
    out = torch.matmul(p[..., :S], v0.float())
    for j, (_, v) in enumerate(extra):
        out = out + p[..., S + j:S + j + 1] * v.float()
    return out.to(q.dtype)


def step_targets(labels: torch.Tensor, valid: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What draft step k at row t must predict, and where that is defined. Row t reads the target's hidden state
    at position t and token t + 1 + k; it predicts token t + 2 + k: labels[t + 2 + k] (labels[i] = the target's
    greedy prediction of token i). Never labels[t + 1 + k]: that is the row's own input token."""
    W = labels.shape[1]
    shift = 2 + k
    inside = (torch.arange(W, device=labels.device) < W - shift)[None, :]
    return torch.roll(labels, -shift, dims=1), torch.roll(valid, -shift, dims=1) & inside


def ttt_loss(draft: Draft, embed, x, feats, labels, valid, start, steps: int):
    """x (B,W) tokens, feats (B,W,3H), labels (B,W) the target's greedy prediction of each token, valid (B,W) where
    labels are defined, start (B,) the window's first position. Step k at row t reads token x[t+1+k] at position
    start+t+k (step_targets says what it predicts)."""
    B, W = x.shape
    pos0 = start[:, None] + torch.arange(W, device=x.device)[None, :]
    hidden, keys, total, correct = draft.fc(feats.to(draft.fc.weight.dtype)), [], 0.0, []
    k0 = v0 = None
    for k in range(steps):
        tok = torch.roll(x, -(1 + k), dims=1)
        q, kk, vv = draft.qkv(embed(tok), hidden, pos0 + k)
        if k == 0:
            k0, v0 = kk, vv
            attn = attend(q, k0, v0, [])
        else:
            keys.append((kk, vv))
            attn = attend(q, k0, v0, keys)
        logits_h, aux = draft.rest(attn, hidden)
        logits = draft.lm_head(logits_h).float()
        tgt, ok = step_targets(labels, valid, k)
        loss = F.cross_entropy(logits[ok], tgt[ok]) if ok.any() else logits.sum() * 0
        total = total + (0.8 ** k) * loss
        correct.append(((logits.argmax(-1) == tgt) & ok).sum().item() / max(1, ok.sum().item()))
        hidden = aux
    return total, correct


def _windows(data, idx, window: int, device: str):
    """A batch of the last `window` positions of each sequence, right-padded (built on the device)."""
    B = len(idx)
    x = torch.zeros((B, window), dtype=torch.long, device=device)
    f = torch.zeros((B, window, data[idx[0]][1].shape[-1]), dtype=torch.bfloat16, device=device)
    y = torch.zeros((B, window), dtype=torch.long, device=device)
    valid = torch.zeros((B, window), dtype=torch.bool, device=device)
    start = torch.zeros(B, dtype=torch.long, device=device)
    for r, i in enumerate(idx):
        seq, feats, preds = data[i]
        n = min(window, len(seq))
        s = len(seq) - n
        x[r, :n] = torch.tensor(seq[s:], device=device)
        f[r, :n] = feats[s:]
        # labels[t] = the target's prediction of token t: its greedy output at t - 1
        y[r, 1:n] = preds[s:len(seq) - 1]
        valid[r, 1:n] = True
        start[r] = s
    return x, f, y, valid, start


def train_draft(target, seqs: list[list[int]], recipe: Recipe, device: str, log) -> tuple[Draft, dict]:
    cfg = target.config
    draft = Draft(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size, cfg.vocab_size).to(device)
    target.requires_grad_(False)
    embed = target.get_input_embeddings()
    draft.lm_head.weight.data.copy_(target.get_output_embeddings().weight.data)
    draft.lm_head.weight.requires_grad_(False)
    t0 = time.time()
    data = [(s, *fp) for s, fp in zip(seqs, features(target, seqs, device))]
    log(f"draft: target features of {len(data)} sequences ({time.time() - t0:.0f} s)")
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=recipe.draft_lr, betas=(0.9, 0.95), weight_decay=0.0)
    g = torch.Generator().manual_seed(recipe.seed + 1)
    t1, step, acc = time.time(), 0, []
    for step in range(recipe.draft_steps):
        if time.time() - t1 > recipe.draft_max_seconds:
            log(f"draft: stopped at step {step} (max_seconds {recipe.draft_max_seconds})")
            break
        idx = torch.randint(0, len(data), (recipe.draft_batch,), generator=g).tolist()
        x, f, y, valid, start = _windows(data, idx, recipe.draft_window, device)
        for group in opt.param_groups:
            group["lr"] = _lr(step, recipe.draft_steps, recipe.draft_lr, warmup=50)
        with _autocast(device):
            loss, acc = ttt_loss(draft, embed, x, f, y, valid, start, recipe.draft_ttt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 250 == 0:
            log(f"draft step {step}: loss {loss.item():.3f}, top-1 per step {[round(a, 3) for a in acc]}")
    else:
        step = recipe.draft_steps
    info = {"steps": step, "seconds": round(time.time() - t1, 1), "sequences": len(data),
            "loss_last": loss.item(), "top1_per_step_last_batch": [round(a, 4) for a in acc],
            "params_trained": sum(p.numel() for p in params)}
    log(f"draft: {info}")
    return draft.eval(), info


# ---------------------------------------------------------------- acceptance, as SGLang's chain drafting counts it


@torch.no_grad()
def propose(draft: Draft, embed, seq: list[int], feats: torch.Tensor, p: int, steps: int, device: str) -> list[int]:
    """Draft tokens after the verified prefix seq[:p+1], whose last token the target has not read yet (its
    features are known for positions < p): SGLang's draft extend, then steps - 1 chain steps."""
    x = torch.tensor([seq[1:p + 1]], device=device)
    pos = torch.arange(p, device=device)[None]
    hidden = draft.fc(feats[None, :p].to(draft.fc.weight.dtype))
    q, k0, v0 = draft.qkv(embed(x), hidden, pos)
    logits_h, aux = draft.rest(attend(q[:, :, -1:], k0, v0, []), hidden[:, -1:])
    out = [int(draft.lm_head(logits_h)[0, -1].argmax())]
    extra = []
    for k in range(1, steps):
        q, kk, vv = draft.qkv(embed(torch.tensor([[out[-1]]], device=device)), aux, pos[:, -1:] + k)
        extra.append((kk, vv))
        logits_h, aux = draft.rest(attend(q, k0, v0, extra), aux)
        out.append(int(draft.lm_head(logits_h)[0, -1].argmax()))
    return out


@torch.no_grad()
def acceptance(target, draft: Draft, prompts: list[list[int]], recipe: Recipe, pad: int,
               device: str) -> DraftAcceptance:
    """Mean accepted length per verify step (completion tokens / verify steps, SGLang's spec_accept_length) of
    greedy chain drafting with `eval_steps` draft tokens, over these prompts' greedy answers."""
    seqs = generate(target, prompts, recipe.eval_tokens, recipe.gen_batch, pad, device)
    embed = target.get_input_embeddings()
    tokens = verifies = 0
    for prompt, seq, (feats, _) in zip(prompts, seqs, features(target, seqs, device)):
        # the prefill gave the first answer token (seq[len(prompt)]) and the target's features up to it
        p, end = len(prompt), len(seq) - 1
        tokens += 1
        while p < end:
            d = propose(draft, embed, seq, feats, p, recipe.eval_steps, device)
            a = 0
            while a < len(d) and p + 1 + a <= end and d[a] == seq[p + 1 + a]:
                a += 1
            gained = min(a + 1, end - p)
            tokens, verifies, p = tokens + gained, verifies + 1, p + gained
    return DraftAcceptance(round(tokens / max(1, verifies), 4), tokens, verifies, len(prompts))


# ---------------------------------------------------------------- files


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_target(model, tok, out: Path) -> None:
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


def save_draft(draft: Draft, target_cfg, out: Path) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in draft.state_dict().items()}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": draft.h,
           "intermediate_size": draft.midlayer.mlp.gate_proj.out_features, "num_hidden_layers": 1,
           "num_attention_heads": draft.heads, "num_key_value_heads": draft.heads, "head_dim": draft.hd,
           "vocab_size": target_cfg.vocab_size, "draft_vocab_size": target_cfg.vocab_size,
           "target_hidden_size": target_cfg.hidden_size, "max_position_embeddings": target_cfg.max_position_embeddings,
           "rms_norm_eps": EPS, "rope_theta": ROPE_THETA, "hidden_act": "silu", "tie_word_embeddings": False,
           "torch_dtype": "bfloat16", "eos_token_id": target_cfg.eos_token_id, "pad_token_id": target_cfg.pad_token_id,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [i - 1 for i in aux_layers(target_cfg.num_hidden_layers)]}}
    (out / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")


def _prompts(prep: Path, manifest: PrepManifest, name: str) -> list[list[int]]:
    ids = np.fromfile(prep / f"prompts-{name}.u16", dtype="<u2").astype(np.int64).tolist()
    off = manifest.prompts[name]
    return [ids[a:b] for a, b in zip(off, off[1:])]


def _check_prep(prep: Path) -> PrepManifest:
    manifest = PrepManifest.read(prep)
    for name, sha in manifest.files.items():
        if _sha(prep / name) != sha:
            raise OSError(f"{prep / name}: sha256 differs from manifest.json: prepare again")
    return manifest


def drafter(prep: Path, target, tok, out: Path, recipe: Recipe, device: str, log=print) -> PairRecord:
    """The drafter half: the target's answers, the EAGLE-3 drafter, its own acceptance per domain."""
    manifest = _check_prep(prep)
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    prompts = [p for d in recipe.draft_domains for p in _prompts(prep, manifest, f"draft-{d}")[:recipe.draft_prompts]]
    t1 = time.time()
    seqs = generate(target, prompts, recipe.gen_tokens, recipe.gen_batch, pad, device)
    log(f"answers: {len(seqs)} x {recipe.gen_tokens} tokens ({time.time() - t1:.0f} s)")
    draft, dinfo = train_draft(target, seqs, recipe, device, log)
    save_draft(draft, target.config, out / "draft")
    acc = {d: acceptance(target, draft, _prompts(prep, manifest, f"eval-{d}")[:recipe.eval_prompts], recipe, pad, device)
           for d in recipe.eval_domains}
    log("drafter's own acceptance (chain of %d): %s" % (recipe.eval_steps,
        ", ".join(f"{d} {a.accept_length}" for d, a in acc.items())))
    return PairRecord(answers={"prompts": len(prompts), "new_tokens": recipe.gen_tokens}, draft=dinfo, acceptance=acc)


def _record(out: Path, prep: Path, recipe: Recipe, device: str, parts: PairRecord) -> PairRecord:
    """pair.json: the halves' record (`parts`, the fields they set) between what every pair records."""
    files = {p.relative_to(out).as_posix(): _sha(p) for p in sorted(out.rglob("*")) if p.is_file()
             and p.name != "pair.json"}
    record = PairRecord(recipe=recipe.record(), prep_manifest_sha256=_sha(prep / "manifest.json"), device=device,
                        device_name=torch.cuda.get_device_name() if device == "cuda" else "cpu",
                        versions={"torch": torch.__version__, "transformers": __import__("transformers").__version__},
                        **{k: getattr(parts, k) for k in parts.model_fields_set},
                        files=files, weights={d.name: folder_digest(d) for d in (out / "target", out / "draft")
                                              if d.exists()})
    record.write(out / "pair.json")
    return record


def train(prep: Path, out: Path, recipe: Recipe, device: str | None = None, log=print) -> PairRecord:
    """The whole pair: the target from the prepared text, then the drafter."""
    from transformers import AutoTokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(recipe.seed)
    _check_prep(prep)
    tok = AutoTokenizer.from_pretrained(prep / "tokenizer")
    tokens = np.fromfile(prep / "tokens.u16", dtype="<u2")
    log(f"device {device}; {len(tokens):,} training tokens")
    t0 = time.time()
    target, tinfo = train_target(tokens, recipe, tok, device, log)
    save_target(target, tok, out / "target")
    target = target.to(torch.float32) if device == "cpu" else target
    if recipe.draft_steps == 0:  # a target alone (the quickstart's: n-gram speculation needs no drafter)
        return _record(out, prep, recipe, device, PairRecord(target=tinfo, seconds=round(time.time() - t0, 1)))
    half = drafter(prep, target, tok, out, recipe, device, log)
    return _record(out, prep, recipe, device, PairRecord(target=tinfo, answers=half.answers, draft=half.draft,
                                                         acceptance=half.acceptance,
                                                         seconds=round(time.time() - t0, 1)))


def retrain_drafter(prep: Path, target_dir: Path, out: Path, recipe: Recipe, device: str | None = None,
                    log=print) -> PairRecord:
    """A new drafter for a target already trained (its folder), into out/draft."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(recipe.seed)
    tok = AutoTokenizer.from_pretrained(target_dir)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    target = LlamaForCausalLM.from_pretrained(target_dir, dtype=dtype).to(device).eval()
    t0 = time.time()
    half = drafter(prep, target, tok, out, recipe, device, log)
    return _record(out, prep, recipe, device, PairRecord(
        target_dir=str(target_dir), target_sha256=_sha(target_dir / "model.safetensors"), answers=half.answers,
        draft=half.draft, acceptance=half.acceptance, seconds=round(time.time() - t0, 1)))
