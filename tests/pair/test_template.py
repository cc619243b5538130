"""The pair's chat template writes render_chat's text from a request as sent and as SGLang 0.5.17 hands it over.

A served prompt must be the text the drafter was trained on. SGLang does not pass the request's JSON to the
template: it dumps every message and tool through its pydantic models and parses each assistant tool call's
arguments into a mapping. corpus.server_form() writes that form; here it is checked against SGLang 0.5.17's own
code (the pristine wheel source, through the toolkit's fetch_sglang): the models of protocol.py executed with
pydantic, and the statements of serving_chat.py (_process_messages, _apply_jinja_template) that build the
template's input executed on the same conversations. The template before commit 123a97c (tools printed as given,
arguments raw) is the control: it wrote another text from SGLang's form, and check_template must refuse it.
"""

from __future__ import annotations

import ast
import copy
import json
import random
import sys
import textwrap
import types
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from tests.conftest import need  # noqa: E402
from toolkit.errors import ToolFailure  # noqa: E402
from toolkit.pair.corpus import CHAT_TEMPLATE, render_chat, server_form  # noqa: E402
from toolkit.pair.prepare import PrepareError, check_template, train_tokenizer  # noqa: E402
from toolkit.workloads.gen import _one  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# CHAT_TEMPLATE of toolkit/pair/corpus.py at 123a97c~1, which every served agentic prompt missed
OLD_TEMPLATE = (
    "{% if tools %}<|tools|>\n{{ tools | tojson }}<|end|>\n{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] %}{{ m['content'] }}{% endif %}"
    "{% if m['tool_calls'] %}{% for c in m['tool_calls'] %}<|call|>{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] }}{% endfor %}{% endif %}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _conversations() -> list[tuple[str, list[dict], list[dict] | None]]:
    rows = [json.loads(line) for line in (ROOT / "toolkit/workloads/data/agentic.jsonl").read_text().splitlines()]
    generated = [(f"gen-{s}", *_one("agentic", random.Random(s))[:2]) for s in range(40)]
    return [(r["id"], r["messages"], r["tools"]) for r in rows] + generated


CONVERSATIONS = _conversations()


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(["def f(x):\n    return x\n", "<|call|>read_file {\"path\": \"a.py\"}"], vocab_size=300)


def test_conversations_cover_tool_calls() -> None:
    assert len(CONVERSATIONS) == 140
    assert all(tools for _, _, tools in CONVERSATIONS)
    assert all(any(m.get("tool_calls") for m in msgs) for _, msgs, _ in CONVERSATIONS)


def test_template_writes_render_chat_from_the_request_and_from_sglangs_form(tok) -> None:
    assert tok.chat_template == CHAT_TEMPLATE
    for name, messages, tools in CONVERSATIONS:
        want = render_chat(messages, tools, True)
        for form, (msgs, tls) in (("as sent", (messages, tools)), ("server", server_form(messages, tools))):
            got = tok.apply_chat_template(msgs, tools=tls, add_generation_prompt=True, tokenize=False)
            assert got == want, (name, form)


def test_old_template_is_refused(tok) -> None:
    """The control: the old template agrees with render_chat on the request as sent and on no conversation in
    SGLang's form (Python reprs of the arguments, tools in pydantic order), and check_template says so."""
    old = copy.copy(tok)
    old.chat_template = OLD_TEMPLATE
    for name, messages, tools in CONVERSATIONS:
        want = render_chat(messages, tools, True)
        assert old.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False) == want
        msgs, tls = server_form(messages, tools)
        got = old.apply_chat_template(msgs, tools=tls, add_generation_prompt=True, tokenize=False)
        assert got != want, name
        assert "{'" in got, name  # a Python repr of the parsed arguments
    chats = [("agentic", messages, tools) for _, messages, tools in CONVERSATIONS[:3]]
    check_template(tok, chats)
    with pytest.raises(PrepareError, match="as SGLang passes it"):
        check_template(old, chats)


# -- SGLang 0.5.17 itself

@pytest.fixture(scope="module")
def sglang() -> Path:
    from toolkit.image.source import fetch_sglang
    from toolkit.specs import load_spec

    spec = load_spec(ROOT / "envs" / "sglang-0.5.17-pair.yaml")
    assert spec.model.sglang.version == "0.5.17"
    try:
        src = fetch_sglang(spec.model.sglang, spec.model.python, log=lambda m: None)
    except ToolFailure as exc:
        need(False, f"the SGLang 0.5.17 wheel could not be fetched: {exc}")
    return src / "sglang"


def _tree(path: Path) -> tuple[str, ast.Module]:
    src = path.read_text()
    return src, ast.parse(src)


def _named(tree: ast.AST, cls: type, name: str):
    found = [n for n in ast.walk(tree) if isinstance(n, cls) and n.name == name]
    assert len(found) == 1, f"{name}: {len(found)} definitions"
    return found[0]


def _statement(src: str, within: ast.AST, head: str) -> str:
    """The one statement under `within` whose source starts with `head`, dedented to stand alone."""
    lines = src.splitlines(keepends=True)
    text = [textwrap.dedent("".join(lines[n.lineno - 1:n.end_lineno])) for n in ast.walk(within)
            if isinstance(n, ast.stmt) and lines[n.lineno - 1][n.col_offset:].startswith(head.split("\n")[0])]
    found = [t for t in text if t.startswith(head)]
    assert len(found) == 1, f"{head!r}: {len(found)} statements"
    return found[0]


def test_tool_keys_follow_protocol_field_order(sglang) -> None:
    src, tree = _tree(sglang / "srt/entrypoints/openai/protocol.py")
    fields = {c: [n.target.id for n in _named(tree, ast.ClassDef, c).body if isinstance(n, ast.AnnAssign)]
              for c in ("Function", "Tool")}
    assert fields == {"Function": ["description", "name", "parameters", "strict", "defer_loading"],
                      "Tool": ["type", "function", "defer_loading"]}
    # Function's model_serializer drops defer_loading when it is None; Tool has no serializer and keeps it
    ser = [n for n in _named(tree, ast.ClassDef, "Function").body if isinstance(n, ast.FunctionDef)
           and any("model_serializer" in ast.unparse(d) for d in n.decorator_list)]
    assert len(ser) == 1 and 'data.pop("defer_loading", None)' in ast.get_source_segment(src, ser[0])
    assert "if self.defer_loading is None" in ast.get_source_segment(src, ser[0])
    assert not any("model_serializer" in ast.unparse(d) for n in _named(tree, ast.ClassDef, "Tool").body
                   if isinstance(n, ast.FunctionDef) for d in n.decorator_list)
    for _, messages, tools in CONVERSATIONS:
        for t in server_form(messages, tools)[1]:
            assert list(t) == fields["Tool"]
            assert list(t["function"]) == [f for f in fields["Function"] if f != "defer_loading"]


@pytest.fixture(scope="module")
def sglang_form(sglang):
    """SGLang 0.5.17's own code that builds a chat template's input, as a function (messages, tools) -> the
    messages and tools given to apply_chat_template, and the template's content format."""
    from pydantic import TypeAdapter

    # protocol.py: the message, tool call and tool models, executed as written (they need pydantic and typing)
    psrc, ptree = _tree(sglang / "srt/entrypoints/openai/protocol.py")
    body = ptree.body
    first = body.index(_named(ptree, ast.ClassDef, "ChatCompletionMessageContentTextPart"))
    last = body.index(_named(ptree, ast.ClassDef, "Tool")) + 1
    assert ast.unparse(body[last]) == "ChatCompletionMessageGenericParam.model_rebuild()"
    code = "\n\n".join(ast.get_source_segment(psrc, n) for n in body[first:last + 1])
    protocol = types.ModuleType("sglang_0517_protocol")  # pydantic resolves annotations in the module
    sys.modules[protocol.__name__] = protocol
    try:
        exec(compile("from __future__ import annotations\nfrom typing import *\nfrom pydantic import BaseModel, "
                     "ConfigDict, Field, field_validator, model_serializer, model_validator\n" + code,
                     str(sglang / "srt/entrypoints/openai/protocol.py"), "exec"), protocol.__dict__)
    finally:
        del sys.modules[protocol.__name__]
    message = TypeAdapter(protocol.ChatCompletionMessageParam)

    # jinja_template_utils.py: the whole module but its import of sglang.srt.utils (ImageData, for media parts)
    jpath = sglang / "srt/parser/jinja_template_utils.py"
    jsrc, jtree = _tree(jpath)
    keep = [n for n in jtree.body if not (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("sglang"))]
    assert len(keep) == len(jtree.body) - 1
    jinja_utils = {"__name__": "sglang_0517_jinja_template_utils", "ImageData": None}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(jpath), "exec"), jinja_utils)

    # serving_chat.py: its helper functions, then the statements of the request path, executed in order
    spath = sglang / "srt/entrypoints/openai/serving_chat.py"
    ssrc, stree = _tree(spath)
    try:
        import orjson
    except ImportError:  # a stand-in with what these functions use
        orjson = types.SimpleNamespace(loads=json.loads, JSONDecodeError=json.JSONDecodeError)
    chat = {"orjson": orjson, "Dict": dict, "Any": object}
    for fn in ("parse_tool_call_arguments", "normalize_assistant_tool_call_arguments", "normalize_tool_content",
               "_handle_last_assistant_message"):
        exec(compile(ast.get_source_segment(ssrc, _named(stree, ast.FunctionDef, fn)), str(spath), "exec"), chat)
    apply = _named(stree, ast.FunctionDef, "_apply_jinja_template")
    # a request with tools and no tool_choice gets "auto" (protocol.py set_tool_choice_default): every tool, dumped
    steps = [_statement(ssrc, _named(stree, ast.FunctionDef, "_process_messages"),
                        "tools = [item.model_dump() for item in request.tools]"),
             _statement(ssrc, apply, "messages = [msg.model_dump() for msg in request.messages]"),
             _statement(ssrc, apply, "for message in messages:\n"),
             _statement(ssrc, apply, "for msg_dict in copy.deepcopy(messages):"),
             _statement(ssrc, apply, "openai_compatible_messages, assistant_prefix = (")]
    steps = [compile(s, str(spath), "exec") for s in steps]
    content_format = jinja_utils["detect_jinja_template_content_format"](CHAT_TEMPLATE)

    def form(messages, tools):
        request = types.SimpleNamespace(messages=[message.validate_python(m) for m in messages],
                                        tools=[protocol.Tool.model_validate(t) for t in tools],
                                        continue_final_message=False)
        self = types.SimpleNamespace(chat_encoding_spec=None)
        self._handle_last_assistant_message = partial(chat["_handle_last_assistant_message"], self)
        ns = {**chat, "copy": copy, "request": request, "self": self, "template_content_format": content_format,
              "process_content_for_template_format": jinja_utils["process_content_for_template_format"],
              "openai_compatible_messages": [], "image_data": [], "video_data": [], "audio_data": [],
              "modalities": []}
        for step in steps:
            exec(step, ns)
        assert ns["assistant_prefix"] is None
        return ns["openai_compatible_messages"], ns["tools"]

    return form, content_format


def test_server_form_is_what_sglang_hands_the_template(sglang_form) -> None:
    form, content_format = sglang_form
    assert content_format == "string"  # SGLang passes the template plain string contents
    for name, messages, tools in CONVERSATIONS:
        want = form(messages, tools)
        got = server_form(messages, tools)
        assert got == want, name
        assert json.dumps(got) == json.dumps(want), name  # key order too
        # not the request unchanged: the arguments are mappings, the tools carry `strict`
        assert want != (messages, tools), name
        assert all(isinstance(c["function"]["arguments"], dict) for m in want[0] for c in m.get("tool_calls", []))


def test_sglang_form_would_catch_the_old_server_form(sglang_form) -> None:
    """The check above can fail: the tools of 123a97c's server_form (no top-level defer_loading) are not SGLang's."""
    form, _ = sglang_form
    _, messages, tools = CONVERSATIONS[0]
    old_tools = [{"type": t.get("type", "function"),
                  "function": {"description": t["function"].get("description"), "name": t["function"]["name"],
                               "parameters": t["function"].get("parameters"), "strict": False}} for t in tools]
    assert form(messages, tools)[1] != old_tools
