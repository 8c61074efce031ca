"""Tools through the local API, spoken to by the official ``openai`` client: its whole tool-calling flow
(``tools`` → ``tool_calls`` → a ``tool`` message → the answer), streamed and not, with the real model (SmolLM2's
weights carrying Qwen 2.5's template; a 135M model is forced to the call with ``tool_choice`` and held to the
schema by a grammar). A model whose template declares no tools is refused with a 400 that says so."""

from __future__ import annotations

import json
import shutil
import subprocess

import gguf
import openai
import pytest

from tests.helpers.gguf_factory import rewrite_gguf
from tests.helpers.local_api_server import serve_model
from tests.helpers.paths import FIXTURES, REPO_ROOT

TOOLS = [
    {"type": "function", "function": {
        "name": "get_current_time", "description": "Current time in an IANA timezone.",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "enum": ["Asia/Tokyo"]}},
                       "required": ["timezone"]}}},
    {"type": "function", "function": {
        "name": "convert_time", "description": "Convert a time between timezones.",
        "parameters": {"type": "object",
                       "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}},
                       "required": ["time"]}}},
]  # fmt: skip
FORCED = {"type": "function", "function": {"name": "get_current_time"}}
QUESTION = [{"role": "user", "content": "What time is it in Tokyo?"}]


@pytest.fixture(scope="module")
def served(smollm2_path, tmp_path_factory):
    template = (FIXTURES / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    path = rewrite_gguf(smollm2_path, tmp_path_factory.mktemp("api-tools") / "smollm2-tools.gguf",
                        {"tokenizer.chat_template": (gguf.GGUFValueType.STRING, template)})  # fmt: skip
    server, worker, info = serve_model(path)
    yield server, info
    server.stop()
    assert worker.shutdown(timeout=30)


def _client(server):
    return openai.OpenAI(base_url=server.address, api_key="unused", max_retries=0)


@pytest.mark.real_model
def test_the_openai_clients_tool_flow_not_streamed(served):
    server, info = served
    api = _client(server)
    first = api.chat.completions.create(model=info.name, messages=QUESTION, tools=TOOLS, tool_choice=FORCED,
                                        max_tokens=48)  # fmt: skip
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_current_time"
    assert json.loads(call.function.arguments) == {"timezone": "Asia/Tokyo"}
    result = {"timezone": "Asia/Tokyo", "datetime": "2026-12-04T19:42:00+09:00"}
    history = [*QUESTION, choice.message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]  # fmt: skip
    answer = api.chat.completions.create(model=info.name, messages=history, tools=TOOLS, max_tokens=24)
    assert answer.choices[0].finish_reason in ("stop", "length") and answer.choices[0].message.content
    assert answer.usage.prompt_tokens > first.usage.prompt_tokens + 20  # the call and its result were read


@pytest.mark.real_model
def test_the_openai_clients_tool_flow_streamed(served):
    server, info = served
    api = _client(server)
    whole = api.chat.completions.create(model=info.name, messages=QUESTION, tools=TOOLS, tool_choice="required",
                                        max_tokens=48)  # fmt: skip
    stream = api.chat.completions.create(model=info.name, messages=QUESTION, tools=TOOLS, tool_choice="required",
                                         max_tokens=48, stream=True)  # fmt: skip
    calls: dict[int, dict[str, str]] = {}
    finish, content = None, ""
    for piece in stream:
        delta = piece.choices[0].delta
        content += delta.content or ""
        for part in delta.tool_calls or []:
            entry = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] = part.id or entry["id"]
            entry["name"] = (part.function.name if part.function else None) or entry["name"]
            entry["arguments"] += (part.function.arguments if part.function else None) or ""
        finish = piece.choices[0].finish_reason or finish
    assert finish == "tool_calls" and content == ""
    (call,) = calls.values()
    expected = whole.choices[0].message.tool_calls[0]
    assert call["name"] == expected.function.name
    assert json.loads(call["arguments"]) == json.loads(expected.function.arguments)  # the same greedy call
    assert call["id"]


@pytest.mark.real_model
def test_tool_requests_that_cannot_be_honoured_get_a_400_that_says_why(served, smollm2_path):
    server, info = served
    api = _client(server)
    with pytest.raises(openai.BadRequestError, match="not among 'tools'"):
        api.chat.completions.create(model=info.name, messages=QUESTION, tools=TOOLS,
                                    tool_choice={"type": "function", "function": {"name": "rm_rf"}})  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="retired form of tools"):
        api.chat.completions.create(model=info.name, messages=QUESTION,
                                    functions=[{"name": "f", "parameters": {}}])  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="tool_call_id"):
        api.chat.completions.create(model=info.name, messages=[*QUESTION, {"role": "tool", "content": "x"}])
    plain_server, worker, plain = serve_model(smollm2_path)  # SmolLM2's own template: no tools
    try:
        with pytest.raises(openai.BadRequestError, match="does not declare tools"):
            _client(plain_server).chat.completions.create(model=plain.name, messages=QUESTION, tools=TOOLS)
        # "none" offers nothing: the model answers
        reply = _client(plain_server).chat.completions.create(model=plain.name, messages=QUESTION, tools=TOOLS,
                                                              tool_choice="none", max_tokens=8)  # fmt: skip
        assert reply.choices[0].message.content
    finally:
        plain_server.stop()
        assert worker.shutdown(timeout=30)


NODE_CLIENT = REPO_ROOT / "tests" / "clients"


@pytest.mark.real_model
@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_openais_node_client_tool_flow(served):
    if not (NODE_CLIENT / "node" / "node_modules" / "openai").is_dir():
        pytest.skip("npm's openai package is not installed (.ci/run installs it into tests/clients/node)")
    server, _info = served
    script = NODE_CLIENT / "openai_node_tools.mjs"
    linked = NODE_CLIENT / "node" / script.name  # next to its node_modules, where Node resolves "openai"
    shutil.copyfile(script, linked)
    done = subprocess.run(["node", str(linked), server.address], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["finish"] == "tool_calls" and results["name"] == "get_current_time"
    assert json.loads(results["arguments"]) == {"timezone": "Asia/Tokyo"}
    (streamed,) = results["streamed"]
    assert streamed["name"] == "get_current_time" and json.loads(streamed["arguments"]) == {"timezone": "Asia/Tokyo"}
    assert results["streamed_finish"] == "tool_calls"
    assert results["answer_finish"] in ("stop", "length") and results["answer_has_text"]
