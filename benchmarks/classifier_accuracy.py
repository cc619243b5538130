"""Accuracy of the domain classifier on labelled prompts (prints figures; asserts nothing).

    .venv/bin/python benchmarks/classifier_accuracy.py                 # rules, bundled workloads
    .venv/bin/python benchmarks/classifier_accuracy.py --fresh-seed 99 # also new prompts from the generators
    .venv/bin/python benchmarks/classifier_accuracy.py --embedding     # also the embedding classifier (extra `embed`)

The bundled workloads are what the rules were written against, so their accuracy is an upper
bound; --fresh-seed draws new prompts from the same generators with another seed. The probe set
(tests/workloads/data/classifier_probe.jsonl: 46 hand-written prompts in all three file formats,
phrased unlike the templates) is the more honest figure, though it too was read while the rules
were tuned. The embedding
classifier is scored with two-fold cross-validation (centroids from one half, scored on the other).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.schema.records import Prompt  # noqa: E402
from toolkit.workloads.classify import DOMAINS, EmbeddingClassifier, classify  # noqa: E402
from toolkit.workloads.formats import read_jsonl  # noqa: E402
from toolkit.workloads.gen import generate  # noqa: E402
from toolkit.workloads.bundled import bundled  # noqa: E402


PROBE = Path(__file__).resolve().parent.parent / "tests" / "workloads" / "data" / "classifier_probe.jsonl"


def confusion(title: str, truth: list[str], pred: list[str], seconds: float) -> float:
    width = max(len(d) for d in DOMAINS) + 2
    print(f"\n{title}: {len(truth)} prompts, {1000 * seconds / len(truth):.2f} ms/prompt")
    print("true \\ predicted".ljust(width + 4) + "".join(d[:10].rjust(12) for d in DOMAINS) + "  recall".rjust(10))
    for t in DOMAINS:
        row = [sum(1 for a, b in zip(truth, pred) if a == t and b == p) for p in DOMAINS]
        total = sum(row)
        recall = row[DOMAINS.index(t)] / total if total else float("nan")
        print(f"    {t.ljust(width)}" + "".join(str(c).rjust(12) for c in row) + f"{100 * recall:9.1f}%")
    acc = sum(a == b for a, b in zip(truth, pred)) / len(truth)
    print(f"    accuracy {100 * acc:.1f}%")
    return acc


def run_rules(title: str, prompts: list[Prompt]) -> None:
    t0 = time.perf_counter()
    pred = [classify(p).domain for p in prompts]
    confusion(title, [p.domain for p in prompts], pred, time.perf_counter() - t0)


def run_embedding(prompts: list[Prompt]) -> None:
    t0 = time.perf_counter()
    halves = [prompts[0::2], prompts[1::2]]
    truth, pred = [], []
    for train, test in ((halves[0], halves[1]), (halves[1], halves[0])):
        clf = EmbeddingClassifier(train, cache=False)
        truth += [p.domain for p in test]
        pred += [lab.domain for lab in clf.classify(test)]
    confusion("embedding (all-MiniLM-L6-v2, nearest centroid, 2-fold)", truth, pred, time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh-seed", type=int, default=None, help="also score new prompts from the generators")
    ap.add_argument("--embedding", action="store_true", help="also score the embedding classifier")
    args = ap.parse_args()
    labelled = [p for d in DOMAINS for p in bundled(d)]
    run_rules("rules, bundled workloads", labelled)
    if args.fresh_seed is not None:
        fresh = [p for d in DOMAINS for p in generate(d, 100, seed=args.fresh_seed)]
        run_rules(f"rules, fresh prompts (seed {args.fresh_seed})", fresh)
    probe = [it.prompt for it in read_jsonl(PROBE)]
    run_rules("rules, hand-written probe set", probe)
    if args.embedding:
        run_embedding(labelled)
        t0 = time.perf_counter()
        pred = [lab.domain for lab in EmbeddingClassifier(labelled).classify(probe)]
        confusion("embedding, probe set (centroids from the bundled workloads)", [p.domain for p in probe], pred,
                  time.perf_counter() - t0)


if __name__ == "__main__":
    main()
