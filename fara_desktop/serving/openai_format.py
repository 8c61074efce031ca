"""Requests and replies of the OpenAI chat completions API, as the local API reads and writes them.

A request is a stranger's JSON: it is checked field by field, and anything this app cannot honour (images, audio,
several choices) is refused with a 400 that says so, rather than silently answered differently. Tools are passed
to the model through its own template (``engine.tool_calls``); its calls come back in OpenAI's ``tool_calls``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fara_desktop.engine.errors import GrammarError
from fara_desktop.engine.json_grammar import schema_gbnf
from fara_desktop.engine.types import ModelInfo, RemoteModel, TokenLogprob
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import GenerationStats
from fara_desktop.vocabulary.tools import ToolCall, ToolOffer, ToolSpec

MAX_MESSAGES = 1_000
MAX_TOKENS = 32_768
MAX_CHARS_PER_TOKEN = 16  # no tokenizer packs more text into one token: more than this can never fit the context
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
HONOURED = {
    "model",
    "messages",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "stream",
    "stream_options",
    "n",
    "user",
    "stop",
    "response_format",
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
}
MAX_TOOLS = 128  # as OpenAI
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # OpenAI's rule (and dots, which MCP servers use)
MAX_ARGUMENT_CHARS = 64 * 1024
MAX_STOPS = 4  # as OpenAI
MAX_TOP_LOGPROBS = 20  # as OpenAI
MAX_SCHEMA_BYTES = 64 * 1024
MAX_PICTURES = 8  # a message's pictures: each costs seconds to minutes of encoding on a CPU
MAX_REQUEST_PICTURES = 16  # a request's, over all its messages (8,000 1x1 pictures once took 18 minutes to decode)
# Sent by many clients with a value that asks for nothing: accepted only with that value.
NEUTRAL = {"frequency_penalty": 0, "presence_penalty": 0, "logprobs": False, "logit_bias": {}, "store": False}


class BadRequest(FaraError):
    """The request cannot be served as written; the message names the field."""


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat completion request."""

    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams
    stream: bool
    include_usage: bool
    raw: bool = False  # a /v1/completions request: the one message is the prompt, no chat template
    tools: ToolOffer | None = None
    one_call: bool = False  # 'parallel_tool_calls': false — at most one call is returned
    pictures: tuple[tuple[bytes, ...], ...] = ()  # each message's pictures (from data: URIs), still encoded

    @property
    def has_pictures(self) -> bool:
        return any(self.pictures)

    @property
    def wants_json(self) -> bool:
        return self.sampling.json_schema is not None


def _stops(value: Any) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value
    if value is None:
        return ()
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(isinstance(s, str) for s in stops):
        raise BadRequest(f"'stop' must be a string or a list of at most {MAX_STOPS} strings.")
    if not all(0 < len(s) <= 200 for s in stops):
        raise BadRequest("'stop': each string must hold 1 to 200 characters.")
    return tuple(stops)


def _logprobs(body: dict[str, Any], stream: bool) -> int | None:
    """SamplingParams.logprobs from ``logprobs`` and ``top_logprobs`` (None: not asked for)."""
    wanted, top = body.get("logprobs"), body.get("top_logprobs")
    if wanted not in (None, True, False):
        raise BadRequest("'logprobs' must be true or false.")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS):
        raise BadRequest(f"'top_logprobs' must be a whole number from 0 to {MAX_TOP_LOGPROBS}.")
    if not wanted:
        if top:
            raise BadRequest("'top_logprobs' needs 'logprobs': true.")
        return None
    if stream:
        raise BadRequest("'logprobs' are given with replies that are not streamed ('stream': false).")
    return top or 0


def logprobs_body(entries: Sequence[TokenLogprob]) -> dict[str, Any]:
    """OpenAI's ``choices[0].logprobs`` of a chat completion."""

    def one(token: bytes, logprob: float) -> dict[str, Any]:
        return {"token": token.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(token)}

    return {
        "content": [{**one(e.token, e.logprob), "top_logprobs": [one(t, lp) for t, lp in e.top]} for e in entries],
        "refusal": None,
    }


def _json_schema(value: Any) -> str | None:
    """``response_format`` as SamplingParams.json_schema: None (text), "" (any JSON object) or a schema."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return ""
    if kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest("'response_format': a json_schema needs 'json_schema': {'schema': {...}}.")
        text = json.dumps(schema)
        if len(text) > MAX_SCHEMA_BYTES:
            raise BadRequest(f"'response_format': the schema is larger than {MAX_SCHEMA_BYTES // 1024} KiB.")
        _buildable(text, "'response_format'")
        return text
    raise BadRequest("'response_format' must be of type text, json_object or json_schema.")


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"'{key}' must be a number.")
    if not low <= value <= high:
        raise BadRequest(f"'{key}' must be between {low:g} and {high:g}.")
    return float(value)


DATA_URI = re.compile(r"data:(image/[a-z0-9.+-]+)?(;[a-z0-9-]+=[^;,]*)*;base64,", re.IGNORECASE)


def _picture(part: Any, where: str) -> bytes:
    """An ``image_url`` part's picture, from its ``data:`` URI (a picture at a web address is never fetched)."""
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise BadRequest(f"{where}: an image_url part needs a 'url'.")
    if url.lower().startswith(("http://", "https://", "ftp://", "//")):
        raise BadRequest(
            f"{where}: a picture at a web address is refused: this app fetches nothing from the "
            "network. Send the picture itself as a data: URI (data:image/png;base64,…)."
        )
    header = DATA_URI.match(url)
    if header is None:
        raise BadRequest(f"{where}: a picture must be a base64 data: URI of an image (data:image/png;base64,…).")
    try:
        return base64.b64decode(url[header.end() :], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadRequest(f"{where}: the picture's data: URI is not valid base64.") from exc


def _content(value: Any, where: str, pictures: list[bytes] | None = None) -> str:
    """A message's text; ``pictures`` (a user turn's) receives its ``image_url`` parts, when given."""
    if value is None:
        return ""
    if isinstance(value, list):
        texts = []
        for part in value:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url" and pictures is not None:
                if len(pictures) >= MAX_PICTURES:
                    raise BadRequest(f"{where}: at most {MAX_PICTURES} pictures a message.")
                pictures.append(_picture(part, where))
                continue
            if kind == "image_url":
                raise BadRequest(f"{where}: only a user message may carry pictures.")
            if kind != "text" or not isinstance(part.get("text"), str):
                raise BadRequest(f"{where}: only text and image_url content are supported (no audio or files).")
            texts.append(part["text"])
        value = "".join(texts)
    if not isinstance(value, str):
        raise BadRequest(f"{where}: 'content' must be text.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # JSON's \ud800 escapes decode to lone surrogates, which no tokenizer takes
        raise BadRequest(
            f"{where}: the text holds a lone surrogate (\\u{ord(value[exc.start]):04x}), which is not Unicode text."
        ) from exc
    return value


def _tools(body: dict[str, Any]) -> ToolOffer | None:
    """``tools`` and ``tool_choice`` as the engine's offer (None: no tools)."""
    raw, choice = body.get("tools"), body.get("tool_choice")
    if raw is None or raw == []:
        if choice not in (None, "none", "auto"):
            raise BadRequest("'tool_choice' needs 'tools'.")
        return None
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise BadRequest(f"'tools' must be a list of at most {MAX_TOOLS} tools.")
    tools: list[ToolSpec] = []
    for number, entry in enumerate(raw):
        where = f"tools[{number}]"
        function = entry.get("function") if isinstance(entry, dict) and entry.get("type") == "function" else None
        if not isinstance(function, dict):
            raise BadRequest(f"{where} must be {{'type': 'function', 'function': {{...}}}}.")
        name, description = function.get("name"), function.get("description", "")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise BadRequest(f"{where}: the name must be 1 to 64 letters, digits, '_', '-' or '.'.")
        if not isinstance(description, str) or len(description) > 8192:
            raise BadRequest(f"{where}: 'description' must be text of at most 8,192 characters.")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise BadRequest(f"{where}: 'parameters' must be a JSON schema (an object).")
        schema = json.dumps(parameters)
        if len(schema) > MAX_SCHEMA_BYTES:
            raise BadRequest(f"{where}: the parameters' schema is larger than {MAX_SCHEMA_BYTES // 1024} KiB.")
        if any(t.name == name for t in tools):
            raise BadRequest(f"{where}: the name {name!r} is used twice.")
        tools.append(ToolSpec(name, description, schema))
    if choice is None:
        choice = "auto"
    if isinstance(choice, dict):
        function = choice.get("function") if choice.get("type") == "function" else None
        choice = function.get("name") if isinstance(function, dict) else None
        if not any(t.name == choice for t in tools):
            raise BadRequest("'tool_choice' names a function that is not among 'tools'.")
    elif choice not in ("auto", "none", "required"):
        raise BadRequest("'tool_choice' must be 'auto', 'none', 'required' or {'type': 'function', ...}.")
    for tool in tools:  # a forced call's arguments follow the schema through a grammar: it must be one that builds
        if choice == "required" or choice == tool.name:
            _buildable(tool.parameters, f"tools[{tools.index(tool)}] ({tool.name}): its parameters")
    return ToolOffer(tuple(tools), str(choice))


def _buildable(schema: str, where: str) -> None:
    """A schema a grammar will be made of is refused here (a 400 with the reason) when it is over the grammar's
    budget or cannot be converted; what llama.cpp alone can tell is checked again on the inference thread."""
    try:
        schema_gbnf(schema)
    except GrammarError as exc:
        raise BadRequest(f"{where}: {exc}") from exc


def _calls(value: Any, where: str) -> tuple[ToolCall, ...]:
    """An assistant turn's ``tool_calls``, as a client sends back its own history."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_TOOLS:
        raise BadRequest(f"{where}: 'tool_calls' must be a list.")
    calls = []
    for call in value:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id", ""), str):
            raise BadRequest(f"{where}: each tool call needs an 'id' and a 'function'.")
        name, arguments = function.get("name"), function.get("arguments", "{}")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise BadRequest(f"{where}: a tool call's name must be 1 to 64 letters, digits, '_', '-' or '.'.")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        if len(arguments) > MAX_ARGUMENT_CHARS:
            raise BadRequest(f"{where}: a tool call's arguments are longer than {MAX_ARGUMENT_CHARS:,} characters.")
        calls.append(ToolCall(_content(call.get("id", ""), where)[:64], name, _content(arguments, where)))
    return tuple(calls)


def _message(raw: Any, where: str, pictures: list[bytes] | None = None) -> ChatMessage:
    if not isinstance(raw, dict):
        raise BadRequest(f"{where} must be an object.")
    role = ROLES.get(raw.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise BadRequest(f"{where}: the role must be system, user, assistant or tool.")
    content = _content(raw.get("content"), where, pictures if role == "user" else None)
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise BadRequest(f"{where}: a tool message needs the 'tool_call_id' it answers.")
        name = raw.get("name")
        return ChatMessage(
            "tool",
            content,
            tool_call_id=_content(call_id, where)[:64],
            name=name if isinstance(name, str) and TOOL_NAME.fullmatch(name) else "",
        )
    calls = _calls(raw.get("tool_calls"), where) if role == "assistant" else ()
    return ChatMessage(role, content, tool_calls=calls)  # type: ignore[arg-type]


def tool_calls_body(calls: Sequence[ToolCall], streamed: bool = False) -> list[dict[str, Any]]:
    """OpenAI's ``tool_calls`` (in a stream's delta, each call carries its ``index``)."""
    return [
        {
            **({"index": number} if streamed else {}),
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for number, call in enumerate(calls)
    ]


def unsupported_parameters(body: dict[str, Any]) -> list[str]:
    """The request's parameters this server would not honour (a value that asks for nothing is fine)."""
    return sorted(
        key
        for key, value in body.items()
        if key not in HONOURED and value is not None and not (key in NEUTRAL and value == NEUTRAL[key])
    )


def model_id(info: ModelInfo) -> str:
    """A stable id for clients' configuration: a server's own id, or the model file's name without spaces (the
    display name, with spaces, is for people)."""
    if isinstance(info.path, RemoteModel):
        return info.path.model
    stem = info.path.stem if info.path is not None else info.name
    return "-".join(stem.split()) or "model"


def too_long(chat: ChatRequest, n_ctx: int) -> str | None:
    """Why the request can never fit the model's context (refused at once, before it waits for the model)."""
    chars = sum(len(m.content) for m in chat.messages)
    if chars > n_ctx * MAX_CHARS_PER_TOKEN:
        return (
            f"The messages hold {chars:,} characters, far more than the model's context of {n_ctx:,} tokens "
            "can take; send less."
        )
    return None


def parse_chat_request(body: Any, defaults: SamplingParams) -> ChatRequest:
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise BadRequest("'messages' must be a non-empty list.")
    if len(raw_messages) > MAX_MESSAGES:
        raise BadRequest(f"'messages' has more than {MAX_MESSAGES:,} entries.")
    if body.get("functions") or body.get("function_call"):
        raise BadRequest("'functions' is OpenAI's retired form of tools: send 'tools' (and 'tool_choice').")
    if body.get("n") not in (None, 1):
        raise BadRequest("Only one choice per request ('n': 1) is supported.")
    unsupported = unsupported_parameters(body)
    if unsupported:
        raise BadRequest(f"Not supported by this server: {', '.join(repr(k[:40]) for k in unsupported[:20])}.")
    pictures: list[list[bytes]] = [[] for _ in raw_messages]
    messages = [_message(raw, f"messages[{n}]", pictures[n]) for n, raw in enumerate(raw_messages)]
    if sum(len(p) for p in pictures) > MAX_REQUEST_PICTURES:
        raise BadRequest(f"at most {MAX_REQUEST_PICTURES} pictures a request (each is decoded and encoded here).")
    tools = _tools(body)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise BadRequest("'parallel_tool_calls' must be true or false.")
    temperature = _number(body, "temperature", 0.0, 2.0)
    top_p = _number(body, "top_p", 0.0, 1.0)
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TOKENS):
        raise BadRequest(f"'max_tokens' must be a whole number from 1 to {MAX_TOKENS:,}.")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest("'seed' must be a whole number.")
    sampling = SamplingParams(
        temperature=defaults.temperature if temperature is None else temperature,
        top_p=defaults.top_p if top_p is None else top_p,
        top_k=defaults.top_k,
        min_p=defaults.min_p,
        repeat_penalty=defaults.repeat_penalty,
        seed=seed if seed is not None else defaults.seed,
        max_tokens=limit if limit is not None else defaults.max_tokens,
        stop=_stops(body.get("stop")),
        json_schema=_json_schema(body.get("response_format")),
        stop_loops=False,  # a client asked for what it asked for: only the window's chats are cut when they loop
    )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false.")
    sampling = replace(sampling, logprobs=_logprobs(body, stream))
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return ChatRequest(
        tuple(messages),
        sampling,
        stream,
        include_usage,
        tools=tools,
        one_call=not parallel,
        pictures=tuple(tuple(p) for p in pictures) if any(pictures) else (),
    )


COMPLETION_HONOURED = {
    "model",
    "prompt",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stream",
    "stream_options",
    "n",
    "user",
    "stop",
    "echo",
    "best_of",
}
COMPLETION_DEFAULT_MAX_TOKENS = 16  # as OpenAI's legacy endpoint


def parse_completion_request(body: Any, defaults: SamplingParams) -> ChatRequest:
    """A /v1/completions request (the legacy text endpoint): one prompt, no chat template."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    unsupported = sorted(
        key
        for key, value in body.items()
        if key not in COMPLETION_HONOURED and value is not None and not (key in NEUTRAL and value == NEUTRAL[key])
    )
    if unsupported:
        raise BadRequest(f"Not supported by this server: {', '.join(repr(k[:40]) for k in unsupported[:20])}.")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("'prompt' must be one non-empty string (several prompts or token arrays are not supported).")
    for key, honoured_value in (("n", 1), ("best_of", 1), ("echo", False)):
        if body.get(key) not in (None, honoured_value):
            raise BadRequest(f"'{key}': only {json.dumps(honoured_value)} is supported.")
    limit = body.get("max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    chat = parse_chat_request(
        {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": limit,
            **{k: body[k] for k in ("temperature", "top_p", "seed", "stream", "stream_options", "stop") if k in body},
        },
        defaults,
    )
    return ChatRequest(chat.messages, chat.sampling, chat.stream, chat.include_usage, raw=True)


def text_chunk(request_id: str, model: str, text: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
    }


def text_completion(
    request_id: str, model: str, text: str, finish: str, stats: GenerationStats | None
) -> dict[str, Any]:
    return {**text_chunk(request_id, model, text, finish), "usage": usage(stats)}


def usage(stats: GenerationStats | None) -> dict[str, Any]:
    """The counts as OpenAI gives them; ``cached_tokens``: the prompt's tokens this client's kept conversation
    spared reading (``serving.principals``)."""
    prompt = stats.prompt_tokens if stats else 0
    completion = stats.completion_tokens if stats else 0
    cached = max(0, prompt - stats.prompt_tokens_evaluated) if stats else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {
            "reasoning_tokens": stats.reasoning_tokens if stats else 0,
            # OpenAI's names for a prediction's tokens: here the ones proposed from the reply's own text
            "accepted_prediction_tokens": stats.draft_accepted if stats else 0,
            "rejected_prediction_tokens": stats.draft_proposed - stats.draft_accepted if stats else 0,
        },
    }


def chunk(request_id: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def completion(
    request_id: str,
    model: str,
    text: str,
    reasoning: str,
    finish: str,
    stats: GenerationStats | None,
    logprobs: dict[str, Any] | None = None,
    calls: Sequence[ToolCall] = (),
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = tool_calls_body(calls)
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}],
        "usage": usage(stats),
    }


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


MAX_EMBEDDING_INPUTS = 256
MAX_EMBEDDING_CHARS = 32_768
# All of a request's texts: the embedder reads up to 512 tokens of each (~2 ms a token on 2 cores), so 256 texts of
# 30,000 characters cost 265 s of CPU; 128 KiB is at most ~32,000 tokens (about a minute at worst). Split larger.
MAX_EMBEDDING_TOTAL_CHARS = 128 * 1024
EMBEDDING_HONOURED = {"input", "model", "encoding_format", "user"}


def parse_embedding_request(body: Any) -> tuple[list[str], bool]:
    """The texts of an embeddings request and whether the vectors go back as base64 (what the ``openai`` client
    asks for); token arrays, other encodings and ``dimensions`` are refused."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    unsupported = sorted(k for k, v in body.items() if k not in EMBEDDING_HONOURED and v is not None)
    if unsupported:
        raise BadRequest(f"Not supported by this server: {', '.join(repr(k[:40]) for k in unsupported[:20])}.")
    if body.get("encoding_format") not in (None, "float", "base64"):
        raise BadRequest("'encoding_format': only 'float' and 'base64' are supported.")
    value = body.get("input")
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest("'input' must be a string or a non-empty list of strings (token arrays are not supported).")
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise BadRequest(f"'input' has more than {MAX_EMBEDDING_INPUTS} texts.")
    for number, text in enumerate(texts):
        _content(text, f"input[{number}]")  # the Unicode check
        if len(text) > MAX_EMBEDDING_CHARS:
            raise BadRequest(f"input[{number}] is longer than {MAX_EMBEDDING_CHARS:,} characters.")
    total = sum(len(t) for t in texts)
    if total > MAX_EMBEDDING_TOTAL_CHARS:
        raise BadRequest(
            f"'input' holds {total:,} characters; one request may hold {MAX_EMBEDDING_TOTAL_CHARS:,}. "
            "Send the texts in several requests."
        )
    return texts, body.get("encoding_format") == "base64"


def embeddings_body(model: str, vectors: list[list[float]] | list[str]) -> dict[str, Any]:
    """``vectors``: lists of floats, or base64 strings of little-endian float32 (OpenAI's two encodings)."""
    return {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": 0, "total_tokens": 0},  # the embedder does not count them
    }
