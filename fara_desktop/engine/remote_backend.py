"""A model on an OpenAI-compatible server (llama.cpp's ``llama-server``, vLLM, Ollama, LM Studio, hosted services),
behind the same ``Backend`` protocol as llama.cpp in this process.

HTTP goes through httpx (well kept, streaming responses, separate connect and read timeouts, the socket reachable
so Stop can cut the stream). The request runs on a helper thread and hands its bytes to the inference thread
through a queue, so Stop returns at once even while the server has not answered yet, and then closes the
connection, which makes the server stop generating.

Nothing here is contacted unless the user added the server. What the server sends is a stranger's data: lines
and replies have size caps, malformed stream lines are skipped and counted, and every failure becomes a
``RemoteServerError`` (or ``ModelLoadError`` while loading) whose message says what to do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import queue
import socket
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import httpx

from fara_desktop.engine.backend import PreparedPrompt, PromptRequest, ReplyRequest, ReplyResult, TextSink
from fara_desktop.engine.errors import GenerationError, ModelLoadError, NoModelLoadedError, RemoteServerError
from fara_desktop.engine.remote_errors import (
    DEFAULT_TIMEOUTS,
    Timeouts,
    describe_failure,
    describe_status,
    server_message,
)
from fara_desktop.engine.sse import SSEDecoder, SSELineTooLong
from fara_desktop.engine.tool_calls import MAX_CALL_CHARS, MAX_CALLS
from fara_desktop.engine.types import ModelInfo, ModelSource, RemoteModel
from fara_desktop.planning.params import LoadParams
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import GenerationStats
from fara_desktop.vocabulary.tools import ToolCall, ToolOffer

log = logging.getLogger(__name__)

MAX_REPLY_CHARS = 2_000_000  # a reply longer than this is cut (finish reason "length")
MAX_QUEUED_CHUNKS = 256  # network reads waiting for the inference thread (a few MB at most)
MAX_EVENTS_WITHOUT_TEXT = 10_000  # a server that streams only empty deltas is not answering
MAX_COUNT = 1 << 31  # token counts a server reports beyond this are nonsense
MAX_TOKENS_PER_S = 1_000_000
MAX_LISTING_BYTES = 4 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024
RETRY_STATUSES = (429, 500, 502, 503, 504)
# Sampling settings the OpenAI API has no field for: the settings dialog shows them as not applicable.
NOT_SENT_TO_SERVERS = ("top-k", "min-p", "repeat penalty", "Mirostat")


def is_local_host(base_url: str) -> bool:
    host = httpx.URL(base_url).host
    return host in ("localhost", "127.0.0.1", "::1") or host.endswith(".localhost")


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _retry_after(response: httpx.Response, fallback: float) -> float:
    value = response.headers.get("retry-after", "")
    try:
        return min(max(float(value), 0.0), 10.0)
    except ValueError:
        return fallback


def list_models(
    base_url: str, api_key: str | None, server: str = "server", timeouts: Timeouts = DEFAULT_TIMEOUTS
) -> list[str]:
    """``GET /models``: the ids the server offers. Retried with backoff on 429 and 5xx (it changes nothing)."""
    url = base_url.rstrip("/") + "/models"
    delay = timeouts.backoff_s
    with httpx.Client(timeout=httpx.Timeout(timeouts.read_s, connect=timeouts.connect_s)) as client:
        for attempt in range(1, timeouts.retries + 1):
            try:
                with client.stream("GET", url, headers=_headers(api_key)) as response:
                    body = _read_capped(response, MAX_LISTING_BYTES)
            except httpx.HTTPError as exc:
                raise RemoteServerError(describe_failure(exc, server, url, timeouts)) from exc
            if response.status_code in RETRY_STATUSES and attempt < timeouts.retries:
                wait = _retry_after(response, delay)
                log.info("%s answered %d; retrying in %.1f s", server, response.status_code, wait)
                time.sleep(wait)  # backoff before retrying an idempotent request, not synchronisation
                delay *= 2
                continue
            if response.status_code >= 400:
                message = describe_status(response.status_code, body, server, None)
                if response.status_code in RETRY_STATUSES:
                    message += f" (tried {timeouts.retries} times)"
                raise RemoteServerError(message, response.status_code)
            return _model_ids(body, server)
    raise RemoteServerError(f"The server {server} did not answer.")  # pragma: no cover - the loop always returns


def _read_capped(response: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise RemoteServerError(f"The server's answer is larger than {limit // (1024 * 1024)} MiB; it was refused.")
    return bytes(body)


def _model_ids(body: bytes, server: str) -> list[str]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise RemoteServerError(f"The server {server} did not answer with a model list (not JSON).") from exc
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise RemoteServerError(f"The server {server} did not answer with a model list.")
    ids = [one_line(e["id"], 200) for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
    return ids[:1000]


def request_fields(sampling: SamplingParams) -> dict[str, Any]:
    """The sampling settings the OpenAI API has fields for (the others are not sent: ``NOT_SENT_TO_SERVERS``)."""
    fields: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.max_tokens:
        fields["max_tokens"] = sampling.max_tokens
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    if sampling.stop:
        fields["stop"] = list(sampling.stop)
    if sampling.json_schema == "":
        fields["response_format"] = {"type": "json_object"}
    elif sampling.json_schema is not None:
        schema = json.loads(sampling.json_schema)
        fields["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    return fields


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any, fallback: int) -> int:
    """A token count a server sent, when it is a plausible one (``1e999`` parses as infinity: int() raises)."""
    return int(value) if _finite(value) and 0 <= value <= MAX_COUNT else fallback


class _Stream:
    """One streamed request on a helper thread; the inference thread reads its bytes from ``items``."""

    def __init__(self, client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        # Bounded: a server that sends faster than the reply is read waits on its socket instead of filling memory.
        self.items: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=MAX_QUEUED_CHUNKS)
        self._stop = threading.Event()
        self._socket: socket.socket | None = None  # known from the moment it connects (httpcore's trace hook)
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._pump, args=(client, url, body, headers), name="fara-remote-stream", daemon=True
        )
        self._thread.start()

    def _pump(self, client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        try:
            with client.stream("POST", url, json=body, headers=headers, extensions={"trace": self._trace}) as response:
                if self._stop.is_set():
                    return
                if response.status_code >= 400:
                    self.items.put(("status", (response.status_code, _read_capped(response, MAX_ERROR_BYTES))))
                    return
                for chunk in response.iter_raw():
                    if not self._put(("bytes", chunk)):
                        return
            self._put(("end", None))
        except Exception as exc:  # handed to the inference thread, which decides what it means
            self._put(("error", exc))

    def _put(self, item: tuple[str, Any]) -> bool:
        """Hand ``item`` over, waiting while the queue is full; False once the reply was stopped."""
        while not self._stop.is_set():
            try:
                self.items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                self._socket = sock if isinstance(sock, socket.socket) else None
                stop = self._stop.is_set()
            if stop:
                self.close()

    def close(self) -> None:
        """Stop now: the socket is shut (waiting for headers or for the next token alike), so the blocked read
        returns and the server sees the client leave."""
        self._stop.set()
        with self._lock:
            sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


class RemoteBackend:
    """Chats with one model of one OpenAI-compatible server."""

    def __init__(self, timeouts: Timeouts = DEFAULT_TIMEOUTS) -> None:
        self.timeouts = timeouts
        self._model: RemoteModel | None = None
        self._info: ModelInfo | None = None
        self._client: httpx.Client | None = None

    @property
    def info(self) -> ModelInfo | None:
        return self._info

    def load(
        self, path: ModelSource, params: LoadParams, on_progress: Callable[[float], bool] | None = None
    ) -> ModelInfo:
        if not isinstance(path, RemoteModel):
            raise ModelLoadError("The remote backend loads only a server's model.")
        started = time.perf_counter()
        try:
            offered = list_models(path.base_url, path.api_key, path.server, self.timeouts)
        except RemoteServerError as exc:
            raise ModelLoadError(str(exc)) from exc
        if offered and path.model not in offered:
            shown = ", ".join(offered[:8]) + (" …" if len(offered) > 8 else "")
            raise ModelLoadError(f"The server {path.server} has no model {path.model!r}; it offers: {shown}.")
        self.unload()
        # One connection per reply (no keep-alive): Stop shuts that connection's socket, whatever phase it is in.
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeouts.read_s, connect=self.timeouts.connect_s),
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._model = path
        self._info = ModelInfo(
            path=path,
            name=path.name,
            architecture="remote",
            n_ctx=params.n_ctx or 0,
            n_ctx_train=0,
            n_threads=0,
            n_threads_batch=0,
            kv_type="server",
            flash_attn=False,
            chat_format="the server's",
            load_seconds=time.perf_counter() - started,
            file_bytes=0,
            server=path.server,
        )
        return self._info

    def close(self) -> None:
        self.unload()

    def unload(self) -> ModelSource | None:
        previous = self._model
        if self._client is not None:
            self._client.close()
        self._client, self._model, self._info = None, None, None
        return previous

    def calibrate_threads(
        self, candidates: Sequence[int], tokens: int = 48, should_yield: Callable[[], bool] | None = None
    ) -> tuple[dict[int, float], bool]:
        # Never asked (the worker does not calibrate a server's model); said plainly rather than faked.
        raise GenerationError("A server's model runs on the server's threads: there is nothing to measure here.")

    def prepare(self, request: PromptRequest) -> PreparedPrompt:
        if self._model is None:
            raise NoModelLoadedError("No model is loaded yet.")
        # The server applies its own template and context limits; the answer goes back, never the reasoning.
        # Tools go to the server as they are: it renders them with its template and sends the calls apart.
        kept = tuple(ChatMessage(m.role, m.content, "", m.tool_calls, m.tool_call_id, m.name) for m in request.messages)
        return PreparedPrompt(kept, tools=request.tools)

    def read_ahead(
        self,
        prompt: PreparedPrompt,
        conversation: Hashable | None,
        should_stop: Callable[[], bool],
        on_progress: Callable[[int, int], None],
        abort: Callable[[], bool] | None = None,
    ) -> int:
        return 0  # the server reads the prompt when it is sent; its cache is its own

    def save_to_disk(self, wait: bool = False) -> None:
        return None  # the server keeps (or not) its own cache

    def forget_conversation(self, conversation: Hashable | None) -> None:
        return None

    def prepare_raw(self, text: str, reply_reserve: int) -> PreparedPrompt:
        raise GenerationError("Completing raw text is done with a model on this computer, not relayed to a server.")

    @property
    def parallel(self) -> None:
        """None: the server batches its requests itself; they are sent one at a time from here."""
        return None

    def reply(self, prompt: PreparedPrompt, request: ReplyRequest) -> ReplyResult:
        sampling, should_cancel, on_text = request.sampling, request.should_cancel, request.on_text
        model, client = self._model, self._client
        if model is None or client is None:
            raise NoModelLoadedError("No model is loaded yet.")
        url = model.base_url.rstrip("/") + "/chat/completions"
        body = {
            "model": model.model,
            "messages": [openai_message(m) for m in prompt.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            **request_fields(sampling),
            **tool_fields(prompt.tools),
        }
        return _StreamReader(model, self.timeouts, should_cancel, on_text).run(
            _Stream(client, url, body, _headers(model.api_key)), url
        )


def openai_message(message: ChatMessage) -> dict[str, Any]:
    """A turn in OpenAI's shape, with its calls or, for a tool's result, the call it answers."""
    turn: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        turn["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        turn["tool_call_id"] = message.tool_call_id
    return turn


def tool_fields(tools: ToolOffer | None) -> dict[str, Any]:
    if tools is None or not tools.tools:
        return {}
    choice: Any = tools.choice
    if choice not in ("auto", "none", "required"):
        choice = {"type": "function", "function": {"name": choice}}
    entries = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": json.loads(t.parameters)},
        }
        for t in tools.tools
    ]
    return {"tools": entries, "tool_choice": choice}


class _CallPieces:
    """A server's streamed tool calls, put together by their index (bounded: a few calls of bounded size)."""

    def __init__(self) -> None:
        self.calls: dict[int, list[str]] = {}  # index → [id, name, arguments]

    def add(self, deltas: Any) -> None:
        for delta in deltas if isinstance(deltas, list) else []:
            index = delta.get("index", 0) if isinstance(delta, dict) else None
            if not isinstance(index, int) or not 0 <= index < MAX_CALLS:
                continue
            call = self.calls.setdefault(index, ["", "", ""])
            function = delta.get("function") if isinstance(delta.get("function"), dict) else {}
            for slot, value in ((0, delta.get("id")), (1, function.get("name")), (2, function.get("arguments"))):
                if isinstance(value, str) and len(call[slot]) + len(value) <= MAX_CALL_CHARS:
                    call[slot] = value if slot < 2 else call[slot] + value

    def finished(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(one_line(i, 64) or f"call{n}", one_line(name, 200), args or "{}")
            for n, (i, name, args) in sorted(self.calls.items())
            if name
        )


class _StreamReader:
    """Turns one stream's events into reply text, figures and a finish reason."""

    def __init__(
        self,
        model: RemoteModel,
        timeouts: Timeouts,
        should_cancel: Callable[[], bool],
        on_text: TextSink,
    ) -> None:
        self.model, self.timeouts, self.should_cancel, self.on_text = model, timeouts, should_cancel, on_text
        self.parts: list[str] = []
        self.length = 0
        self.chunks = 0
        self.usage: dict[str, Any] = {}
        self.timings: dict[str, Any] = {}
        self.finish_reason = "stop"
        self.started = time.perf_counter()
        self.first_token: float | None = None
        self.decoder = SSEDecoder()
        self.valid_events = 0
        self.bad_events = 0
        self.saw_done = False  # "data: [DONE]", or a choice with a finish reason: the reply is complete
        self.events_without_text = 0
        self.tool_calls = _CallPieces()

    def run(self, stream: _Stream, url: str) -> ReplyResult:
        done = False
        try:
            while not done:
                if self.should_cancel():
                    return self._result("cancelled")
                try:
                    kind, value = stream.items.get(timeout=0.02)
                except queue.Empty:
                    continue
                if kind == "bytes":
                    done = self._events(self.decoder.feed(value))
                elif kind == "end":
                    done = self._events(self.decoder.finish()) or True
                    if not self.saw_done and not self.should_cancel():
                        if self.valid_events == 0 and (self.bad_events or self.decoder.malformed_lines):
                            raise self._unreadable()
                        raise self._broken("the server closed the connection before the reply was complete")
                elif kind == "status":
                    status, body = value
                    raise RemoteServerError(describe_status(status, body, self.model.server, self.model.model), status)
                else:  # "error"
                    if self.should_cancel():
                        return self._result("cancelled")
                    if self.first_token is not None or self.chunks:
                        raise self._broken(describe_failure(value, self.model.server, url, self.timeouts))
                    raise RemoteServerError(describe_failure(value, self.model.server, url, self.timeouts)) from value
                if self.length >= MAX_REPLY_CHARS:
                    self.finish_reason = "length"
                    done = True
        except SSELineTooLong as exc:
            raise RemoteServerError(
                f"The server {self.model.server} sent something that is not a reply: {exc}"
            ) from exc
        finally:
            stream.close()
        if self.valid_events == 0 and self.bad_events:
            raise self._unreadable()
        return self._result(self.finish_reason)

    def _unreadable(self) -> RemoteServerError:
        return RemoteServerError(
            f"The server {self.model.server} answered with a stream this app cannot read (not OpenAI-style "
            "server-sent events). Check that the address ends in /v1."
        )

    def _broken(self, why: str) -> RemoteServerError:
        return RemoteServerError(f"The reply from {self.model.server} broke off: {why}. What arrived is kept.")

    def _events(self, payloads: list[str]) -> bool:
        """True when the stream said it is done."""
        for payload in payloads:
            if payload.strip() == "[DONE]":
                self.saw_done = True
                return True
            try:
                chunk = json.loads(payload)
            except (ValueError, RecursionError):
                self.bad_events += 1
                continue
            if not isinstance(chunk, dict):
                self.bad_events += 1
                continue
            self.valid_events += 1
            if isinstance(chunk.get("error"), (dict, str)):
                raise self._broken(f"the server reported an error: {server_message(json.dumps(chunk).encode())}")
            text_before = self.length
            self._chunk(chunk)
            self._idle_event(text_before)
        return False

    def _idle_event(self, text_before: int) -> None:
        """Counts events that carried no text; a server that sends only those forever is not answering."""
        if self.length > text_before:
            self.events_without_text = 0
            return
        self.events_without_text += 1
        if self.events_without_text > MAX_EVENTS_WITHOUT_TEXT:
            raise self._broken(f"the server sent more than {MAX_EVENTS_WITHOUT_TEXT:,} events in a row without text")

    def _chunk(self, chunk: dict[str, Any]) -> None:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):  # llama.cpp's server
            self.timings = chunk["timings"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        raw_delta = choice.get("delta")
        delta: dict[str, Any] = raw_delta if isinstance(raw_delta, dict) else {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        content = delta.get("content")
        if "tool_calls" in delta:
            self.tool_calls.add(delta["tool_calls"])
            self.events_without_text = 0
        # A server that parses reasoning out (vLLM, llama-server, DeepSeek) sends it apart, and it goes on apart;
        # content may still carry a model's own markers (a server that does not parse them): the worker splits it.
        if isinstance(reasoning, str) and reasoning:
            self._text(reasoning, True)
        if isinstance(content, str) and content:
            self._text(content)
        if isinstance(choice.get("finish_reason"), str):
            self.saw_done = True
            if choice["finish_reason"] == "length":
                self.finish_reason = "length"

    def _text(self, text: str, reasoning: bool | None = None) -> None:
        room = MAX_REPLY_CHARS - self.length
        text = text[:room]
        if not text:
            return
        if self.first_token is None:
            self.first_token = time.perf_counter()
        self.chunks += 1
        self.length += len(text)
        if not reasoning:
            self.parts.append(text)
        self.on_text(text, reasoning)

    def _result(self, reason: str) -> ReplyResult:
        ended = time.perf_counter()
        first = self.first_token or ended
        completion = _count(self.usage.get("completion_tokens"), self.chunks)
        prompt = _count(self.usage.get("prompt_tokens"), 0)
        rate: Any = self.timings.get("predicted_per_second")
        generating = max(ended - first, 1e-6)
        measured = max(completion - 1, 0) / generating
        speed = float(rate) if _finite(rate) and 0 < rate < MAX_TOKENS_PER_S else measured
        stats = GenerationStats(
            prompt_tokens=prompt,
            prompt_tokens_evaluated=prompt,
            completion_tokens=completion,
            ttft_s=first - self.started,
            prompt_tok_per_s=0.0,
            gen_tok_per_s=speed,
            context_used=prompt + completion,
            n_ctx=0,
            total_s=ended - self.started,
        )
        calls = self.tool_calls.finished()
        return ReplyResult("".join(self.parts), stats, reason, tool_calls=calls)  # type: ignore[arg-type]
