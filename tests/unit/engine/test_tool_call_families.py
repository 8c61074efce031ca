"""Tool calls of every family the real chat templates declare (tests/fixtures/chat_templates), read while they
stream: each template renders a reply with calls the way its model writes them, and the family the formatter
picked reads the same calls back, whatever the size of the stream's pieces. Text without a call passes through
unchanged, and a call that cannot be read stays text."""

from __future__ import annotations

import json

import pytest

from fara_desktop.engine.chat_format import JinjaChatFormatter, reply_start
from fara_desktop.engine.template_sandbox import RenderBudget
from fara_desktop.engine.tool_calls import FAMILIES, ToolCallSplitter, split_tool_calls
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.tools import ToolCall, ToolSpec
from tests.helpers.paths import FIXTURES

TEMPLATES = sorted((FIXTURES / "chat_templates").glob("*.jinja"))
PIECE_SIZES = (1, 2, 3, 7, 64, 10_000)

WEATHER = ToolSpec(
    "get_weather",
    "Weather in a city.",
    json.dumps({"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "note": {"type": "string"}}, "required": ["city"]}),
)  # fmt: skip
TIME = ToolSpec(
    "get_current_time",
    "Current time in an IANA timezone.",
    json.dumps({"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}),
)
CALLS = (
    ToolCall("call00001", "get_current_time", json.dumps({"timezone": "Asia/Tokyo"})),
    ToolCall(
        "call00002", "get_weather", json.dumps({"city": 'São Paulo "centro"', "days": 3, "metric": True, "note": "42"})
    ),
)
SCHEMAS = {t.name: json.loads(t.parameters) for t in (WEATHER, TIME)}
# Families that write one call per reply (or whose templates render only the first).
ONE_CALL = {"llama 3 json", "gigachat 3", "gigachat 3.1", "gpt-oss"}

# Templates that do not show the tools to the model, or cannot render them: no tool support, said, never faked.
NO_TOOL_SUPPORT = {
    "CohereForAI-c4ai-command-r-plus-tool_use",  # the older tool format (parameter_definitions)
    "HuggingFaceTB-SmolLM3-3B",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai-DeepSeek-V3.1",
    "google-gemma-2-2b-it", "llama-cpp-rwkv-world", "microsoft-Phi-3.5-mini-instruct",
}  # fmt: skip


def _formatter(path):
    return JinjaChatFormatter(path.read_text(encoding="utf-8"), "<s>", "</s>")


def _rendered_reply(formatter, calls):
    """What the model would write for ``calls``, as its template renders the turn."""
    question = [ChatMessage("system", "SYS"), ChatMessage("user", "Weather and time?")]
    budget = RenderBudget()
    prompt = formatter._tools_render(question, [TIME, WEATHER], budget, True)
    full = formatter._tools_render([*question, ChatMessage("assistant", "", tool_calls=calls)], [TIME, WEATHER],
                                   budget, False)  # fmt: skip
    return full[reply_start(full, prompt) :]


def _stream(family, text, size):
    splitter = ToolCallSplitter(family, SCHEMAS)
    shown = "".join(splitter.feed(text[i : i + size]) for i in range(0, len(text), size)) + splitter.finish()
    return shown, [(c.name, c.arguments) for c in splitter.calls]


def test_every_template_either_has_a_family_or_says_it_has_no_tools():
    names = {p.stem: _formatter(p).tool_family for p in TEMPLATES}
    assert {n for n, f in names.items() if f is None} == NO_TOOL_SUPPORT
    assert len({f.name for f in names.values() if f is not None}) >= 20  # the families are many, not one


@pytest.mark.parametrize("path", [p for p in TEMPLATES if p.stem not in NO_TOOL_SUPPORT], ids=lambda p: p.stem)
def test_a_call_rendered_by_the_template_is_read_back_at_any_piece_size(path):
    formatter = _formatter(path)
    family = formatter.tool_family
    calls = CALLS[:1] if family.name in ONE_CALL else CALLS
    reply = _rendered_reply(formatter, calls)
    if not any(c.name in reply for c in calls):
        pytest.skip(f"{path.stem} never renders an earlier call (its family is named in its text: {family.name})")
    expected = [(c.name, json.loads(c.arguments)) for c in calls]
    for size in PIECE_SIZES:
        shown, read = _stream(family, reply, size)
        assert read == expected, (size, reply)
        assert "Asia/Tokyo" not in shown and "get_weather" not in shown, (size, shown)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_text_without_a_call_passes_through_unchanged(family):
    text = "Tokyo is at UTC+9 <b>bold</b> [1] {not a call} < tool_call > 100% — 東京\n" * 3
    for size in PIECE_SIZES:
        shown, read = _stream(family, text, size)
        assert read == [] and shown == text, (size, shown)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_an_unreadable_call_stays_text(family):
    text = f"Before. {family.starts[0]}not a call at all (((" if not family.at_start else "{not json"
    shown, read = _stream(family, text, 3)
    assert read == []
    assert "not a call at all" in shown or "not json" in shown


def test_hermes_content_before_a_call_is_shown_and_the_call_is_not():
    family = next(f for f in FAMILIES if f.name == "hermes / qwen")
    call = '{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}'
    text = f"Let me check.\n<tool_call>\n{call}\n</tool_call>"
    for size in PIECE_SIZES:
        shown, read = _stream(family, text, size)
        assert shown == "Let me check.\n" and read == [("get_current_time", {"timezone": "Asia/Tokyo"})]


def test_a_reply_cut_inside_a_call_still_reads_the_call_when_it_is_whole():
    family = next(f for f in FAMILIES if f.name == "gpt-oss")  # <|call|> ends generation: its text never comes
    content, calls = split_tool_calls(
        '<|channel|>commentary to=functions.get_current_time <|constrain|>json<|message|>{"timezone": "Asia/Tokyo"}',
        family,
    )
    assert content == ""
    assert [(c.name, c.arguments) for c in calls] == [("get_current_time", {"timezone": "Asia/Tokyo"})]


def test_a_model_looping_on_calls_is_cut_at_the_limit():
    family = next(f for f in FAMILIES if f.name == "hermes / qwen")
    one = '<tool_call>{"name": "t", "arguments": {}}</tool_call>'
    _, calls = split_tool_calls(one * 100, family)
    assert len(calls) == 16


def test_pythonic_calls_are_read_as_literals_and_never_evaluated():
    family = next(f for f in FAMILIES if f.name == "lfm2")
    _, calls = split_tool_calls("<|tool_call_start|>[t(x=__import__('os').getcwd())]<|tool_call_end|>", family)
    assert calls == []


def test_granite_3_calls_in_the_format_its_template_asks_for():
    family = next(f for f in FAMILIES if f.name == "granite 3")
    text = '<|tool_call|>[{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]'
    for size in PIECE_SIZES:
        assert _stream(family, text, size) == ("", [("get_current_time", {"timezone": "Asia/Tokyo"})])


@pytest.mark.parametrize("path", [p for p in TEMPLATES if p.stem not in NO_TOOL_SUPPORT], ids=lambda p: p.stem)
def test_tools_and_their_results_are_rendered_in_the_templates_own_format(path):
    formatter = _formatter(path)
    family = formatter.tool_family
    calls = CALLS[:1] if family.name in ONE_CALL else CALLS
    conversation = [
        ChatMessage("system", "SYS"), ChatMessage("user", "Weather and time?"),
        ChatMessage("assistant", "", tool_calls=calls),
        *(ChatMessage("tool", f"RESULT-{i}", tool_call_id=c.id, name=c.name) for i, c in enumerate(calls)),
    ]  # fmt: skip
    prompt = formatter.render(conversation, tools=[TIME, WEATHER])
    assert prompt.tool_family is family
    assert "Current time in an IANA timezone." in prompt.text  # the tools are declared to the model
    results = [prompt.text.find(f"RESULT-{i}") for i in range(len(calls))]
    assert -1 not in results and results == sorted(results)
    assert prompt.text.rstrip()[-1:] != "-"  # it ends with the assistant's opening, not a result


def test_a_template_without_tools_gets_the_calls_and_results_as_plain_turns():
    formatter = _formatter(FIXTURES / "chat_templates" / "microsoft-Phi-3.5-mini-instruct.jinja")
    assert formatter.tool_family is None
    conversation = [ChatMessage("user", "Time?"), ChatMessage("assistant", "", tool_calls=CALLS[:1]),
                    ChatMessage("tool", "19:00", tool_call_id="call00001", name="get_current_time")]  # fmt: skip
    prompt = formatter.render(conversation, tools=[TIME])
    assert prompt.tool_family is None and "get_current_time" in prompt.text and "19:00" in prompt.text


def test_a_forced_call_opens_the_call_or_says_why_it_cannot():
    qwen = _formatter(FIXTURES / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja")
    forced = qwen.render([ChatMessage("user", "Time?")], tools=[TIME, WEATHER], forced_tools=["get_current_time"])
    assert forced.text.endswith('<tool_call>\n{"name": "get_current_time", "arguments": ')
    assert forced.forced_calls[0].closing.startswith("}") and forced.forced_calls[0].closing.endswith("</tool_call>")
    both = qwen.render([ChatMessage("user", "Time?")], tools=[TIME, WEATHER], forced_tools=["get_current_time",
                                                                                             "get_weather"])
    assert both.text.endswith('{"name": "get_') and [c.opening for c in both.forced_calls] == [
        'current_time", "arguments": ', 'weather", "arguments": ']  # fmt: skip
    coder = _formatter(FIXTURES / "chat_templates" / "Qwen3-Coder.jinja")  # XML-like parameters: no JSON to hold
    unforced = coder.render([ChatMessage("user", "Time?")], tools=[TIME], forced_tools=["get_current_time"])
    assert unforced.forced_calls == () and "cannot be held" in (unforced.note or "")
