"""The local API through other widely used OpenAI-compatible clients: OpenAI's Node.js library (npm ``openai``,
installed by .ci/run) and curl, each with streaming, stop, a JSON schema and embeddings (the Python ``openai``
client does the same in test_local_api.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fara_desktop.engine.embedder import Embedder
from tests.helpers.gguf_factory import write_bert_embedder
from tests.helpers.local_api_server import serve_model
from tests.helpers.paths import REPO_ROOT

pytestmark = [pytest.mark.real_model, pytest.mark.slow]
NODE_CLIENT = REPO_ROOT / "tests" / "clients"
NODE_MODULES = NODE_CLIENT / "node" / "node_modules"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}, "sunny": {"type": "boolean"}},
          "required": ["city", "sunny"], "additionalProperties": False}  # fmt: skip


@pytest.fixture(scope="module")
def address(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    embedder = Embedder(write_bert_embedder(tmp_path_factory.mktemp("embedder") / "mini-embedder.gguf"), threads=1)
    server, worker, _info = serve_model(smollm2_path, embedder=lambda: embedder)
    yield server.address
    server.stop()
    embedder.close()
    assert worker.shutdown(timeout=30)


def _check(results: dict[str, object]) -> None:
    text, stop = str(results["text"]), str(results["stop"])
    assert stop and stop in text
    cut = text[: text.index(stop)]
    assert results["stopped"] == cut and results["finish"] == "stop"
    assert results["streamed"] == cut  # streamed with stop: no part of the stop string reached the client
    reply = json.loads(str(results["json"]))
    assert set(reply) == {"city", "sunny"} and isinstance(reply["sunny"], bool)
    assert results["dimensions"] == [64, 64]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_openais_node_client(address: str):
    if not NODE_MODULES.joinpath("openai").is_dir():
        pytest.skip("npm's openai package is not installed (.ci/run installs it into tests/clients/node)")
    script = NODE_CLIENT / "openai_node.mjs"
    linked = NODE_CLIENT / "node" / script.name  # next to its node_modules, where Node resolves "openai"
    shutil.copyfile(script, linked)
    done = subprocess.run(["node", str(linked), address], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    _check(json.loads(done.stdout.strip().splitlines()[-1]))


def _curl(address: str, path: str, body: dict[str, object], stream: bool = False) -> str:
    command = ["curl", "-sS", "--fail-with-body", "-H", "Content-Type: application/json", "-d", json.dumps(body),
               f"{address}{path}"]  # fmt: skip
    if stream:
        command.insert(1, "-N")
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl(address: str):
    question = {"model": "any", "temperature": 0, "max_tokens": 48,
                "messages": [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]}  # fmt: skip
    text = json.loads(_curl(address, "/chat/completions", question))["choices"][0]["message"]["content"]
    stop = text.split()[2]
    stopped = json.loads(_curl(address, "/chat/completions", {**question, "stop": [stop]}))["choices"][0]
    events = _curl(address, "/chat/completions", {**question, "stop": [stop], "stream": True}, stream=True)
    payloads = [line[6:] for line in events.splitlines() if line.startswith("data: ")]
    assert payloads[-1] == "[DONE]"
    streamed = "".join(json.loads(p)["choices"][0]["delta"].get("content") or "" for p in payloads[:-1])
    json_reply = json.loads(_curl(address, "/chat/completions", {
        "model": "any", "temperature": 0, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Name a sunny city, as JSON."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}}}))  # fmt: skip
    embeddings = json.loads(_curl(address, "/embeddings", {"model": "any", "input": ["the cat sat", "a dog"]}))
    _check({"text": text, "stop": stop, "stopped": stopped["message"]["content"], "finish": stopped["finish_reason"],
            "streamed": streamed, "json": json_reply["choices"][0]["message"]["content"],
            "dimensions": [len(d["embedding"]) for d in embeddings["data"]]})  # fmt: skip
