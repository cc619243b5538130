"""JSON lines readers: ShareGPT, OpenAI chat `messages`, plain prompt/completion -> Prompt.

Each line is one object; the format is recognised per line by its key (`conversations`, `messages`,
`prompt`). When a conversation ends with an assistant turn, that turn is the reference completion:
it is removed from the prompt and its length becomes the prompt's target output length.
A malformed line raises ToolkitError naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from toolkit.schema.records import Prompt
from toolkit.errors import ToolkitError
from toolkit.fsutil import folder_not_file

SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
                  "bing": "assistant", "bard": "assistant", "model": "assistant", "system": "system",
                  "function_call": "assistant", "observation": "tool", "tool": "tool", "function": "tool"}
OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
DEFAULT_OUTPUT_LEN = 256
MAX_OUTPUT_LEN = 4096
SHAPES = ('{"conversations": [{"from": "human", "value": "..."}, ...]} (ShareGPT), '
          '{"messages": [{"role": "user", "content": "..."}], "tools": [...]} (OpenAI chat), '
          'or {"prompt": "...", "completion": "..."}')

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def approx_tokens(text: str) -> int:
    """A tokenizer-free length: words and punctuation marks (BPE tokenizers give roughly 1.0-1.5x this)."""
    return len(_TOKEN_RE.findall(text))


def prompt_text(p: Prompt) -> str:
    """Everything the model reads: the conversation plus the tool definitions."""
    text = p.as_text()
    if p.tools:
        text += "\n" + json.dumps(p.tools, sort_keys=True)
    return text


def normalised_hash(p: Prompt) -> str:
    """Hash of the prompt's content, insensitive to roles, case and whitespace (used for holdout)."""
    if p.prompt is not None:
        parts = [p.prompt]
    else:
        parts = []
        for m in p.messages or []:
            c = m.get("content")
            if isinstance(c, list):
                c = " ".join(x.get("text", "") for x in c if isinstance(x, dict))
            parts.append(c or "")
            if m.get("tool_calls"):
                parts.append(json.dumps(m["tool_calls"], sort_keys=True))
    text = " ".join(" ".join(parts).lower().split())
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Item:
    prompt: Prompt
    completion: str | None
    line: int


class _Bad(Exception):
    pass


def _text(value, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # OpenAI content parts
        if all(isinstance(c, dict) and isinstance(c.get("text", ""), str) for c in value):
            return " ".join(c.get("text", "") for c in value)
    raise _Bad(f"{what} must be a string, not {type(value).__name__}")


def _sharegpt(obj: dict) -> tuple[list[dict], list[dict] | None]:
    conv = obj["conversations"]
    if not isinstance(conv, list) or not conv:
        raise _Bad("`conversations` must be a non-empty list of {\"from\": ..., \"value\": ...}")
    messages = []
    for i, turn in enumerate(conv):
        if not isinstance(turn, dict) or "from" not in turn or "value" not in turn:
            raise _Bad(f"conversations[{i}] must be an object with `from` and `value`")
        role = SHAREGPT_ROLES.get(str(turn["from"]).lower())
        if role is None:
            raise _Bad(f"conversations[{i}].from is {turn['from']!r}; expected one of {sorted(SHAREGPT_ROLES)}")
        messages.append({"role": role, "content": _text(turn["value"], f"conversations[{i}].value")})
    tools = obj.get("tools")
    if isinstance(tools, str):  # some agent data sets store the tool list as a JSON string
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise _Bad(f"`tools` is a string that is not JSON: {exc.msg}") from None
    return messages, tools


def _openai(obj: dict) -> tuple[list[dict], list[dict] | None]:
    msgs = obj["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise _Bad("`messages` must be a non-empty list of {\"role\": ..., \"content\": ...}")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or "role" not in m:
            raise _Bad(f"messages[{i}] must be an object with a `role`")
        if m["role"] not in OPENAI_ROLES:
            raise _Bad(f"messages[{i}].role is {m['role']!r}; expected one of {sorted(OPENAI_ROLES)}")
        content = m.get("content")
        if content is None and not m.get("tool_calls"):
            raise _Bad(f"messages[{i}] has no `content` (only an assistant turn with `tool_calls` may omit it)")
        if content is not None:
            _text(content, f"messages[{i}].content")
        if "tool_calls" in m and not isinstance(m["tool_calls"], list):
            raise _Bad(f"messages[{i}].tool_calls must be a list")
        out.append(dict(m))
    return out, obj.get("tools")


def _check_tools(tools) -> list[dict] | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise _Bad("`tools` must be a list of tool definitions ({\"type\": \"function\", \"function\": {...}})")
    for i, t in enumerate(tools):
        fn = t.get("function", t)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _Bad(f"tools[{i}] needs a function name (`function.name`)")
    return tools or None


def parse_line(obj, *, default_id: str, default_domain: str) -> tuple[Prompt, str | None]:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object, got {type(obj).__name__}")
    completion, plain = None, None
    if "conversations" in obj:
        messages, tools = _sharegpt(obj)
    elif "messages" in obj:
        messages, tools = _openai(obj)
    elif "prompt" in obj:
        plain = _text(obj["prompt"], "`prompt`")
        if not plain.strip():
            raise _Bad("`prompt` is empty")
        messages, tools = None, None
        if obj.get("completion") is not None:
            completion = _text(obj["completion"], "`completion`")
    else:
        raise _Bad(f"unknown record shape (keys: {', '.join(sorted(obj)) or 'none'})")
    tools = _check_tools(tools)
    if messages is not None:
        if messages[-1]["role"] == "assistant" and len(messages) > 1:
            last = messages.pop()
            completion = (last.get("content") or "") + (json.dumps(last["tool_calls"]) if last.get("tool_calls") else "")
        if not any(m["role"] in ("user", "tool") for m in messages):
            raise _Bad("the conversation has no user turn")
    out_len = obj.get("target_output_len", obj.get("max_tokens"))
    if out_len is None:
        out_len = min(MAX_OUTPUT_LEN, max(16, approx_tokens(completion))) if completion else DEFAULT_OUTPUT_LEN
    if not isinstance(out_len, int) or isinstance(out_len, bool) or out_len < 1:
        raise _Bad(f"`target_output_len` must be a positive integer, not {out_len!r}")
    pid = obj.get("id", default_id)
    domain = obj.get("domain", default_domain)
    if not isinstance(pid, (str, int)) or not isinstance(domain, str):
        raise _Bad("`id` must be a string or integer and `domain` a string")
    prompt = Prompt(id=str(pid), domain=domain, messages=messages, tools=tools,
                    prompt=plain, target_output_len=out_len)
    return prompt, completion


def read_jsonl(path: Path, *, domain: str | None = None) -> list[Item]:
    """All records of a JSON lines file; the first malformed line raises ToolkitError with file:line."""
    path = Path(path)
    if not path.is_file():
        raise ToolkitError(folder_not_file(path) or f"file not found: {path}",
                           hint="give a JSON lines file (one record per line)")
    domain = domain or path.stem
    items: list[Item] = []
    with path.open(encoding="utf-8", errors="strict") as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ToolkitError(f"not valid JSON: {exc.msg}", file=path, line=n, column=exc.colno,
                                       hint="each line must be one complete JSON object") from None
                try:
                    prompt, completion = parse_line(obj, default_id=f"{path.stem}-{n}", default_domain=domain)
                except _Bad as exc:
                    raise ToolkitError(str(exc), file=path, line=n, hint=f"each line must be {SHAPES}") from None
                items.append(Item(prompt, completion, n))
        except UnicodeDecodeError as exc:
            raise ToolkitError(f"not UTF-8 text ({exc.reason})", file=path, hint="save the file as UTF-8") from None
    if not items:
        raise ToolkitError("the file holds no records", file=path, hint=f"each line must be {SHAPES}")
    seen: dict[str, int] = {}
    for it in items:
        if it.prompt.id in seen:
            raise ToolkitError(f"duplicate id {it.prompt.id!r} (first on line {seen[it.prompt.id]})", file=path,
                               line=it.line, hint="give each record a unique `id`, or leave `id` out")
        seen[it.prompt.id] = it.line
    return items
