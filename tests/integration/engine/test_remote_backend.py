"""A server's model through the real inference worker, over real HTTP on 127.0.0.1: streaming, reasoning, the
request it sends, and every fault a server can produce — each with a clear message and nothing lost."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fara_desktop.engine.remote_backend import MAX_REPLY_CHARS, RemoteBackend
from fara_desktop.engine.remote_errors import Timeouts
from fara_desktop.engine.routed_backend import RoutedBackend
from fara_desktop.engine.types import Cancelled, Failed, Finished, ModelLoaded, ModelLoadFailed, RemoteModel, TokenText
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.tools import ToolCall, ToolOffer, ToolSpec
from tests.helpers.fakes import FakeBackend
from tests.helpers.openai_servers import ScriptedServer

QUESTION = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello?")]
FAST = Timeouts(connect_s=2.0, read_s=1.0, retries=3, backoff_s=0.05)
PATIENT = Timeouts(connect_s=2.0, read_s=60.0)  # Stop must not wait for a timeout


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        yield scripted


@pytest.fixture
def worker(event_log):
    worker = InferenceWorker(event_log, RoutedBackend(FakeBackend(), RemoteBackend(FAST))).start()
    yield worker
    assert worker.shutdown(timeout=30)


def model_of(server: ScriptedServer, model: str = "scripted-model", key: str | None = "sk-test") -> RemoteModel:
    return RemoteModel("gpu-box", server.base_url, model, key)


def load(worker, event_log, source):
    worker.load_model(source)
    return event_log.next_of(ModelLoaded, ModelLoadFailed)


def reply(worker, event_log, sampling=None):
    request = worker.generate(QUESTION, sampling or SamplingParams(temperature=0.2, top_p=0.9, max_tokens=50, seed=7))
    pieces = []
    while True:
        event = event_log.next_of(TokenText, Finished, Failed, Cancelled)
        if getattr(event, "request_id", None) != request:
            continue
        if isinstance(event, TokenText):
            pieces.append(event)
        else:
            return event, pieces


def test_reasoning_a_server_sends_apart_stays_apart_even_when_it_names_a_marker(worker, event_log, server):
    """A server's separated reasoning used to be wrapped back in <think> markers to be split again: reasoning that
    mentions "</think>" then ended early and its rest leaked into the answer (issue 28)."""
    server.script.reasoning = ["The tag ", "</think>", " closes a block."]
    load(worker, event_log, model_of(server))
    finished, pieces = reply(worker, event_log)
    assert isinstance(finished, Finished)
    assert (finished.text, finished.reasoning) == ("Hello from the server.", "The tag </think> closes a block.")
    assert "".join(p.text for p in pieces if p.reasoning) == "The tag </think> closes a block."


def test_a_server_model_streams_through_the_same_worker(worker, event_log, server):
    server.script.reasoning = ["The user", " greets me."]
    loaded = load(worker, event_log, model_of(server))
    assert isinstance(loaded, ModelLoaded) and loaded.info.server == "gpu-box" and loaded.info.name == "scripted-model"
    finished, pieces = reply(worker, event_log)
    assert isinstance(finished, Finished)
    assert (finished.text, finished.reasoning) == ("Hello from the server.", "The user greets me.")
    assert finished.stats.completion_tokens == 5  # from the stream's own usage figures
    assert "".join(p.text for p in pieces if not p.reasoning) == "Hello from the server."
    sent = server.seen.bodies[-1]
    assert sent["stream"] is True and sent["model"] == "scripted-model"
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["seed"]) == (0.2, 0.9, 50, 7)
    assert "top_k" not in sent and "min_p" not in sent  # not OpenAI fields: not sent
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello?"}]
    assert all(h.get("authorization") == "Bearer sk-test" for h in server.seen.headers)


def test_a_local_model_after_a_server_model_and_back(worker, event_log, server):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    local = load(worker, event_log, Path("local.gguf"))
    assert isinstance(local, ModelLoaded) and local.info.server is None
    finished, _ = reply(worker, event_log)
    assert finished.text == "Hello there!"  # the fake local model
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda s: s.script.models_statuses.extend([401]), "refused the API key (401)"),
        (lambda s: s.script.models_statuses.extend([403]), "refused the API key (403)"),
        (lambda s: s.script.models.clear() or s.script.models.append("other"), "has no model 'scripted-model'"),
        (lambda s: s.script.models_statuses.extend([500, 502, 503]), "failed (503)"),
        (lambda s: s.script.models_statuses.extend([429, 429, 429]), "tried 3 times"),
    ],
    ids=["401", "403", "404-model", "5xx", "429"],
)
def test_load_faults_say_what_to_do(worker, event_log, server, setup, expected):
    setup(server)
    failed = load(worker, event_log, model_of(server))
    assert isinstance(failed, ModelLoadFailed) and expected in failed.message
    assert "sk-test" not in failed.message


def test_busy_server_is_retried_with_backoff_then_loads(worker, event_log, server):
    server.script.models_statuses.extend([429, 503])
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    assert server.seen.paths.count("/v1/models") == 3


def test_an_unreachable_server_and_a_name_that_does_not_resolve(worker, event_log, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    failed = load(worker, event_log, RemoteModel("box", f"http://127.0.0.1:{closed_port}/v1", "m"))
    assert isinstance(failed, ModelLoadFailed) and "cannot be reached" in failed.message

    real = socket.getaddrinfo

    def no_such_name(host, *args, **kwargs):
        if host == "gpu-box.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    failed = load(worker, event_log, RemoteModel("box", "http://gpu-box.invalid:8000/v1", "m"))
    assert isinstance(failed, ModelLoadFailed) and "could not be found (DNS)" in failed.message


def test_a_certificate_this_computer_does_not_trust(worker, event_log, tmp_path):
    import http.server
    import ssl

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        failed = load(worker, event_log, RemoteModel("box", f"https://127.0.0.1:{httpd.server_address[1]}/v1", "m"))
        assert isinstance(failed, ModelLoadFailed) and "TLS certificate" in failed.message
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(("status", "expected"), [(401, "API key"), (404, "does not know the model"), (500, "failed")])
def test_chat_faults_fail_the_reply_clearly(worker, event_log, server, status, expected):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.chat_status = status
    failed, _ = reply(worker, event_log)
    assert isinstance(failed, Failed) and expected in failed.message and failed.error_type == "RemoteServerError"


def test_a_stream_that_stops_mid_reply_keeps_what_arrived(worker, event_log, server):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.break_after = 3
    failed, pieces = reply(worker, event_log)
    assert isinstance(failed, Failed) and "broke off" in failed.message and "What arrived is kept" in failed.message
    assert "".join(p.text for p in pieces) == "Hello from the"


def test_malformed_lines_are_skipped_and_a_stream_of_nothing_else_is_refused(worker, event_log, server):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.garbage_lines = 2
    finished, _ = reply(worker, event_log)
    assert isinstance(finished, Finished) and finished.text == "Hello from the server."
    server.script.only_garbage = True
    failed, _ = reply(worker, event_log)
    assert isinstance(failed, Failed) and "cannot read" in failed.message


def test_a_silent_server_times_out_with_the_stated_time(worker, event_log, server):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.hold = threading.Event()
    failed, _ = reply(worker, event_log)
    assert isinstance(failed, Failed) and "sent nothing for 1 s" in failed.message


def test_a_huge_reply_is_cut_and_a_huge_line_refused(worker, event_log, server):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.flood_chars = MAX_REPLY_CHARS + 200_000
    finished, _ = reply(worker, event_log)
    assert isinstance(finished, Finished) and finished.finish_reason == "length"
    assert len(finished.text) == MAX_REPLY_CHARS
    server.script.flood_chars = 0
    server.script.long_line_bytes = 2 * 1024 * 1024
    failed, _ = reply(worker, event_log)
    assert isinstance(failed, Failed) and "not a reply" in failed.message


def test_an_event_that_never_ends_is_refused_not_buffered(worker, event_log, server):
    """``data:`` lines with no blank line between them grew one event to 2 GiB of memory in 9 s."""
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.unending_event_lines = 20_000  # 20 MB in one event
    failed, pieces = reply(worker, event_log)
    assert isinstance(failed, Failed) and "event of more than 1024 KiB" in failed.message
    assert pieces == []


def test_endless_empty_deltas_end_the_reply_clearly(worker, event_log, server):
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.empty_deltas = 30_000
    failed, _ = reply(worker, event_log)
    assert isinstance(failed, Failed) and "events in a row without text" in failed.message
    server.script.empty_deltas = 5_000  # many, but then words: a slow start, not a broken server
    finished, _ = reply(worker, event_log)
    assert isinstance(finished, Finished) and finished.text == "Hello from the server."


@pytest.mark.parametrize("usage", ['{"completion_tokens": 1e999, "prompt_tokens": -1}', '{"completion_tokens": "5"}',
                                   '{"completion_tokens": 1e308, "prompt_tokens": 1e20}'])  # fmt: skip
def test_impossible_numbers_from_a_server_do_not_break_the_reply(worker, event_log, server, usage):
    """``usage.completion_tokens: 1e999`` made the reply fail with an OverflowError."""
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    server.script.usage_text = usage
    finished, _ = reply(worker, event_log)
    assert isinstance(finished, Finished) and finished.text == "Hello from the server."
    assert finished.stats.completion_tokens == 5 and finished.stats.prompt_tokens == 0  # counted here instead


@pytest.mark.parametrize("phase", ["before the first token", "while streaming"])
def test_stop_closes_the_stream_at_once(event_log, server, phase):
    worker = InferenceWorker(event_log, RemoteBackend(PATIENT)).start()
    assert isinstance(load(worker, event_log, model_of(server)), ModelLoaded)
    if phase == "before the first token":
        server.script.hold = threading.Event()
    else:
        server.script.word_interval = 5.0
    request = worker.generate(QUESTION, SamplingParams())
    assert server.seen.chat_received.wait(5)
    if phase == "while streaming":
        first = event_log.next_of(TokenText)
        assert first.request_id == request
    started = time.perf_counter()
    worker.cancel()
    cancelled = event_log.next_of(Cancelled)
    stopped = time.perf_counter() - started
    assert cancelled.request_id == request and stopped < 0.5
    assert server.seen.client_gone.wait(5), "the server never saw the client leave"
    print(f"\nStop {phase}: {stopped * 1000:.0f} ms")
    assert worker.shutdown(timeout=30)


def test_a_servers_tool_calls_come_apart_and_tools_go_as_openai_fields(worker, event_log, server):
    """A server renders tools with its own template and sends the calls apart (streamed in pieces, by index)."""
    server.script.words = []
    server.script.tool_call_deltas = [
        [{"index": 0, "id": "call_A", "type": "function", "function": {"name": "get_current_time", "arguments": ""}}],
        [{"index": 0, "function": {"arguments": '{"timezone": '}}],
        [{"index": 0, "function": {"arguments": '"Asia/Tokyo"}'}}],
        [{"index": 99, "function": {"name": "ignored", "arguments": "{}"}}],  # out of bounds: dropped
    ]
    load(worker, event_log, model_of(server))
    tool = ToolSpec("get_current_time", "Time.", '{"type": "object", "properties": {"timezone": {"type": "string"}}}')
    history = (*QUESTION, ChatMessage("assistant", "", tool_calls=(ToolCall("call_0", "get_current_time", "{}"),)),
               ChatMessage("tool", "19:42", tool_call_id="call_0", name="get_current_time"))  # fmt: skip
    request = worker.generate(history, SamplingParams(max_tokens=20), tools=ToolOffer((tool,), "get_current_time"))
    finished = event_log.next_of(Finished, Failed)
    assert isinstance(finished, Finished) and finished.request_id == request
    assert finished.finish_reason == "tool_calls"
    assert finished.tool_calls == (ToolCall("call_A", "get_current_time", '{"timezone": "Asia/Tokyo"}'),)
    sent = server.seen.bodies[-1]
    assert sent["tools"][0]["function"]["name"] == "get_current_time"
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_current_time"}}
    assert sent["messages"][-2]["tool_calls"][0]["id"] == "call_0" and sent["messages"][-1]["tool_call_id"] == "call_0"
