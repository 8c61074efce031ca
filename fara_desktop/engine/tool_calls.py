"""Tool calls in a model's reply, in the syntax its own chat template declares, read while the reply streams.

Every family of tool-calling models writes its calls differently: Qwen and Hermes put JSON in ``<tool_call>``,
Qwen3-Coder and Nemotron XML-like parameters in the same tags, GLM ``<arg_key>``/``<arg_value>`` pairs, Llama 3.x
bare JSON, Mistral ``[TOOL_CALLS]name[ARGS]{…}``, gpt-oss a ``commentary`` message ``to=functions.name``, DeepSeek
its ``<｜tool▁call▁begin｜>`` markers or DSML, Kimi, Cohere, Gemma 4, LFM2 and the others their own. ``FAMILIES``
holds each; the chat formatter picks the one whose parser reads back a call the template itself rendered
(``family_for_rendered_call``), so a template is matched by what it writes, not by its file name.

``ToolCallSplitter`` takes the answer as it streams: text before a call is the answer's content and goes on at
once; a call is held back until it is complete, then parsed. A call that cannot be read stays text (nothing is
invented). Parsing is plain string work on the model's output, which is untrusted: no eval, bounded sizes.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fara_desktop.engine.reasoning import partial_suffix

MAX_CALLS = 16  # calls read from one reply; more is a model looping
MAX_CALL_CHARS = 256 * 1024  # a call's text held back; past this it is text, not a call

Schemas = Mapping[str, Mapping[str, Any]]  # tool name → its parameters' JSON schema (for typing XML-ish values)


@dataclass(frozen=True)
class ParsedCall:
    """One call as the model wrote it: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any]


BodyParser = Callable[[str, Schemas], list[ParsedCall]]


@dataclass(frozen=True)
class ToolCallFamily:
    """How one family of models writes tool calls: the markers that open and close them and how to read one.

    ``end`` None: the calls run to the end of the reply. ``at_start``: a call counts only at the start of the
    answer (Llama 3.x's bare JSON), so an answer that merely contains JSON stays an answer."""

    name: str
    starts: tuple[str, ...]
    end: str | None
    parse: BodyParser
    at_start: bool = False
    keep_start: bool = False  # the start marker is part of the call's text (a bare JSON object's "{")
    declared_by: tuple[str, ...] = ()  # text in a template that never renders a call, naming this family's model
    content_prefix: str = ""  # at the start: what says the reply is text, not a call (Functionary 3.2's "all")


# ---------------------------------------------------------------- reading values


def _param_type(schemas: Schemas, tool: str, param: str) -> str | None:
    props = schemas.get(tool, {}).get("properties")
    spec = props.get(param) if isinstance(props, Mapping) else None
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    return kind if isinstance(kind, str) else None


def _typed(text: str, kind: str | None, quoted: bool | None = None) -> Any:
    """A parameter written as text (XML-like families): a string when the schema or the markup says so, else the
    JSON it spells (numbers, booleans, objects), else the text itself."""
    value = text.strip("\n")
    if quoted or kind == "string":
        return value
    if kind == "boolean" and value.strip() in ("True", "False"):  # Python's spelling, as Qwen3-Coder's renders it
        return value.strip() == "True"
    try:
        return json.loads(value)
    except ValueError:
        return value


def _json_values(text: str) -> list[Any]:
    """Every JSON value in ``text``, in order, skipping what is not JSON (fences, separators)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index = 0
    while index < len(text):
        brace = min((i for i in (text.find("{", index), text.find("[", index)) if i >= 0), default=-1)
        if brace < 0:
            break
        try:
            value, end = decoder.raw_decode(text, brace)
        except ValueError:
            index = brace + 1
            continue
        values.append(value)
        index = end
    return values


def _arguments(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if value is None:
        return {}
    return value if isinstance(value, dict) else None


def _call_of(value: Any) -> ParsedCall | None:
    """One call from a JSON object, whichever keys the family uses."""
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict):  # OpenAI's own shape
        value = function
    name = value.get("name", value.get("tool_name", function if isinstance(function, str) else None))
    if isinstance(name, str) and name:
        args = _arguments(value.get("arguments", value.get("parameters", {})))
        return ParsedCall(name, args) if args is not None else None
    if len(value) == 1:  # Apertus: {"name": {arguments}}
        ((key, args),) = value.items()
        if isinstance(args, dict):
            return ParsedCall(key, args)
    return None


def parse_json_calls(body: str, schemas: Schemas) -> list[ParsedCall]:
    """JSON objects (or lists of them) holding a name and arguments."""
    calls: list[ParsedCall] = []
    for value in _json_values(body):
        for item in value if isinstance(value, list) else [value]:
            call = _call_of(item)
            if call is None:
                return []
            calls.append(call)
    return calls


_FUNCTION_EQ = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|$)", re.S)
_PARAMETER_EQ = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.S)


def parse_function_eq(body: str, schemas: Schemas) -> list[ParsedCall]:
    """Qwen3-Coder, Qwen3.5, Nemotron 3, Seed-OSS: ``<function=name><parameter=k>v</parameter></function>``."""
    calls = []
    for match in _FUNCTION_EQ.finditer(body):
        name = match[1].strip()
        args = {k.strip(): _typed(v, _param_type(schemas, name, k.strip())) for k, v in _PARAMETER_EQ.findall(match[2])}
        calls.append(ParsedCall(name, args))
    return calls


_ARG_PAIR = re.compile(
    r"<arg_key(?::\w+)?>(.*?)</arg_key(?::\w+)?>\s*<arg_value(?::\w+)?>(.*?)</arg_value(?::\w+)?>", re.S
)


def parse_arg_pairs(body: str, schemas: Schemas) -> list[ParsedCall]:
    """GLM, Ling, Laguna, Spark, Hunyuan: the name, then ``<arg_key>k</arg_key><arg_value>v</arg_value>`` pairs."""
    name = re.split(r"<arg_key|<tool_sep", body, maxsplit=1)[0].strip()
    if not re.fullmatch(r"[\w.-]+", name):
        return []
    args = {k.strip(): _typed(v, _param_type(schemas, name, k.strip())) for k, v in _ARG_PAIR.findall(body)}
    return [ParsedCall(name, args)]


def _each(inner: BodyParser, opener: str) -> BodyParser:
    """A parser for a block holding several calls, each opened by ``opener`` (Hunyuan's ``<tool_call:…>``)."""

    def parse(body: str, schemas: Schemas) -> list[ParsedCall]:
        calls = []
        for part in body.split(opener)[1:]:
            found = inner(part, schemas)
            if not found:
                return []
            calls += found
        return calls

    return parse


_INVOKE = re.compile(r'<([\w:｜|]*?)(invoke|function) name="([^"]+)">(.*?)</\1\2>', re.S)
_PARAM_NAMED = re.compile(r'<([\w:｜|]*?)(parameter|param) name="([^"]+)"((?:\s+\w+="[^"]*")*)>(.*?)</\1\2>', re.S)
_CHILD_TAG = re.compile(r"<([\w.-]+)>(.*?)</\1>", re.S)


def parse_invokes(body: str, schemas: Schemas) -> list[ParsedCall]:
    """DeepSeek's DSML, MiniMax, MiniCPM, Muse: ``<invoke name="n"><parameter name="k">v</parameter></invoke>``
    (with the family's prefix on each tag; MiniMax M3 writes each parameter as its own tag)."""
    body = body.replace("]<]minimax[>[", "")
    calls = []
    for match in _INVOKE.finditer(body):
        name, inner = match[3], match[4]
        args: dict[str, Any] = {}
        for _, _, key, attributes, value in _PARAM_NAMED.findall(inner):
            quoted = True if 'string="true"' in attributes else False if 'string="false"' in attributes else None
            args[key] = _typed(value, _param_type(schemas, name, key), quoted)
        if not args:
            for key, value in _CHILD_TAG.findall(inner):
                args[key] = _typed(value, _param_type(schemas, name, key))
        calls.append(ParsedCall(name, args))
    return calls


def _named_json(pattern: str) -> BodyParser:
    """Calls written as a name the pattern captures (group ``name``), then the arguments as JSON."""
    compiled = re.compile(pattern, re.S)
    decoder = json.JSONDecoder()

    def parse(body: str, schemas: Schemas) -> list[ParsedCall]:
        calls = []
        for match in compiled.finditer(body):
            start = body.find("{", match.end())
            if start < 0 or body[match.end() : start].strip() not in ("", "```json", "```"):
                return []
            try:
                args, _ = decoder.raw_decode(body, start)
            except ValueError:
                return []
            if not isinstance(args, dict):
                return []
            calls.append(ParsedCall(match["name"].strip(), args))
        return calls

    return parse


def parse_pythonic(body: str, schemas: Schemas) -> list[ParsedCall]:
    """LFM2.5: ``[name(key='value', n=1)]``, read as Python literals (``ast``; nothing is evaluated)."""
    try:
        tree = ast.parse(body.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    calls = []
    for node in tree.elts if isinstance(tree, ast.List) else [tree]:
        if not isinstance(node, ast.Call) or node.args:
            return []
        name = ast.unparse(node.func)
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return []
        calls.append(ParsedCall(name, args))
    return calls


_GEMMA_STRING = re.compile(r'<\|"\|>(.*?)<\|"\|>', re.S)
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][\w.-]*)\s*:")


def parse_gemma4(body: str, schemas: Schemas) -> list[ParsedCall]:
    """Gemma 4: ``call:name{key:<|"|>text<|"|>,n:1}`` (strings between ``<|"|>``, keys bare)."""
    calls = []
    for part in body.split("call:")[1:]:
        name, brace, rest = part.partition("{")
        if not brace:
            return []
        strings: list[str] = []
        text = _BARE_KEY.sub(r'\1"\2":', _GEMMA_STRING.sub(functools.partial(_hold, strings=strings), "{" + rest))
        try:
            args, _ = json.JSONDecoder(strict=False).raw_decode(text)
        except ValueError:
            return []
        calls.append(ParsedCall(name.strip(), _unhold(args, strings)))
    return calls


def _hold(match: re.Match[str], strings: list[str]) -> str:
    strings.append(match[1])
    return f'"\x00{len(strings) - 1}\x00"'


def _unhold(value: Any, strings: list[str]) -> Any:
    if isinstance(value, str) and value.startswith("\x00") and value.endswith("\x00"):
        return strings[int(value[1:-1])]
    if isinstance(value, dict):
        return {k: _unhold(v, strings) for k, v in value.items()}
    if isinstance(value, list):
        return [_unhold(v, strings) for v in value]
    return value


_KIMI3_CALL = re.compile(r'<\|open\|>call tool="([^"]+)"[^<]*<\|sep\|>(.*?)<\|close\|>call<\|sep\|>', re.S)
_KIMI3_ARG = re.compile(
    r'<\|open\|>argument key="([^"]+)"(?: type="(\w+)")?<\|sep\|>(.*?)<\|close\|>argument<\|sep\|>', re.S
)


def parse_kimi3(body: str, schemas: Schemas) -> list[ParsedCall]:
    """Kimi K3: ``<|open|>call tool="n"<|sep|><|open|>argument key="k" type="string"<|sep|>v<|close|>argument…``."""
    calls = []
    for name, inner in _KIMI3_CALL.findall(body):
        args = {k: _typed(v, kind or _param_type(schemas, name, k)) for k, kind, v in _KIMI3_ARG.findall(inner)}
        calls.append(ParsedCall(name, args))
    return calls


def _first_of(*parsers: BodyParser) -> BodyParser:
    def parse(body: str, schemas: Schemas) -> list[ParsedCall]:
        for parser in parsers:
            calls = parser(body, schemas)
            if calls:
                return calls
        return []

    return parse


MISTRAL_CALL = r"(?:\[TOOL_CALLS\]|^)\s*(?P<name>[\w.-]+)(?:\[CALL_ID\][\w-]*)?\[ARGS\]"
_TAGGED = _first_of(parse_json_calls, parse_function_eq, parse_arg_pairs)

# Ordered: a family whose markers contain another's comes first.
FAMILIES: tuple[ToolCallFamily, ...] = (
    ToolCallFamily("qwen3-coder (seed)", ("<seed:tool_call>",), "</seed:tool_call>", parse_function_eq),
    ToolCallFamily(
        "hunyuan",
        ("<tool_calls:opensource>",),
        "</tool_calls:opensource>",
        _each(parse_arg_pairs, "<tool_call:opensource>"),
    ),
    ToolCallFamily("minimax", ("<minimax:tool_call>",), "</minimax:tool_call>", parse_invokes),
    ToolCallFamily("minimax m3", ("]<]minimax[>[<tool_call>",), "]<]minimax[>[</tool_call>", parse_invokes),
    ToolCallFamily("hermes / qwen", ("<tool_call>",), "</tool_call>", _TAGGED),
    ToolCallFamily("granite 3", ("<|tool_call|>",), None, parse_json_calls),
    ToolCallFamily("apriel / minimax m1", ("<tool_calls>",), "</tool_calls>", parse_json_calls),
    ToolCallFamily("nemotron", ("<TOOLCALL>",), "</TOOLCALL>", parse_json_calls),
    ToolCallFamily(
        "lfm2",
        ("<|tool_call_start|>",),
        "<|tool_call_end|>",
        _first_of(parse_pythonic, parse_json_calls),
        declared_by=("<|tool_list_start|>", "List of tools: ["),
    ),
    ToolCallFamily("apertus", ("<|tools_prefix|>",), "<|tools_suffix|>", parse_json_calls),
    ToolCallFamily("mistral", ("[TOOL_CALLS]",), None, _first_of(_named_json(MISTRAL_CALL), parse_json_calls)),
    ToolCallFamily(
        "deepseek",
        ("<｜tool▁calls▁begin｜>",),
        "<｜tool▁calls▁end｜>",
        _named_json(r"<｜tool▁call▁begin｜>(?:function<｜tool▁sep｜>)?(?P<name>[^<｜\n]+?)(?:<｜tool▁sep｜>|\n)"),
    ),
    ToolCallFamily("deepseek dsml", ("<｜DSML｜function_calls>", "<｜DSML｜tool_calls>"), None, parse_invokes),
    ToolCallFamily(
        "kimi k2",
        ("<|tool_calls_section_begin|>",),
        "<|tool_calls_section_end|>",
        _named_json(
            r"<\|tool_call_begin\|>\s*(?:functions\.)?(?P<name>[\w.-]+?)(?::\d+)?\s*"
            r"<\|tool_call_argument_begin\|>"
        ),
    ),
    ToolCallFamily("kimi k3", ("<|open|>tools<|sep|>",), "<|close|>tools<|sep|>", parse_kimi3),
    ToolCallFamily(
        "solar",
        ("<|tool_calls|>",),
        "<|calls|>",
        _named_json(r"<\|tool_call:name\|>(?P<name>[^<]+)<\|tool_call:args\|>"),
    ),
    ToolCallFamily("cohere", ("<|START_ACTION|>",), "<|END_ACTION|>", parse_json_calls),
    ToolCallFamily(
        "gpt-oss",
        ("<|channel|>commentary to=functions.", " to=functions.", "to=functions."),
        "<|call|>",
        _named_json(r"^(?P<name>[\w.-]+)[^{]*?<\|message\|>"),
    ),
    ToolCallFamily("gemma 4", ("<|tool_call>",), "<tool_call|>", parse_gemma4),
    ToolCallFamily("functionary 3.1", ("<function=",), "</function>", _named_json(r"^(?P<name>[\w.-]+)>")),
    ToolCallFamily("minicpm", ('<function name="',), None, lambda body, s: parse_invokes('<function name="' + body, s)),
    # Muse addresses the call in its message header first: "<|start|>assistant to=name<|message|><atem:…".
    ToolCallFamily(
        "muse",
        ("<|eom|><|start|>assistant to=", " to=", "<atem:function_calls>"),
        "</atem:function_calls>",
        parse_invokes,
    ),
    ToolCallFamily("gigachat 3.1", ("<|function_call|>",), None, parse_json_calls),
    ToolCallFamily("gigachat 3", ("function call<|role_sep|>",), None, parse_json_calls),
    ToolCallFamily("firefunction", ("functools[",), None, parse_json_calls, keep_start=True),
    ToolCallFamily("llama 3 (python tag)", ("<|python_tag|>",), None, parse_json_calls),
    ToolCallFamily("llama 3 json", ("{",), None, parse_json_calls, at_start=True, keep_start=True),
    # Functionary 3.2's prompt ends with ">>>": the reply names its recipient, "all" (the user) or a tool.
    ToolCallFamily(
        "functionary 3.2",
        ("",),
        None,
        _named_json(r"(?:^|>>>)\s*(?P<name>[\w.-]+)\n"),
        at_start=True,
        content_prefix="all\n",
    ),
)


# ---------------------------------------------------------------- streaming


class ToolCallSplitter:
    """Splits a streamed answer into its content and the tool calls in it, for one family.

    ``feed`` returns the content to show now; text that could be the start of a call marker is held back until
    the next piece decides it. ``finish`` returns what remains; ``calls`` holds the calls read."""

    def __init__(self, family: ToolCallFamily, schemas: Schemas | None = None) -> None:
        self.family = family
        self._schemas = schemas or {}
        self._pending = ""
        self._body: str | None = None  # inside a call: its text so far
        self._marker = family.starts[0]  # the start marker of the call being read
        self._seen_text = False
        self.calls: list[ParsedCall] = []
        self.content = ""

    def feed(self, text: str) -> str:
        self._pending += text
        out: list[str] = []
        while self._pending:
            if self._body is None:
                if not self._outside(out):
                    break
            elif not self._inside(out):
                break
        return self._content("".join(out))

    def finish(self) -> str:
        out = ""
        if self._body is not None:
            out = self._close(self._body + self._pending)
            if out and self.family.end:
                out = out[: -len(self.family.end)]  # the reply ended before the call's end marker
        elif self._pending:
            out = self._pending
        self._pending = ""
        self._body = None
        return self._content(out)

    def _content(self, text: str) -> str:
        self.content += text
        return text

    def _outside(self, out: list[str]) -> bool:
        """Look for a call's start; returns False when more text is needed."""
        if self.family.at_start:
            if self._seen_text:
                out.append(self._pending)
                self._pending = ""
                return False
            stripped = self._pending.lstrip()
            prefix = self.family.content_prefix
            if not stripped or (prefix and prefix.startswith(stripped) and stripped != prefix):
                return False
            self._seen_text = True
            if prefix and stripped.startswith(prefix):
                self._pending = stripped[len(prefix) :]
                return True
            marker = self.family.starts[0]
            if stripped.startswith(marker):
                self._marker = marker
                self._body = marker if self.family.keep_start else ""
                self._pending = stripped[len(marker) :]
            return True
        found = [(self._pending.find(s), -len(s), s) for s in self.family.starts]
        hits = [f for f in found if f[0] >= 0]
        if hits:
            at, _, marker = min(hits)
            self._marker = marker
            out.append(self._pending[:at])
            self._body = marker if self.family.keep_start else ""
            self._pending = self._pending[at + len(marker) :]
            return True
        keep = max(partial_suffix(self._pending, s) for s in self.family.starts)
        out.append(self._pending[: len(self._pending) - keep])
        self._pending = self._pending[len(self._pending) - keep :]
        return False

    def _inside(self, out: list[str]) -> bool:
        """Collect a call until its end marker; returns False when more text is needed."""
        assert self._body is not None
        end = self.family.end
        if end is None:
            self._body += self._pending
            self._pending = ""
            return False
        at = self._pending.find(end)
        if at < 0:
            keep = partial_suffix(self._pending, end)
            self._body += self._pending[: len(self._pending) - keep]
            self._pending = self._pending[len(self._pending) - keep :]
            if len(self._body) > MAX_CALL_CHARS:  # too long to be a call: it is text
                out.append(self._literal(self._body))
                self._body = None
            return False
        body = self._body + self._pending[:at]
        self._pending = self._pending[at + len(end) :]
        self._body = None
        out.append(self._close(body))
        return True

    def _close(self, body: str) -> str:
        """A complete call's text: read it; returns it as text when it cannot be read (or too many calls)."""
        calls = self.family.parse(body, self._schemas) if len(self.calls) < MAX_CALLS else []
        if calls:
            self.calls += calls[: MAX_CALLS - len(self.calls)]
            return ""
        return self._literal(body) + (self.family.end or "")

    def _literal(self, body: str) -> str:
        """A call's text given back as text (it could not be read): from its start marker on."""
        self._seen_text = True
        return body if self.family.keep_start else self._marker + body


def split_tool_calls(text: str, family: ToolCallFamily, schemas: Schemas | None = None) -> tuple[str, list[ParsedCall]]:
    """A whole answer as (content, calls)."""
    splitter = ToolCallSplitter(family, schemas)
    content = splitter.feed(text) + splitter.finish()
    return content, splitter.calls


def family_for_rendered_call(rendered: str, expected: Sequence[ParsedCall], template: str) -> ToolCallFamily | None:
    """The family whose parser reads ``expected`` back from a reply the template rendered (``rendered``), or, for a
    template that never renders an earlier call, the first family whose start marker its text names."""
    for family in FAMILIES:
        if any(start in rendered for start in family.starts) or family.at_start:
            _, calls = split_tool_calls(rendered, family)
            if [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in expected]:
                return family
    for family in FAMILIES:
        named = family.declared_by or ((family.starts[0],) if len(family.starts[0]) > 3 else ())
        if not family.at_start and any(text in template for text in named):
            return family
    return None
