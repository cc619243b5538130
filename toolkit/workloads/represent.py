"""How far is a workload from what the drafter was trained on?

Side by side for the training sample and the workload: domain mix (classify.py), prompt length
distribution (tokens; tokenizer-free approximation unless a tokenizer is given), lexical overlap,
and one divergence score:

    score = 0.75 * JS(domain mix) + 0.25 * JS(length histogram)      (JS base 2, in [0, 1])

    close < 0.45 <= moderate < 0.65 <= far

A single-domain workload drawn from the main domain of a two-domain training mix scores about
0.3 (close); one from a domain the drafter never saw scores at least 0.75 (far).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel, Field

from toolkit.schema.records import Prompt
from toolkit.errors import ToolkitError
from toolkit.workloads.classify import DOMAINS, classify_all
from toolkit.workloads.formats import approx_tokens, prompt_text

W_DOMAIN, W_LENGTH = 0.75, 0.25
CLOSE_BELOW, FAR_FROM = 0.45, 0.65
LENGTH_EDGES = (0, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_WORD = re.compile(r"[a-z][a-z0-9_']{2,}")

Verdict = Literal["close", "moderate", "far"]


class Lengths(BaseModel):
    mean: float
    p50: float
    p90: float
    max: int
    bins: dict[str, float] = Field(description="share of prompts per token-length bin")


class Side(BaseModel):
    name: str
    n: int
    domain_mix: dict[str, float] = Field(description="share of prompts per domain (classified)")
    lengths: Lengths
    output_p50: float = Field(description="median target output length (from reference completions where given)")


class Report(BaseModel):
    train: Side
    workload: Side
    workload_hash: str | None = None
    classifier: str
    length_unit: str
    vocab_coverage: float = Field(description="share of the workload's word tokens that occur in the training data")
    vocab_jaccard: float = Field(description="|shared word types| / |all word types|")
    js_domain: float
    js_length: float
    score: float = Field(description=f"{W_DOMAIN} * js_domain + {W_LENGTH} * js_length")
    verdict: Verdict
    reason: str
    thresholds: dict[str, float] = Field(default_factory=lambda: {"close_below": CLOSE_BELOW, "far_from": FAR_FROM})


def js_divergence(p: list[float], q: list[float]) -> float:
    """Jensen-Shannon divergence in bits (0: identical, 1: disjoint support)."""
    a, b = np.asarray(p, float), np.asarray(q, float)
    a, b = a / a.sum(), b / b.sum()
    m = (a + b) / 2

    def kl(x):
        nz = x > 0
        return float(np.sum(x[nz] * np.log2(x[nz] / m[nz])))

    return max(0.0, min(1.0, (kl(a) + kl(b)) / 2))


def _bin_labels() -> list[str]:
    edges = list(LENGTH_EDGES)
    return [f"{lo}-{hi - 1}" for lo, hi in zip(edges, edges[1:])] + [f"{edges[-1]}+"]


def _lengths(counts: list[int]) -> Lengths:
    labels = _bin_labels()
    idx = np.searchsorted(LENGTH_EDGES, counts, side="right") - 1
    hist = Counter(int(i) for i in idx)
    arr = np.asarray(counts)
    return Lengths(mean=round(float(arr.mean()), 1), p50=float(np.percentile(arr, 50)),
                   p90=round(float(np.percentile(arr, 90)), 1), max=int(arr.max()),
                   bins={labels[i]: round(hist.get(i, 0) / len(counts), 4) for i in range(len(labels))})


def _mix(labels: list[str]) -> dict[str, float]:  # data-keyed: domain
    c = Counter(labels)
    return {d: round(c.get(d, 0) / len(labels), 4) for d in DOMAINS}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _reason(train: Side, work: Side, js_d: float, js_l: float, verdict: str) -> str:
    top = sorted(((s, d) for d, s in work.domain_mix.items() if s > 0), reverse=True)[:3]
    wdesc = ", ".join(f"{d} {_pct(s)}" for s, d in top)
    tdesc = ", ".join(f"{d} {_pct(train.domain_mix[d])}" for _, d in top)
    shared = sum(min(work.domain_mix[d], train.domain_mix[d]) for d in DOMAINS)
    text = f"workload is {wdesc}; the training data has {tdesc} (shared domain mass {_pct(shared)}, JS {js_d:.2f})"
    if verdict == "far":
        text = "far from the drafter's training data: " + text
    lr = work.lengths.p50 / max(1.0, train.lengths.p50)
    if js_l >= 0.3 or lr > 3 or lr < 1 / 3:
        text += (f"; prompt lengths differ: median {work.lengths.p50:.0f} vs {train.lengths.p50:.0f} tokens "
                 f"(JS {js_l:.2f})")
    else:
        text += f"; prompt lengths similar (median {work.lengths.p50:.0f} vs {train.lengths.p50:.0f}, JS {js_l:.2f})"
    return text


def _vocab(prompts: list[Prompt]) -> Counter:
    c: Counter = Counter()
    for p in prompts:
        c.update(_WORD.findall(prompt_text(p).lower()))
    return c


def representativeness(train_prompts: list[Prompt], workload_prompts: list[Prompt], *, classifier: str = "rules",
                       labelled: list[Prompt] | None = None, train_name: str = "train",
                       workload_name: str = "workload", workload_hash: str | None = None,
                       length_fn: Callable[[str], int] | None = None, length_unit: str | None = None) -> Report:
    """Compare a workload with a sample of the drafter's training data (see the module doc)."""
    if not train_prompts or not workload_prompts:
        raise ToolkitError("both the training sample and the workload need at least one prompt")
    length_fn = length_fn or approx_tokens
    labels = classify_all(train_prompts + workload_prompts, classifier, labelled)
    nt = len(train_prompts)
    sides = []
    for name, prompts, labs in ((train_name, train_prompts, labels[:nt]), (workload_name, workload_prompts, labels[nt:])):
        sides.append(Side(name=name, n=len(prompts), domain_mix=_mix([lab.domain for lab in labs]),
                          lengths=_lengths([length_fn(prompt_text(p)) for p in prompts]),
                          output_p50=float(np.median([p.target_output_len for p in prompts]))))
    train, work = sides
    js_d = js_divergence(list(train.domain_mix.values()), list(work.domain_mix.values()))
    js_l = js_divergence(list(train.lengths.bins.values()), list(work.lengths.bins.values()))
    score = W_DOMAIN * js_d + W_LENGTH * js_l
    verdict: Verdict = "close" if score < CLOSE_BELOW else "far" if score >= FAR_FROM else "moderate"
    tv, wv = _vocab(train_prompts), _vocab(workload_prompts)
    total = sum(wv.values())
    coverage = sum(n for w, n in wv.items() if w in tv) / total if total else 0.0
    union = len(tv.keys() | wv.keys())
    jaccard = len(tv.keys() & wv.keys()) / union if union else 0.0
    return Report(train=train, workload=work, workload_hash=workload_hash, classifier=classifier,
                  length_unit=length_unit or "approx tokens (words and punctuation marks)",
                  vocab_coverage=round(coverage, 4), vocab_jaccard=round(jaccard, 4), js_domain=round(js_d, 4),
                  js_length=round(js_l, 4), score=round(score, 4), verdict=verdict,
                  reason=_reason(train, work, js_d, js_l, verdict))


def hf_length_fn(tokenizer_dir: str) -> Callable[[str], int]:
    """Token counts from a local Hugging Face tokenizer folder (no hub access)."""
    from toolkit.extras import require_module

    AutoTokenizer = require_module("transformers", "local", "token counts from a tokenizer").AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])




def compare_to_training(training, workload, *, classifier: str = "rules") -> Report:
    """The matrix runner's entry point: a LoadedWorkload against the training file (a path)."""
    from pathlib import Path

    from toolkit.workloads.bundled import read_prompts

    training = Path(training)
    return representativeness(read_prompts(training), workload.prompts, classifier=classifier,
                              train_name=training.name, workload_name=workload.name, workload_hash=workload.hash)


__all__ = ["Report", "Side", "compare_to_training", "representativeness", "js_divergence"]
