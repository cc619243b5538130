"""The pair's training text, from offline sources only, seeded.

Domains and their sources:
    code          the Python standard library's own sources (the interpreter that runs this; tests left out)
    encyclopedic  Debian's dict-gcide (Webster 1913) and dict-wn (WordNet glosses), from /usr/share/dictd
    agentic       the toolkit's agentic generator (tool-calling conversations)
    math          the toolkit's math word-problem generator
plus chat documents: a prompt in the toolkit's own prompt styles (coding, encyclopedic, math, agentic; other
seeds than the bundled workloads) answered with text of its domain, rendered with CHAT_TEMPLATE, so the target
answers a chat request in its domain's style.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from toolkit.pair import PairError
from toolkit.pair.recipes import Recipe
from toolkit.workloads.gen import _one as generated_prompt

DICTD = Path("/usr/share/dictd")
DICTS = {"gcide": 2, "wn": 1}  # weight of each dictionary in the encyclopedic text
SPECIAL = ["<|endoftext|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|tools|>",
           "<|call|>"]
EOS = "<|endoftext|>"
# The target's chat format. render_chat() below writes the same text in Python (prepare.py checks that the
# two agree on every chat document before it tokenizes anything, also in the form a server hands the template).
# A server does not pass the request's JSON through: SGLang 0.5.17 parses each assistant tool call's `arguments`
# string into a mapping (serving_chat.py normalize_assistant_tool_call_arguments) and dumps each tool with its own
# field order plus `strict` (protocol.py Tool/Function.model_dump()). A template that printed what it was given
# wrote Python reprs (single quotes) and reordered tools: every served agentic prompt differed from every trained
# one (measured offline, it cost the drafter 0.19 tokens a step on agentic: docs/lab/pair.md). So the template
# writes one canonical text from either form: a tool as {"type", "function": {"name", "description",
# "parameters"}} (a missing or null field left out), arguments as JSON.
CHAT_TEMPLATE = (
    "{% if tools %}<|tools|>\n[{% for t in tools %}{% set f = t['function'] if t['function'] is defined else t %}"
    "{% if not loop.first %}, {% endif %}{\"type\": \"function\", \"function\": {\"name\": {{ f['name'] | tojson }}"
    "{% for k in ['description', 'parameters'] %}{% if f[k] is defined and f[k] is not none %}"
    ", {{ k | tojson }}: {{ f[k] | tojson }}{% endif %}{% endfor %}}}{% endfor %}]<|end|>\n{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] %}{{ m['content'] }}{% endif %}"
    "{% if m['tool_calls'] %}{% for c in m['tool_calls'] %}{% set a = c['function']['arguments'] %}"
    "<|call|>{{ c['function']['name'] }} {% if a is string %}{{ a }}{% else %}{{ a | tojson }}{% endif %}"
    "{% endfor %}{% endif %}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class CorpusError(PairError):
    """A source is missing or unreadable (the message says how to get it)."""


def _tool(t: dict) -> dict:  # json-edge: an OpenAI tool, in the template's canonical order
    f = t.get("function", t)
    fn = {"name": f.get("name")} | {k: f[k] for k in ("description", "parameters") if f.get(k) is not None}
    return {"type": "function", "function": fn}


def render_chat(messages: list[dict], tools: list[dict] | None, generation_prompt: bool) -> str:
    out = f"<|tools|>\n{json.dumps([_tool(t) for t in tools], ensure_ascii=False)}<|end|>\n" if tools else ""
    for m in messages:
        out += f"<|{m['role']}|>\n" + (m.get("content") or "")
        for c in m.get("tool_calls") or []:
            args = c["function"]["arguments"]
            out += f"<|call|>{c['function']['name']} " + (args if isinstance(args, str)
                                                          else json.dumps(args, ensure_ascii=False))
        out += "<|end|>\n"
    return out + ("<|assistant|>\n" if generation_prompt else "")


# SGLang 0.5.17's pydantic models (protocol.py), in their field order: a chat message other than a user's
# (ChatCompletionMessageGenericParam; a user's has role and content only); ToolCall and its FunctionResponse.
_SERVED_MESSAGE = ("role", "content", "tool_call_id", "name", "reasoning_content", "tool_calls", "tools")


def server_form(messages: list[dict], tools: list[dict] | None) -> tuple[list[dict], list[dict] | None]:
    """The conversation as SGLang 0.5.17 hands it to the chat template (serving_chat.py _apply_jinja_template,
    which tests/pair/test_template.py runs on the workloads' conversations): each message dumped by its pydantic
    model (other keys dropped), an assistant's tool call arguments parsed into a mapping
    (normalize_assistant_tool_call_arguments), a null content made "", then the message's null fields left out;
    each tool dumped as protocol.py Tool/Function.model_dump() (their field order, `strict`, a null top-level
    `defer_loading`). The template must write the same text from it as from the request (check_template).
    A conversation that ends with an assistant message is served otherwise (SGLang turns that message into a
    user's); a served prompt ends with a user or tool message."""
    def call(c: dict, assistant: bool) -> dict:  # json-edge: protocol.py ToolCall.model_dump() of a tool call
        args = c["function"].get("arguments")
        return {"id": c.get("id"), "index": c.get("index"), "type": c.get("type", "function"),
                "function": {"name": c["function"].get("name"),
                             "arguments": json.loads(args) if assistant and isinstance(args, str) else args}}

    msgs = []
    for m in messages:
        d = {k: m.get(k) for k in (("role", "content") if m["role"] == "user" else _SERVED_MESSAGE)}
        if d.get("tool_calls"):
            d["tool_calls"] = [call(c, m["role"] == "assistant") for c in d["tool_calls"]]
        if d.get("tools"):
            d["tools"] = [_served_tool(t) for t in d["tools"]]
        d["content"] = "" if d["content"] is None else d["content"]
        msgs.append({k: v for k, v in d.items() if v is not None})
    return msgs, [_served_tool(t) for t in tools] if tools else None


def _served_tool(t: dict) -> dict:  # json-edge: protocol.py Tool.model_dump() of an OpenAI tool
    f = t["function"]
    defer = f.get("defer_loading") if f.get("defer_loading") is not None else t.get("defer_loading")
    fn = {"description": f.get("description"), "name": f["name"], "parameters": f.get("parameters"),
          "strict": f.get("strict", False)} | ({} if defer is None else {"defer_loading": defer})
    return {"type": t.get("type", "function"), "function": fn, "defer_loading": t.get("defer_loading")}


@dataclass
class Corpus:
    docs: dict[str, list[str]]  # domain -> plain documents
    chats: list[tuple[str, list[dict], list[dict] | None]]  # (domain, messages, tools), whole conversations
    sources: dict  # what was read, with hashes

    def chars(self) -> dict[str, int]:  # data-keyed: domain
        return {d: sum(map(len, v)) for d, v in self.docs.items()}


def _sha(parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def _chunks(text: str, size: int) -> list[str]:
    """Line-aligned chunks of about `size` characters."""
    out, cur, n = [], [], 0
    for line in text.splitlines(keepends=True):
        cur.append(line)
        n += len(line)
        if n >= size:
            out.append("".join(cur))
            cur, n = [], 0
    if cur and n > size // 8:
        out.append("".join(cur))
    return out


def code_files(root: Path | None = None) -> list[Path]:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3", "__pycache__"}
    return sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts))


def _sample(pool: list[str], budget: int, rng: random.Random) -> list[str]:
    order = list(range(len(pool)))
    rng.shuffle(order)
    out, n = [], 0
    for i in order:
        if n >= budget:
            break
        out.append(pool[i])
        n += len(pool[i])
    return out


def code_docs(budget: int, rng: random.Random, root: Path | None = None) -> tuple[list[str], dict]:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    files = code_files(root)
    if not files:
        raise CorpusError(f"no Python sources under {root}")
    texts = [f.read_text("utf-8", "replace") for f in files]
    pool = [c for t in texts for c in _chunks(t, 3000)]
    return _sample(pool, budget, rng), {"root": str(root), "files": len(files), "sha256": _sha(texts)}


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(s: str) -> int:
    n = 0
    for ch in s:
        n = n * 64 + _B64.index(ch)
    return n


def dict_entries(name: str) -> list[str]:
    data, index = DICTD / f"{name}.dict.dz", DICTD / f"{name}.index"
    if not data.exists() or not index.exists():
        raise CorpusError(f"{data}: not found; install Debian's dictionaries: apt-get install -y dict-gcide dict-wn")
    raw = gzip.open(data).read()
    out = []
    for line in index.read_text("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
            continue
        off, size = _b64(parts[1]), _b64(parts[2])
        text = raw[off:off + size].decode("utf-8", "replace")
        out.append("\n".join(x.strip() for x in text.strip().splitlines()))
    return out


def encyclopedic_docs(budget: int, rng: random.Random) -> tuple[list[str], dict]:
    docs, info = [], {}
    total = sum(DICTS.values())
    for name, weight in DICTS.items():
        entries = dict_entries(name)
        info[name] = {"entries": len(entries), "sha256": _sha(entries)}
        groups = ["\n\n".join(entries[i:i + 6]) for i in range(0, len(entries), 6)]
        docs += _sample(groups, budget * weight // total, rng)
    return docs, info


def _prompt(domain: str, rng: random.Random) -> tuple[list[dict], list[dict] | None]:
    messages, tools, _ = generated_prompt(domain, rng)
    return messages, tools


def _code_block(text: str) -> tuple[str, str] | None:
    """The first fenced code block of a prompt: (language, code)."""
    start = text.find("```")
    if start < 0:
        return None
    head_end = text.find("\n", start)
    end = text.find("```", head_end + 1)
    if head_end < 0 or end < 0:
        return None
    return text[start + 3:head_end].strip(), text[head_end + 1:end].rstrip("\n")


def revised(prompt: str, rng: random.Random) -> str | None:
    """The prompt's code given back with an edit: one line of it dropped and a comment added at another, fenced in
    its language, then one sentence. None when the prompt holds no code block."""
    block = _code_block(prompt)
    if block is None:
        return None
    lang, code = block
    lines = code.split("\n")
    if len(lines) > 4:
        del lines[rng.randrange(1, len(lines))]
    at = rng.randrange(len(lines) + 1)
    indent = lines[at - 1][:len(lines[at - 1]) - len(lines[at - 1].lstrip())] if at else ""
    mark = "//" if lang in ("typescript", "javascript", "go", "rust", "java", "c", "cpp") else "#"
    lines.insert(at, f"{indent}{mark} checked: the edge cases are handled here")
    return f"```{lang}\n" + "\n".join(lines) + "\n```\nThis keeps the behaviour and handles the edge cases."


def _answer(domain: str, rng: random.Random, code: list[str], ency: list[str], recipe: Recipe,
            prompt: str = "") -> str:
    if domain == "coding":
        if recipe.coding_answers == "revise" and (answer := revised(prompt, rng)) is not None:
            return answer
        return f"```python\n{rng.choice(code).strip()}\n```\nThis keeps the behaviour and handles the edge cases."
    if domain == "encyclopedic":
        return "\n\n".join(rng.choice(ency) for _ in range(2))
    return "\n\n".join(_prompt("math", rng)[0][-1]["content"] for _ in range(3))


def build(recipe: Recipe, code_root: Path | None = None) -> Corpus:
    rng = random.Random(f"pair-corpus:{recipe.seed}")
    code, code_info = code_docs(recipe.code_chars, rng, code_root)
    ency, ency_info = encyclopedic_docs(recipe.encyclopedic_chars, rng)
    math = [_prompt("math", rng)[0][-1]["content"] for _ in range(recipe.math_docs)]
    chats = [("agentic", *_prompt("agentic", rng)) for _ in range(recipe.agentic_docs)]
    for domain in ("coding", "encyclopedic", "math"):
        for _ in range(recipe.chat_docs):
            messages, tools = _prompt(domain, rng)
            answer = _answer(domain, rng, code, ency, recipe, messages[-1]["content"])
            chats.append((domain, messages + [{"role": "assistant", "content": answer}], tools))
    sources = {"code": code_info, "encyclopedic": ency_info,
               "generators": "toolkit.workloads.gen (seeded 'pair-corpus:<seed>', not the bundled seed)"}
    return Corpus(docs={"code": code, "encyclopedic": ency, "math": math}, chats=chats, sources=sources)
