"""The local API is closed to web pages, bounded, and says what it does not honour.

A real uvicorn server on 127.0.0.1 with a scripted model queue: each request is raw HTTP as a browser or an
attacker's page would send it. Before these checks, a cross-site ``text/plain`` POST, a rebinding ``Host`` and a
page spending the user's server key all got completions (see issue 26)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fara_desktop.engine.types import ModelInfo, RemoteModel
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from tests.helpers.scripted_queue import ScriptedQueue

LOCAL = ModelInfo(Path("/models/SmolLM2 135M Instruct.Q4_1.gguf"), "Smollm2 135M 8k Lc100K Mix1 Ep2", "llama", 2048,
                  8192, 2, 2, "f16", False, "gguf template", 0.1, 1)  # fmt: skip


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[ApiServer, ScriptedQueue]]]:
    servers: list[ApiServer] = []

    def start(info: ModelInfo = LOCAL, **options: Any) -> tuple[ApiServer, ScriptedQueue]:
        queue = ScriptedQueue()
        server = ApiServer(LocalApi(queue, lambda: info, **options))
        server.start()
        servers.append(server)
        return server, queue

    yield start
    for server in servers:
        server.stop()


QUESTION = {"messages": [{"role": "user", "content": "hi"}]}


def post(server: ApiServer, body: Any = QUESTION, **headers: str) -> httpx.Response:
    """JSON as clients write it (ASCII escapes: a lone surrogate arrives as ``\\ud800``)."""
    return httpx.post(f"{server.address}/chat/completions", content=json.dumps(body).encode(), timeout=10,
                      headers={"content-type": "application/json", **headers})  # fmt: skip


def preflight_from(server: ApiServer, page: str) -> httpx.Response:
    """The CORS preflight a browser sends before a page's JSON POST."""
    headers = {
        "origin": page,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    return httpx.options(f"{server.address}/chat/completions", timeout=10, headers=headers)


def test_programs_on_this_computer_get_answers(serve):
    server, queue = serve()
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}"):
        reply = post(server, host=host)
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "Hi"
    assert len(queue.requests) == 2


def test_a_rebinding_host_is_refused_before_the_model(serve):
    server, queue = serve()
    for host in (f"evil.example:{server.port}", "127.0.0.1:1", "evil.example", ""):
        reply = post(server, host=host)
        assert reply.status_code == 403, host
        assert "127.0.0.1 or localhost" in reply.json()["error"]["message"]
    models = httpx.get(f"{server.address}/models", headers={"host": f"evil.example:{server.port}"}, timeout=10)
    assert models.status_code == 403
    assert queue.requests == []


def test_a_web_page_cannot_use_it_simple_or_preflighted(serve):
    server, queue = serve()
    page = "http://evil.example"
    simple = httpx.post(f"{server.address}/chat/completions", content=b'{"messages":[{"role":"user","content":"x"}]}',
                        headers={"origin": page, "content-type": "text/plain"}, timeout=10)  # fmt: skip
    assert simple.status_code == 403 and "access-control-allow-origin" not in simple.headers
    as_json = post(server, origin=page)
    assert as_json.status_code == 403
    preflight = preflight_from(server, page)
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    assert queue.requests == []


def test_a_body_that_is_not_declared_json_is_refused(serve):
    server, queue = serve()
    reply = httpx.post(f"{server.address}/chat/completions", content=b'{"messages":[{"role":"user","content":"x"}]}',
                       headers={"content-type": "text/plain"}, timeout=10)  # fmt: skip
    assert reply.status_code == 415 and "application/json" in reply.json()["error"]["message"]
    assert queue.requests == []


def test_an_origin_the_user_allowed_gets_cors_answers(serve):
    page = "http://localhost:3000"
    server, _queue = serve(allowed_origins=(page,))
    preflight = preflight_from(server, page)
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == page
    reply = post(server, origin=page)
    assert reply.status_code == 200 and reply.headers["access-control-allow-origin"] == page
    assert post(server, origin="http://localhost:3001").status_code == 403


def test_a_server_model_is_relayed_only_when_the_user_allowed_that_server(serve):
    remote = RemoteModel("Paid cloud", "https://api.example/v1", "big-model", "sk-secret")
    info = ModelInfo(remote, "big-model", "remote", 8192, 8192, 0, 0, "f16", False, "server", 0.0, 0,
                     server="Paid cloud")  # fmt: skip
    server, queue = serve(info)
    refused = post(server)
    assert refused.status_code == 403 and "Paid cloud" in refused.json()["error"]["message"]
    assert queue.requests == []
    allowed, queue = serve(info, relay_servers=("Paid cloud",))
    assert post(allowed).status_code == 200 and len(queue.requests) == 1


def test_requests_beyond_the_wait_queue_get_429_with_retry_after(serve):
    server, queue = serve(max_pending=2)
    queue.hold.set()  # nothing finishes: the requests wait for the model
    with httpx.Client(timeout=10) as first, httpx.Client(timeout=10) as second:
        streams = [client.stream("POST", f"{server.address}/chat/completions", json={**QUESTION, "stream": True})
                   for client in (first, second)]  # fmt: skip
        opened = [s.__enter__() for s in streams]
        try:
            assert all(r.status_code == 200 for r in opened)
            third = post(server)
            assert third.status_code == 429 and third.headers["retry-after"] == "5"
        finally:
            for stream in streams:
                stream.__exit__(None, None, None)
    assert len(queue.requests) == 2


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"messages": [{"role": "user", "content": "a\ud800b"}]}, "lone surrogate"),
        ({**QUESTION, "logprobs": True, "stream": True}, "not streamed"),
        ({**QUESTION, "logprobs": True, "top_logprobs": 21}, "from 0 to 20"),
        ({**QUESTION, "top_logprobs": 2}, "needs 'logprobs': true"),
        ({**QUESTION, "logit_bias": {"5": 1}}, "Not supported"),
        ({**QUESTION, "tools": [{"type": "function"}]}, "'function': {...}"),
        ({**QUESTION, "tools": [{"type": "function", "function": {"name": "rm -rf /"}}]}, "letters, digits"),
        (
            {**QUESTION, "tools": [{"type": "function", "function": {"name": "t", "parameters": {"x": "y" * 70_000}}}]},
            "larger than 64 KiB",
        ),
        ({**QUESTION, "tools": [{"type": "function", "function": {"name": "t"}}] * 2}, "used twice"),
        ({**QUESTION, "tool_choice": "required"}, "needs 'tools'"),
        (
            {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "1", "function": {}}]}]},
            "name must be",
        ),
        ({**QUESTION, "stop": ["a", "b", "c", "d", "e"]}, "at most 4 strings"),
        ({**QUESTION, "response_format": {"type": "xml"}}, "text, json_object or json_schema"),
        ({**QUESTION, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "needs"),
        ({"messages": [{"role": "user", "content": "x"}] * 1001}, "more than 1,000"),
        ({"messages": [{"role": "user", "content": "x" * (2048 * 16 + 1)}]}, "far more than the model's context"),
    ],
)
def test_what_cannot_be_honoured_is_refused_with_a_400_that_names_it(serve, body: Any, reason: str):
    server, queue = serve()
    reply = post(server, body)
    assert reply.status_code == 400 and reason in reply.json()["error"]["message"]
    assert queue.requests == []


def test_parameters_that_ask_for_nothing_are_accepted(serve):
    server, _queue = serve()
    neutral = {**QUESTION, "frequency_penalty": 0, "presence_penalty": 0, "logprobs": False, "stop": None, "n": 1}
    assert post(server, neutral).status_code == 200


def test_models_have_stable_ids_without_spaces(serve):
    server, _queue = serve()
    listed = httpx.get(f"{server.address}/models", timeout=10).json()["data"]
    assert [m["id"] for m in listed] == ["SmolLM2-135M-Instruct.Q4_1"]
    assert post(server).json()["model"] == "SmolLM2-135M-Instruct.Q4_1"


def test_embeddings_without_an_embedding_model_say_how_to_get_one(serve):
    server, _queue = serve()
    reply = httpx.post(f"{server.address}/embeddings", json={"input": "hello", "model": "x"}, timeout=10)
    assert reply.status_code == 404 and "embedding GGUF" in reply.json()["error"]["message"]
    for body, reason in (({"input": [1, 2, 3]}, "token arrays"), ({"input": "x", "dimensions": 8}, "'dimensions'"),
                         ({"input": "x", "encoding_format": "int8"}, "only 'float' and 'base64'")):  # fmt: skip
        refused = httpx.post(f"{server.address}/embeddings", json=body, timeout=10)
        assert refused.status_code == 400 and reason in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"prompt": ["one", "two"]}, "one non-empty string"),
        ({"prompt": [1, 2, 3]}, "one non-empty string"),
        ({"prompt": "x", "echo": True}, "'echo'"),
        ({"prompt": "x", "suffix": "y"}, "'suffix'"),
        ({"prompt": "x", "logprobs": 3}, "'logprobs'"),
    ],
)
def test_completions_refuse_what_they_cannot_honour(serve, body, reason):
    server, queue = serve()
    reply = httpx.post(f"{server.address}/completions", json=body, timeout=10)
    assert reply.status_code == 400 and reason in reply.json()["error"]["message"]
    assert queue.requests == []


def test_completions_have_the_legacy_shape(serve):
    server, _queue = serve()
    reply = httpx.post(f"{server.address}/completions", json={"prompt": "Once upon a time"}, timeout=10).json()
    assert reply["object"] == "text_completion" and reply["choices"][0]["text"] == "Hi"
    assert reply["choices"][0]["finish_reason"] == "stop" and reply["id"].startswith("cmpl-")
