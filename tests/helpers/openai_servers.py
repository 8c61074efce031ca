"""OpenAI-compatible servers on 127.0.0.1 for tests (no test touches the internet).

* ``ScriptedServer``: a small HTTP server whose ``/v1/models`` and ``/v1/chat/completions`` misbehave on request —
  statuses, broken streams, malformed lines, silence, floods — and which records what it was sent.
* ``LlamaCppServer``: llama-cpp-python's own server (``python -m llama_cpp.server``, the ``server`` extra) serving a
  real GGUF, started and stopped by the tests.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


@dataclass
class Script:
    """What the scripted server does; tests change it between requests."""

    models: list[str] = field(default_factory=lambda: ["scripted-model"])
    models_statuses: list[int] = field(default_factory=list)  # answered (and consumed) before the listing
    chat_status: int | None = None  # answer every chat request with this status
    error_message: str = "nope"
    words: list[str] = field(default_factory=lambda: ["Hello", " from", " the", " server", "."])
    reasoning: list[str] = field(default_factory=list)  # sent as reasoning_content before the words
    usage: bool = True
    break_after: int | None = None  # close the connection after this many words, without [DONE]
    garbage_lines: int = 0  # lines that are not SSE, sent before each word
    only_garbage: bool = False
    hold: threading.Event | None = None  # send nothing (not even headers) until set or the client leaves
    word_interval: float = 0.0  # wait this long between words (a slow server), or until the client leaves
    flood_chars: int = 0  # send this many characters of reply
    long_line_bytes: int = 0  # send one line this long, with no newline
    unending_event_lines: int = 0  # send this many "data:" lines with no blank line between them
    empty_deltas: int = 0  # send this many chunks with an empty delta before the words
    usage_text: str | None = None  # the usage chunk's raw JSON (e.g. a count of 1e999)
    tool_call_deltas: list[Any] = field(default_factory=list)  # sent as delta.tool_calls after the reasoning


@dataclass
class Seen:
    """What the scripted server received."""

    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[Any] = field(default_factory=list)
    client_gone: threading.Event = field(default_factory=threading.Event)
    chat_received: threading.Event = field(default_factory=threading.Event)


class ScriptedServer:
    def __init__(self) -> None:
        self.script = Script()
        self.seen = Seen()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.script.hold is not None:
            self.script.hold.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def _record(self, body: Any = None) -> None:
            server.seen.paths.append(self.path)
            server.seen.headers.append({k.lower(): v for k, v in self.headers.items()})
            server.seen.bodies.append(body)

        def _json(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._record()
            script = server.script
            if self.path != "/v1/models":
                self._json(404, {"error": {"message": "no such path"}})
            elif script.models_statuses:
                status = script.models_statuses.pop(0)
                self._json(status, {"error": {"message": script.error_message}})
            else:
                self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in script.models]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            self._record(body)
            server.seen.chat_received.set()
            script = server.script
            if script.hold is not None:
                while not script.hold.wait(0.05):
                    if self._client_left():
                        server.seen.client_gone.set()
                        return
            if script.chat_status is not None:
                self._json(script.chat_status, {"error": {"message": script.error_message}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self._stream(script)
            except (BrokenPipeError, ConnectionResetError):
                server.seen.client_gone.set()
            self.close_connection = True

        def _client_leaves_within(self, seconds: float) -> bool:
            """Wait for the client's socket to become readable (it closed) for at most ``seconds``."""
            import select

            readable, _, _ = select.select([self.connection], [], [], seconds)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""

        def _client_left(self) -> bool:
            import select

            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""

        def _send(self, data: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        def _delta(self, **delta: str) -> dict[str, Any]:
            return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

        def _stream(self, script: Script) -> None:
            if script.long_line_bytes:
                self.wfile.write(b"data: " + b"x" * script.long_line_bytes)
                self.wfile.flush()
                return
            if script.unending_event_lines:
                line = b"data: " + json.dumps(self._delta(content="z" * 1000)).encode() + b"\n"
                for _ in range(script.unending_event_lines):
                    self.wfile.write(line)
                self.wfile.flush()
                return
            if script.empty_deltas:
                empty = b"data: " + json.dumps(self._delta()).encode() + b"\n\n"
                for _ in range(script.empty_deltas // 100):
                    self.wfile.write(empty * 100)
            if script.only_garbage:
                for _ in range(5):
                    self.wfile.write(b"this is not an event stream\n\ndata: {not json}\n\n")
                self.wfile.flush()
                return
            for piece in script.reasoning:
                self._send(self._delta(reasoning_content=piece))
            for calls in script.tool_call_deltas:
                self._send(self._delta(tool_calls=calls))
            if script.flood_chars:
                block = "y" * 10_000
                for _ in range(script.flood_chars // len(block)):
                    self._send(self._delta(content=block))
            for number, word in enumerate(script.words):
                if script.break_after is not None and number == script.break_after:
                    return  # the connection closes mid-reply
                for _ in range(script.garbage_lines):
                    self.wfile.write(b"garbage without a colon\n")
                if script.word_interval and number and self._client_leaves_within(script.word_interval):
                    server.seen.client_gone.set()  # a slow server's pace, cut short when the client goes
                    return
                self._send(self._delta(content=word))
            self._send(
                {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            )
            if script.usage_text is not None:
                self.wfile.write(b'data: {"object": "chat.completion.chunk", "choices": [], "usage": '
                                 + script.usage_text.encode() + b"}\n\n")  # fmt: skip
            elif script.usage:
                words = len(script.words)
                counts = {"prompt_tokens": 7, "completion_tokens": words, "total_tokens": 7 + words}
                self._send({"object": "chat.completion.chunk", "choices": [], "usage": counts})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaCppServer:
    """``python -m llama_cpp.server`` serving ``model`` as ``alias`` on 127.0.0.1."""

    def __init__(self, model: Path, alias: str = "smollm2", n_ctx: int = 2048) -> None:
        self.alias = alias
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(n_ctx), "--n_threads", "2",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True, errors="replace"
        )
        self.log: collections.deque[str] = collections.deque(maxlen=200)
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_log, daemon=True)  # a pipe nobody reads would fill up
        self._reader.start()

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if "Uvicorn running on" in line:  # uvicorn says so once it accepts connections
                self._ready.set()
        self._ready.set()  # the process ended: wait_ready looks at why

    def wait_ready(self, timeout: float = 120.0) -> LlamaCppServer:
        if not self._ready.wait(timeout):
            raise TimeoutError("llama_cpp.server did not start")
        if self.process.poll() is not None:
            raise RuntimeError("llama_cpp.server exited: " + "".join(self.log)[-2000:])
        assert httpx.get(f"{self.base_url}/models", timeout=10.0).status_code == 200
        return self

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(10)
        if self.process.stderr is not None:
            self.process.stderr.close()
