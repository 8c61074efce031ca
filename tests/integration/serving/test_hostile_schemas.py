"""JSON schemas with limits, sent to ``fara-desktop serve`` as a client sends them (the ``openai`` client), as a
``response_format`` and as a forced tool's parameters: every counted keyword at several sizes. The server process
is alive after each one, and each answer is either a reply that follows the schema or a 400 that says why.

Before: ``{"type": "string", "maxLength": 2001}`` ended the process with SIGSEGV (llama.cpp's grammar parser refused
the converted grammar, and the NULL it returned reached the sampler chain), ``pattern: ^a{0,1000000}$`` overflowed
its stack, and ``minLength: 100000000`` took 25 s and 3.1 GB to build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import gguf
import openai
import pytest

from tests.helpers.gguf_factory import rewrite_gguf
from tests.helpers.paths import FIXTURES

SIZES = (0, 5, 1000, 2000, 2001, 4096, 100_000, 100_000_000)
LIMITED = [
    *({"type": "string", keyword: n} for keyword in ("minLength", "maxLength") for n in SIZES),
    *({"type": "array", "items": {"type": "integer"}, key: n} for key in ("minItems", "maxItems") for n in SIZES),
    *({"type": "object", keyword: n} for keyword in ("minProperties", "maxProperties") for n in SIZES),
    *({"type": "string", "pattern": f"^a{{{n}}}$"} for n in SIZES),
    *({"type": "string", "pattern": f"^a{{0,{n}}}$"} for n in SIZES),
    *({"type": "string", "pattern": f"^a{{{n},}}$"} for n in SIZES),
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 120},
                                      "body": {"type": "string", "maxLength": 4096}}},
    {"type": "string", "pattern": "^" + "(" * 5000 + "a" + ")" * 5000 + "$"},
    {"type": "string", "maxLength": "many"},
    {"type": "array", "items": {"type": "array", "items": {"type": "string", "maxLength": 2000}, "maxItems": 2000},
     "maxItems": 2000},
]  # fmt: skip


@pytest.fixture(scope="module")
def serve(smollm2_path, tmp_path_factory):
    """``fara-desktop serve`` with SmolLM2 carrying Qwen 2.5's template (so that tools can be forced)."""
    folder = tmp_path_factory.mktemp("schemas")
    template = (FIXTURES / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    model = rewrite_gguf(smollm2_path, folder / "smollm2-tools.gguf",
                         {"tokenizer.chat_template": (gguf.GGUFValueType.STRING, template)})  # fmt: skip
    env = {**os.environ, "FARA_HOME": str(folder / "home"), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "fara_desktop", "serve", "--port", "0", "--model", str(model)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    address = process.stdout.readline().strip()  # type: ignore[union-attr]
    assert address.startswith("http://127.0.0.1:"), address
    yield process, openai.OpenAI(base_url=address, api_key="none", max_retries=0, timeout=120)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    process.stdout.close()  # type: ignore[union-attr]


def _answer(call) -> tuple[int, str]:
    """(200 and the reply, or the error's status and message)."""
    try:
        reply = call()
    except openai.APIStatusError as exc:
        return exc.status_code, exc.message
    message = reply.choices[0].message
    return 200, message.content or json.dumps([c.function.arguments for c in message.tool_calls or ()])


def _held(schema: dict, status: int, text: str) -> None:
    """A reply (possibly cut at max_tokens) or a 400 with a reason; never a 500 or a dropped connection."""
    assert status in (200, 400), (schema, status, text)
    if status == 400:
        assert len(text) > 20 and "Traceback" not in text, text


@pytest.mark.real_model
@pytest.mark.parametrize("schema", LIMITED, ids=lambda s: json.dumps(s)[:60])
def test_a_response_format_with_limits_is_answered_and_the_server_lives(serve, schema):
    process, client = serve
    status, text = _answer(lambda: client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Write it."}], max_tokens=8, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    ))  # fmt: skip
    assert process.poll() is None, f"the server died (exit {process.returncode}) on {json.dumps(schema)[:200]}"
    _held(schema, status, text)


@pytest.mark.real_model
@pytest.mark.parametrize("schema", LIMITED[::3], ids=lambda s: json.dumps(s)[:60])
def test_a_forced_tool_with_limits_is_answered_and_the_server_lives(serve, schema):
    process, client = serve
    parameters = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    tools = [{"type": "function", "function": {"name": "save", "description": "Save.", "parameters": parameters}}]
    status, text = _answer(lambda: client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Save it."}], max_tokens=8, temperature=0,
        tools=tools, tool_choice="required",
    ))  # fmt: skip
    assert process.poll() is None, f"the server died (exit {process.returncode}) on {json.dumps(schema)[:200]}"
    _held(schema, status, text)


@pytest.mark.real_model
def test_an_everyday_schema_with_a_4096_character_field_is_followed(serve):
    process, client = serve
    schema = LIMITED[-4]
    status, text = _answer(lambda: client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "A note about the sea, as JSON."}], max_tokens=60,
        temperature=0, response_format={"type": "json_schema", "json_schema": {"name": "note", "schema": schema}},
    ))  # fmt: skip
    assert status == 200 and process.poll() is None
    assert text.lstrip().startswith("{")  # held to an object (60 tokens may end it before its closing brace)


@pytest.mark.real_model
def test_a_schema_over_the_budget_is_refused_with_the_keyword_named(serve):
    process, client = serve
    status, text = _answer(lambda: client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "x"}], max_tokens=4,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": {
            "type": "string", "minLength": 100_000_000}}},
    ))  # fmt: skip
    assert status == 400 and "minLength" in text and "2,000" in text
    assert process.poll() is None
