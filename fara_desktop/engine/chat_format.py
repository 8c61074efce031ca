"""Turn a conversation into the prompt text a model expects.

The model's own template (GGUF ``tokenizer.chat_template``, Jinja2) is used when present, rendered in Jinja2's
``ImmutableSandboxedEnvironment`` like llama-cpp-python does, with a budget on time and size
(``template_sandbox``). A model without a template (base models such as
Gemma 3 270M) gets a documented fallback:

* architectures of the Gemma family: Gemma's turn format (``<start_of_turn>user … <end_of_turn>``), whose markers
  are special tokens in every Gemma vocabulary;
* anything else: a plain transcript (``### User:`` / ``### Assistant:``) with ``\\n### `` as a stop string.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jinja2 import TemplateError

from fara_desktop.engine.errors import ModelLoadError, RequestCancelled, TemplateRenderError
from fara_desktop.engine.reasoning import THINK, ReasoningSyntax, markers_for_template, syntax_for_prompt
from fara_desktop.engine.template_sandbox import BoundedSandbox, RenderBudget
from fara_desktop.engine.tool_calls import ParsedCall, ToolCallFamily, family_for_rendered_call
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.tools import ToolCall, ToolSpec

PLAIN_REASONING = ReasoningSyntax((THINK,))


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    add_bos: bool  # True when the tokenizer must add BOS (the template did not write it)
    stop: tuple[str, ...]
    note: str | None = None  # how the conversation had to be adapted to the template, for the user to read
    reasoning: ReasoningSyntax = PLAIN_REASONING  # how the reply marks its reasoning
    tool_family: ToolCallFamily | None = None  # set when tools were declared: how the reply writes its calls
    reply_prefix: str = ""  # the reply's start the prompt already holds (a forced tool call's opening)
    forced_calls: tuple[ForcedCall, ...] = ()  # the reply must go on with one of these


@dataclass(frozen=True)
class ForcedCall:
    """How a reply forced to call ``name`` goes on after the prompt: ``opening`` (the rest of the call's start,
    naming the tool), the arguments as JSON, then ``closing``."""

    name: str
    opening: str
    closing: str


class ChatFormatter(Protocol):
    """Renders messages with one chat format; ``name`` says which one for the UI."""

    name: str
    thinking_switch: bool  # the template can turn the model's reasoning off (``enable_thinking``)
    thinking_default: bool  # where that switch starts when nobody sets it (the template's own default)
    tool_family: ToolCallFamily | None  # None: the template declares no tools (the model is not offered any)

    def render(
        self,
        messages: Sequence[ChatMessage],
        should_cancel: Callable[[], bool] | None = None,
        thinking: bool = True,
        tools: Sequence[ToolSpec] = (),
        forced_tools: Sequence[str] = (),
    ) -> RenderedPrompt: ...


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return _dt.datetime.now().strftime(fmt)


# "No tools", as Hugging Face passes it (``tools=None``); then as the tool-use variants of templates (Hermes,
# Command R+, FireFunction) need it spelled to render at all: an empty list of tools, functions and documents.
NO_TOOLS: tuple[dict[str, Any], ...] = (
    {"tools": None},
    {"tools": [], "functions": "[]", "documents": []},
)

SYSTEM_FOLDED_NOTE = (
    "This model's chat template has no system role, so the system prompt was put at the start of the first message."
)
NOT_FORCED_NOTE = (
    "This model writes a tool's arguments as markup, not JSON, so a call cannot be held to the tool's schema: the "
    "reply was asked for without forcing a call."
)
ROLES_MERGED_NOTE = (
    "This model's chat template needs user and assistant turns to alternate, so consecutive messages of the same "
    "role were joined."
)


def fold_system_prompt(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The system prompt opens the first user turn (what Gemma's own docs recommend for a template without one)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    folded: list[ChatMessage] = []
    for message in messages:
        if message.role == "system":
            continue
        if system and message.role == "user":
            message = ChatMessage("user", f"{system}\n\n{message.content}")
            system = ""
        folded.append(message)
    if system:  # no user turn at all
        folded.insert(0, ChatMessage("user", system))
    return folded


def plain_tool_turns(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Tool turns as plain text, for a format without tools: a conversation that called tools with another model
    goes on with this one (the calls and results are said, not lost)."""
    plain: list[ChatMessage] = []
    for m in messages:
        if m.role == "tool":
            plain.append(ChatMessage("user", f"Result of the tool {m.name or 'call'}:\n{m.content}"))
        elif m.tool_calls:
            said = "\n".join(f"[called the tool {c.name} with {c.arguments}]" for c in m.tool_calls)
            plain.append(ChatMessage(m.role, f"{m.content}\n{said}".strip(), m.reasoning))
        else:
            plain.append(m)
    return plain


def template_call_id(call_id: str) -> str:
    """An id every template takes: Mistral's insist on nine letters and digits, so any other id is mapped to
    nine, the same way each time (a call and its result keep matching)."""
    if re.fullmatch(r"[A-Za-z0-9]{9}", call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8")).hexdigest()
    return "".join(c if c.isdigit() or i % 2 else c.upper() for i, c in enumerate(digest[:9]))


def _tool_entry(tool: ToolSpec) -> dict[str, Any]:
    try:
        parameters = json.loads(tool.parameters)
    except ValueError:
        parameters = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }


def _arguments_object(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # kept as the model wrote it


PROBE_TOOL = ToolSpec("fara_probe_tool", "Probe.", '{"type": "object", "properties": {"probe": {"type": "string"}}}')
PROBE_CALL = ToolCall("fara1prob", "fara_probe_tool", '{"probe": "fara probe value"}')
SENTINEL_ARGUMENTS = '{"fara_arguments_here": 0}'


def reply_start(full: str, prompt: str) -> int:
    """Where the reply begins in ``full`` (a conversation rendered with the reply), given the prompt rendered
    for it: where the two part, moved back to the start of a marker they share only in part (``<|START_`` of
    ``<|START_THINKING|>`` and ``<|START_ACTION|>``)."""
    size = _shared_length(full, prompt)
    opener = max(full.rfind("<", 0, size), full.rfind("[", 0, size))
    if opener >= 0 and not any(c in full[opener:size] for c in ">]\n"):
        return opener
    return size


def merge_same_roles(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    merged: list[ChatMessage] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = ChatMessage(message.role, f"{merged[-1].content}\n\n{message.content}")
        else:
            merged.append(message)
    return merged


class JinjaChatFormatter:
    """The model's own template from its GGUF metadata, rendered in a bounded sandbox.

    A template that refuses the conversation is retried once with the system prompt folded into the first user
    turn (Gemma 2 raises "System role not supported"), then with same-role turns joined (Mistral insists on
    alternation); the prompt then carries a note saying so. Otherwise its own message becomes a typed error."""

    name = "gguf template"

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        self.thinking_switch = "enable_thinking" in template
        self.reasoning_markers = markers_for_template(template)
        # gpt-oss reads an earlier turn's reasoning from ``thinking``; most others from ``reasoning_content``
        self._thinking_field = "message.thinking" in template or "message['thinking']" in template
        self._env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True)
        self._env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        try:
            self._template = self._env.from_string(template)
        except TemplateError as exc:
            raise ModelLoadError(f"The model's chat template is broken: {exc}") from exc
        except (RecursionError, MemoryError) as exc:
            raise ModelLoadError(f"The model's chat template is too deeply nested to compile ({exc}).") from exc
        self._bos = bos_token
        self._eos = eos_token
        self._source = template
        self._string_arguments = False  # the template joins a call's arguments to text (Functionary 3.2)
        self.tool_family = self._probe_tool_family()
        self.thinking_default = self._probe_thinking_default() if self.thinking_switch else True

    def _message(self, message: ChatMessage) -> dict[str, Any]:
        """A turn as Hugging Face passes it. The answer is the content; an earlier reply's reasoning goes only in
        the fields a template may read it from, so a template that does not ask for it never sees it. Calls carry
        their arguments as an object, a result its call's id and tool's name."""
        turn: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.reasoning:
            turn["reasoning_content"] = message.reasoning
            if self._thinking_field:
                turn["thinking"] = message.reasoning
        if message.tool_calls:
            turn["tool_calls"] = [
                {
                    "id": template_call_id(c.id),
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments if self._string_arguments else _arguments_object(c.arguments),
                    },
                }
                for c in message.tool_calls
            ]
        if message.role == "tool":
            turn["tool_call_id"] = template_call_id(message.tool_call_id)
            turn["name"] = message.name
        return turn

    def _tools_render(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], budget: RenderBudget, generation: bool
    ) -> str:
        entries = [_tool_entry(t) for t in tools]
        return self._env.render_bounded(
            self._template,
            budget,
            messages=self._env.checked(self._message(m) for m in messages),
            tools=entries,
            functions=json.dumps([e["function"] for e in entries]),  # FireFunction's own variable
            add_generation_prompt=generation,
            bos_token=self._bos,
            eos_token=self._eos,
            enable_thinking=False,
            datetime=_dt.datetime.now().strftime("%b %d %Y %H:%M:%S"),
        )

    def _probe_thinking_default(self) -> bool:
        """Whether the template thinks when nobody says (Qwen3.5 0.8B/2B and Gemma 4 do not; 4B and SmolLM3 do):
        the prompt rendered without ``enable_thinking`` is the one rendered with it false, and not with it true."""
        question = self._env.checked([self._message(ChatMessage("user", "Probe?"))])

        def rendered(**switch: bool) -> str | None:
            try:
                return self._env.render_bounded(
                    self._template,
                    RenderBudget(),
                    messages=question,
                    add_generation_prompt=True,
                    bos_token=self._bos,
                    eos_token=self._eos,
                    **switch,
                )
            except Exception:
                return None

        unsaid = rendered()
        return not (unsaid is not None and unsaid == rendered(enable_thinking=False) != rendered(enable_thinking=True))

    def _probe_tool_family(self) -> ToolCallFamily | None:
        """Whether the template declares tools and how its model writes a call: a call rendered by the template
        itself must be read back by one family's parser. A template that ignores ``tools`` offers none."""
        if "tools" not in self._source and "functions" not in self._source:
            return None
        question = [ChatMessage("user", "Probe?")]
        called = ChatMessage("assistant", "", tool_calls=(PROBE_CALL,))
        result = ChatMessage("tool", "probe result", tool_call_id=PROBE_CALL.id, name=PROBE_CALL.name)
        budget = RenderBudget()
        try:
            prompt = self._tools_render(question, [PROBE_TOOL], budget, True)
        except Exception:
            return None  # the template cannot render tools (Command R+'s older format, Kimi's list.append)
        for no_tools in NO_TOOLS:
            try:
                if self._render_once(question, budget, no_tools, False) == prompt:
                    return None  # the tools are not shown to the model
                break
            except Exception:
                continue
        replies = []
        for turns in ([*question, called], [*question, called, result]):
            for as_text in (False, True):
                self._string_arguments = as_text
                try:
                    text = self._tools_render(turns, [PROBE_TOOL], budget, False)
                except Exception:
                    continue
                replies.append(text[reply_start(text, prompt) :])
                break
        expected = [ParsedCall(PROBE_CALL.name, json.loads(PROBE_CALL.arguments))]
        for reply in replies:
            family = family_for_rendered_call(reply, expected, "")
            if family is not None:
                return family
        return family_for_rendered_call("", expected, self._source)

    def _forced_call(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], name: str, budget: RenderBudget
    ) -> tuple[str, int, str] | None:
        """The conversation rendered up to where a call of ``name`` writes its arguments, where the reply starts
        in it, and what closes the call; None when the family does not write arguments as JSON."""
        sentinel = ToolCall("fara1sent", name, SENTINEL_ARGUMENTS)
        prompt = self._tools_render(messages, tools, budget, True)
        called = ChatMessage("assistant", "", tool_calls=(sentinel,))
        full = self._tools_render([*messages, called], tools, budget, False)
        reply_at = reply_start(full, prompt)
        at = full.find(SENTINEL_ARGUMENTS, reply_at)
        if at < 0:
            return None
        closing = full[at + len(SENTINEL_ARGUMENTS) :]
        end = self.tool_family.end if self.tool_family else None
        if end and end in closing:  # what follows the call's end (the turn's end) is not the reply's
            closing = closing[: closing.index(end) + len(end)]
        return full[:at], reply_at, closing

    def _render_once(
        self, messages: Sequence[ChatMessage], budget: RenderBudget, no_tools: dict[str, Any], thinking: bool
    ) -> str:
        return self._env.render_bounded(
            self._template,
            budget,
            messages=self._env.checked(self._message(m) for m in messages),
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
            enable_thinking=thinking,
            datetime=_dt.datetime.now().strftime("%b %d %Y %H:%M:%S"),  # FireFunction's own variable
            **no_tools,
        )

    def render(
        self,
        messages: Sequence[ChatMessage],
        should_cancel: Callable[[], bool] | None = None,
        thinking: bool = True,
        tools: Sequence[ToolSpec] = (),
        forced_tools: Sequence[str] = (),
    ) -> RenderedPrompt:
        budget = RenderBudget(should_cancel=should_cancel)  # one budget for all attempts
        if self.tool_family is None:
            messages = plain_tool_turns(messages)
        elif tools:
            return self._render_with_tools(messages, tools, forced_tools, budget)
        attempts: list[tuple[list[ChatMessage], str | None]] = [(list(messages), None)]
        folded = fold_system_prompt(messages)
        if any(m.role == "system" for m in messages):
            attempts.append((folded, SYSTEM_FOLDED_NOTE))
        merged = merge_same_roles(folded)
        if merged != folded:
            attempts.append(
                (merged, ROLES_MERGED_NOTE if len(attempts) == 1 else f"{SYSTEM_FOLDED_NOTE} {ROLES_MERGED_NOTE}")
            )
        first_error: Exception | None = None
        for no_tools in NO_TOOLS:
            for attempt, note in attempts:
                try:
                    text = self._render_once(attempt, budget, no_tools, thinking)
                except (TemplateRenderError, RequestCancelled):
                    raise  # over budget or stopped: retrying would only spend more
                except Exception as exc:
                    first_error = first_error or exc
                    continue
                reasoning = syntax_for_prompt(self.reasoning_markers, text)
                return RenderedPrompt(text=text, add_bos=False, stop=(), note=note, reasoning=reasoning)
        assert first_error is not None
        raise TemplateRenderError(_template_message(first_error)) from first_error

    def _render_with_tools(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        forced: Sequence[str],
        budget: RenderBudget,
    ) -> RenderedPrompt:
        """The prompt with the tools declared; with ``forced`` names, it ends where their calls part, so the reply
        can only go on as a call of one of them (the grammar that keeps it there is the engine's)."""
        assert self.tool_family is not None
        try:
            calls = [self._forced_call(messages, tools, name, budget) for name in forced]
            if calls and all(c is not None for c in calls):
                ready = [c for c in calls if c is not None]
                common = ready[0][0][: min(_shared_length(ready[0][0], c[0]) for c in ready)]
                reply_at = min(min(c[1] for c in ready), len(common))
                reasoning = syntax_for_prompt(self.reasoning_markers, common[:reply_at])
                openings = tuple(
                    ForcedCall(name, text[len(common) :], closing)
                    for name, (text, _, closing) in zip(forced, ready, strict=True)
                )
                return RenderedPrompt(common, False, (), None, reasoning, self.tool_family, common[reply_at:], openings)
            text = self._tools_render(messages, tools, budget, True)
        except (TemplateRenderError, RequestCancelled):
            raise
        except Exception as exc:
            raise TemplateRenderError(_template_message(exc)) from exc
        reasoning = syntax_for_prompt(self.reasoning_markers, text)
        note = NOT_FORCED_NOTE if forced else None
        return RenderedPrompt(text, False, (), note, reasoning, self.tool_family)


def _shared_length(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))  # noqa: RUF071 (characters, not paths: where two renders part)


def _template_message(error: Exception) -> str:
    detail = " ".join(str(error).split())[:300] or type(error).__name__
    if isinstance(error, TemplateError):
        return f"The model's chat template refused this conversation: {detail}"
    return f"The model's chat template failed on this conversation ({type(error).__name__}: {detail})"


@dataclass
class FallbackFormatter:
    """The turns of a model without a chat template: each message between its role's opening and the closing, then
    the reply's opening; the closing's start is the stop string. Tool turns are said as plain text."""

    name: str
    openings: dict[str, str]  # role → what opens its turn ("assistant": the reply's opening too)
    closing: str
    stop: str
    system_in_first_user: bool  # no system role: the system prompt opens the first user turn
    thinking_switch: bool = False
    thinking_default: bool = True
    tool_family: ToolCallFamily | None = None

    def render(
        self,
        messages: Sequence[ChatMessage],
        should_cancel: Callable[[], bool] | None = None,
        thinking: bool = True,
        tools: Sequence[ToolSpec] = (),
        forced_tools: Sequence[str] = (),
    ) -> RenderedPrompt:
        turns = plain_tool_turns(messages)
        if self.system_in_first_user:
            turns = fold_system_prompt(turns)
        parts = [f"{self.openings[m.role]}{m.content}{self.closing}" for m in turns]
        parts.append(self.openings["assistant"])
        return RenderedPrompt(text="".join(parts), add_bos=True, stop=(self.stop,))


# Gemma's turn markers, special tokens in every Gemma vocabulary; Gemma has no system role.
GEMMA_TURNS = FallbackFormatter(
    "gemma turns (fallback)",
    {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"},
    "<end_of_turn>\n",
    "<end_of_turn>",
    system_in_first_user=True,
)
# A plain transcript any base model can continue.
TRANSCRIPT = FallbackFormatter(
    "plain transcript (fallback)",
    {"system": "### System:\n", "user": "### User:\n", "assistant": "### Assistant:\n"},
    "\n\n",
    "\n### ",
    system_in_first_user=False,
)


def formatter_for(chat_template: str | None, architecture: str, bos_token: str, eos_token: str) -> ChatFormatter:
    if chat_template and chat_template.strip():
        return JinjaChatFormatter(chat_template, bos_token, eos_token)
    if architecture.startswith("gemma"):
        return GEMMA_TURNS
    return TRANSCRIPT
