"""The local API with the real model, spoken to by the official ``openai`` client: streaming and not, a client that
disconnects, two clients at once beside a GUI chat (every reply complete and none interleaved), and the API key
that listening beyond this computer requires."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from fara_desktop.engine.types import ApiClient, Finished, ModelInfo, ModelLoaded, ModelLoadFailed
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.serving.api_server import ApiKeyRequired, ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.serving.openai_format import model_id
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import wait_until
from tests.helpers.local_api_server import serve_model

PARAMS = LoadParams(n_ctx=2048, prefault=False)


@pytest.fixture(scope="module")
def served(smollm2_path):
    server, worker, info = serve_model(smollm2_path, PARAMS)
    yield server, worker, info
    server.stop()
    assert worker.shutdown(timeout=30)


def client(server: ApiServer, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.address, api_key=key, max_retries=0)


@pytest.mark.real_model
def test_the_openai_client_gets_the_same_reply_streamed_or_not(served):
    server, _worker, info = served
    api = client(server)
    assert [m.id for m in api.models.list().data] == [model_id(info)] and " " not in model_id(info)
    question = [{"role": "user", "content": "What is the capital of France?"}]
    whole = api.chat.completions.create(model=info.name, messages=question, temperature=0, max_tokens=24)
    text = whole.choices[0].message.content
    assert text and whole.usage.completion_tokens > 0 and whole.choices[0].finish_reason in ("stop", "length")
    streamed = api.chat.completions.create(
        model=info.name, messages=question, temperature=0, max_tokens=24, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    pieces, usage = [], None
    for chunk in streamed:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    assert "".join(pieces) == text and usage is not None and usage.completion_tokens == whole.usage.completion_tokens


@pytest.mark.real_model
def test_bad_requests_get_a_400_that_says_why(served):
    server, _worker, info = served
    with pytest.raises(openai.BadRequestError, match="must be a base64 data: URI"):
        client(server).chat.completions.create(
            model=info.name, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
        )
    with pytest.raises(openai.BadRequestError, match="only text and image_url content"):
        client(server).chat.completions.create(
            model=info.name, messages=[{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]
        )
    with pytest.raises(openai.BadRequestError, match="cannot see pictures"):  # SmolLM2 has no projector
        picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        client(server).chat.completions.create(model=info.name, messages=[{"role": "user", "content": [picture]}])
    with pytest.raises(openai.BadRequestError, match="this app fetches nothing from the network"):
        picture = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
        client(server).chat.completions.create(model=info.name, messages=[{"role": "user", "content": [picture]}])
    reply = httpx.post(f"{server.address}/chat/completions", content=b"{not json", timeout=10,
                       headers={"content-type": "application/json"})  # fmt: skip
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]["message"]
    undeclared = httpx.post(f"{server.address}/chat/completions", content=b"{not json", timeout=10)
    assert undeclared.status_code == 415  # only declared JSON is read (a web page's text/plain POST is not)


@pytest.mark.real_model
def test_a_client_that_disconnects_stops_its_generation(served):
    server, _worker, info = served
    stream = client(server).chat.completions.create(
        model=info.name, messages=[{"role": "user", "content": "Write a very long story about a dragon."}],
        max_tokens=2000, stream=True,
    )  # fmt: skip
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    started = time.perf_counter()
    stream.close()  # the client goes away mid-reply
    after = client(server).chat.completions.create(
        model=info.name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    waited = time.perf_counter() - started
    print(f"\nthe next request was answered {waited:.2f} s after the first client left")
    assert after.choices[0].message.content is not None
    assert waited < 10  # 2,000 tokens would take ~30 s at this model's speed


@pytest.mark.real_model
def test_an_api_key_is_required_beyond_this_computer_and_checked(served):
    _server, worker, info = served
    with pytest.raises(ApiKeyRequired):
        ApiServer(LocalApi(worker, lambda: info), host="0.0.0.0")
    guarded = ApiServer(LocalApi(worker, lambda: info, api_key="s3cret-key"))
    guarded.start()
    try:
        with pytest.raises(openai.AuthenticationError):
            client(guarded, "wrong").models.list()
        assert client(guarded, "s3cret-key").models.list().data[0].id == model_id(info)
    finally:
        guarded.stop()


@pytest.mark.real_model
def test_two_clients_and_a_gui_chat_at_once_get_complete_replies_none_interleaved(qtbot, smollm2_path):
    """The three requests share one queue. Each reply must be exactly what the model writes for that request
    alone: the same requests are replayed one by one, in the order the worker ran them, on a fresh worker
    (same cache states, so greedy decoding gives the same tokens)."""
    from fara_desktop.ui.main_window import MainWindow

    window = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=32))
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.modelLoaded, timeout=60000):
        window.load_model(smollm2_path, PARAMS)
    info = window.chat.model_info
    order: list[tuple[str, object]] = []  # (who, request id) as the worker ran them
    worker = window.bridge.worker
    original = worker._generate  # type: ignore[attr-defined]

    def recording(command):
        order.append((command.request_id, command))
        return original(command)

    worker._generate = recording  # type: ignore[attr-defined]
    server = ApiServer(LocalApi(worker, lambda: info, lambda: SamplingParams(temperature=0.0)))
    server.start()
    questions = {"A": "Name three colours.", "B": "What is two plus two?"}
    replies: dict[str, str] = {}

    def ask_api(name: str) -> None:
        stream = client(server).chat.completions.create(
            model=info.name, messages=[{"role": "user", "content": questions[name]}], temperature=0, max_tokens=32,
            stream=True,
        )  # fmt: skip
        replies[name] = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    threads = [threading.Thread(target=ask_api, args=(name,)) for name in questions]
    for thread in threads:
        thread.start()
    window.composer.setPlainText("Tell me about the sea.")
    with qtbot.waitSignal(window.replyFinished, timeout=120000) as gui:
        window.send_button.click()
    for thread in threads:
        thread.join(120)
    server.stop()
    assert set(replies) == {"A", "B"} and all(replies.values())
    gui_text = gui.args[0].text
    window.close()

    # the replay: the same commands, one at a time, in the order they ran
    finished: dict[int, str] = {}
    done = threading.Event()

    def sink(event):
        if isinstance(event, Finished):
            finished[event.request_id] = event.text
            done.set()
        elif isinstance(event, (ModelLoaded, ModelLoadFailed)):
            done.set()

    replay = InferenceWorker(sink).start()
    replay.load_model(smollm2_path, PARAMS)
    assert done.wait(60)
    expected = []
    for _request_id, command in order:
        done.clear()
        replay.generate(command.messages, command.sampling, command.conversation, command.thinking)
        assert done.wait(120)
        expected.append(finished[max(finished)])
    assert replay.shutdown(timeout=30)
    got = []
    for _request_id, command in order:
        user = command.messages[-1].content
        got.append(gui_text if user == "Tell me about the sea." else replies["A" if user == questions["A"] else "B"])
    assert got == expected


@pytest.mark.real_model
def test_time_to_first_token_added_by_the_local_api(served):
    """The same request straight into the worker's queue (the GUI's path) and through the local API with the
    official client, interleaved; the difference of the medians is what HTTP and the API add."""
    import statistics

    server, worker, info = served
    question = [{"role": "user", "content": "Name a colour."}]
    messages = [ChatMessage("user", "Name a colour.")]
    api = client(server)

    def queue_path() -> float:
        first = threading.Event()
        finished = threading.Event()
        started = time.perf_counter()
        stamp: list[float] = []

        def sink(event):
            if not first.is_set() and getattr(event, "text", "") and not isinstance(event, Finished):
                stamp.append(time.perf_counter())
                first.set()
            if isinstance(event, Finished):
                finished.set()

        # As the API's requests are (the local clients' own conversation): like is compared with like.
        worker.generate(messages, SamplingParams(temperature=0.0, max_tokens=8), ApiClient("local-clients"),
                        on_event=sink)  # fmt: skip
        assert finished.wait(60)
        return stamp[0] - started

    def api_path() -> float:
        started = time.perf_counter()
        stream = api.chat.completions.create(model=info.name, messages=question, temperature=0, max_tokens=8,
                                             stream=True)  # fmt: skip
        first = None
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
        assert first is not None
        return first - started

    queue_times, api_times = [], []
    for _ in range(7):
        queue_times.append(queue_path())
        api_times.append(api_path())
    added = statistics.median(api_times) - statistics.median(queue_times)
    print(f"\ntime to first token: queue (GUI path) {statistics.median(queue_times) * 1000:.1f} ms, local API "
          f"{statistics.median(api_times) * 1000:.1f} ms: {added * 1000:.1f} ms added")  # fmt: skip
    assert added < 0.1


@pytest.mark.real_model
def test_stop_ends_the_reply_before_the_stop_string_streamed_or_not(served):
    """``stop`` was ignored: the reply ran past it and ``finish_reason`` still said "stop"."""
    server, _worker, _info = served
    with client(server) as api:
        _stop_three_ways(api)


def _stop_three_ways(api: openai.OpenAI) -> None:
    question = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    free = api.chat.completions.create(model="m", messages=question, temperature=0, max_tokens=48)
    text = free.choices[0].message.content
    words = text.split()
    assert len(words) >= 4, text
    stop = words[2]  # a string the free reply holds, not at its start
    cut = text[: text.index(stop)]
    stopped = api.chat.completions.create(model="m", messages=question, temperature=0, max_tokens=48, stop=[stop])
    assert stopped.choices[0].message.content == cut and stopped.choices[0].finish_reason == "stop"
    pieces = []
    for chunk in api.chat.completions.create(model="m", messages=question, temperature=0, max_tokens=48,
                                              stop=stop, stream=True):  # fmt: skip
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    assert "".join(pieces) == cut  # no part of the stop string ever reached the client


@pytest.mark.real_model
@pytest.mark.parametrize("stream", [False, True])
def test_json_output_follows_the_schema(served, stream):
    """``response_format`` was ignored and gave prose; now llama.cpp's grammar holds the model to the schema."""
    server, _worker, _info = served
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
              "sunny": {"type": "boolean"}}, "required": ["city", "sunny"], "additionalProperties": False}  # fmt: skip
    response_format = {"type": "json_schema", "json_schema": {"name": "city", "schema": schema}}
    options = {"model": "m", "temperature": 0, "max_tokens": 64, "response_format": response_format,
               "messages": [{"role": "user", "content": "Name a sunny city, as JSON."}]}  # fmt: skip
    with client(server) as api:
        _json_two_ways(api, options, stream)


def _json_two_ways(api: openai.OpenAI, options: dict, stream: bool) -> None:
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in api.chat.completions.create(
            stream=True, **options) if c.choices)  # fmt: skip
    else:
        text = api.chat.completions.create(**options).choices[0].message.content
    reply = json.loads(text)
    assert set(reply) == {"city", "sunny"} and isinstance(reply["city"], str) and isinstance(reply["sunny"], bool)
    anything = api.chat.completions.create(
        model="m", temperature=0, max_tokens=64, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "Describe a cat as JSON."}],
    )  # fmt: skip
    if anything.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(anything.choices[0].message.content), dict)


@pytest.mark.real_model
def test_a_client_reuses_its_own_conversations_and_never_what_another_or_a_chat_sent(smollm2_path):
    """Two clients shared the prompt cache: a right guess of another's prefix answered in 0.01 s, a wrong one in
    23-30 s. Then every API request read its whole prompt. Now each principal (an API key, or the local clients)
    reuses its own conversations only — two of them at once — and the user's chats theirs; measured as tokens read,
    which is what the time follows."""
    log = []
    done = threading.Event()

    def sink(event):
        log.append(event)
        if isinstance(event, (Finished, ModelLoaded, ModelLoadFailed)):
            done.set()

    worker = InferenceWorker(sink).start()
    try:

        def run(messages, conversation):
            done.clear()
            worker.generate(messages, SamplingParams(temperature=0, max_tokens=2), conversation, True, sink)
            assert done.wait(120)
            return log[-1].stats

        def reused(stats):
            return stats.prompt_tokens - stats.prompt_tokens_evaluated

        done.clear()
        worker.load_model(smollm2_path, PARAMS)
        assert done.wait(60) and isinstance(log[-1], ModelLoaded)
        a, b, chats = ApiClient("key-a"), ApiClient("key-b"), 7
        secret = [ChatMessage("user", "My bank PIN is 4821 and my street is Rose Lane. " * 20)]
        other = [ChatMessage("user", "Plan a picnic by a lake for six friends with a dog. " * 20)]
        assert reused(run(secret, a)) == 0
        assert reused(run(secret, b)) == 0  # B guessed A's words right: it reads them whole all the same
        assert reused(run(secret, chats)) == 0  # and so does a chat of the user's
        said = run(secret, a)  # A again, after B and a chat held the context: its own conversation comes back
        assert reused(said) == said.prompt_tokens - 1
        assert reused(run(other, a)) < 30  # A's second conversation (only the template's system prompt is shared;
        # the first conversation is kept) ...
        follow_up = [*secret, ChatMessage("assistant", "Noted."), ChatMessage("user", "What is my street?")]
        first_again = run(follow_up, a)  # ... and back to the first: only the new words are read
        assert reused(first_again) >= len(secret[0].content) // 8 and first_again.prompt_tokens_evaluated < 30
        second_again = run([*other, ChatMessage("assistant", "Sure."), ChatMessage("user", "Where?")], a)
        assert second_again.prompt_tokens_evaluated < 30
        in_chat = run([*secret, ChatMessage("assistant", "Noted."), ChatMessage("user", "Thanks")], chats)
        assert in_chat.prompt_tokens_evaluated < 30  # the user's chat kept its own reading through all of it
        assert reused(run(follow_up, ApiClient("key-c"))) == 0  # a third client never reads from A's follow-up
    finally:
        assert worker.shutdown(timeout=30)


def test_embeddings_come_from_the_documents_embedding_model(tmp_path):
    """/v1/embeddings answered 404 although the app holds an embedding model for documents."""
    from fara_desktop.engine.embedder import Embedder
    from tests.helpers.gguf_factory import write_bert_embedder
    from tests.helpers.scripted_queue import ScriptedQueue

    embedder = Embedder(write_bert_embedder(tmp_path / "mini-embedder.gguf"), threads=1)
    info = ModelInfo(tmp_path / "chat.gguf", "Chat", "llama", 2048, 2048, 2, 2, "f16", False, "gguf", 0.1, 1)
    server = ApiServer(LocalApi(ScriptedQueue(), lambda: info, embedder=lambda: embedder))
    server.start()
    try:
        with client(server) as api:
            _embed_two_ways(api, embedder)
    finally:
        server.stop()
        embedder.close()


def _embed_two_ways(api: openai.OpenAI, embedder: Any) -> None:
    import numpy as np

    reply = api.embeddings.create(model="any", input=["the cat sat", "a dog"])
    vectors = np.array([d.embedding for d in reply.data])
    assert vectors.shape == (2, embedder.dimensions) and reply.model == "mini-embedder"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    same = api.embeddings.create(model="any", input="the cat sat", encoding_format="float").data[0].embedding
    assert np.allclose(same, vectors[0], atol=1e-4)  # the same vector as floats and as base64


@pytest.mark.real_model
def test_completions_continue_the_prompt_itself_streamed_or_not(served):
    """/v1/completions answered 404; now it continues the text as written, without the chat template."""
    server, _worker, _info = served
    with client(server) as api:
        _complete_three_ways(api)


def _complete_three_ways(api: openai.OpenAI) -> None:
    prompt = "The three primary colours are red, yellow and"
    whole = api.completions.create(model="m", prompt=prompt, temperature=0, max_tokens=8)
    text = whole.choices[0].text
    assert text.strip() and whole.usage.prompt_tokens < 20  # no template around it (a chat turn adds ~20 tokens)
    streamed = "".join(c.choices[0].text for c in api.completions.create(
        model="m", prompt=prompt, temperature=0, max_tokens=8, stream=True) if c.choices)  # fmt: skip
    assert streamed == text
    first_word = text.split()[0]
    stopped = api.completions.create(model="m", prompt=prompt, temperature=0, max_tokens=8, stop=[first_word])
    assert stopped.choices[0].text == text[: text.index(first_word)] and stopped.choices[0].finish_reason == "stop"


@pytest.mark.real_model
def test_logprobs_give_each_tokens_probability_and_the_likeliest_others(served):
    """``logprobs`` was ignored."""
    server, _worker, _info = served
    with client(server) as api:
        reply = api.chat.completions.create(model="m", temperature=0, max_tokens=12, logprobs=True, top_logprobs=3,
                                            messages=[{"role": "user", "content": "Name three fruits."}])  # fmt: skip
    choice = reply.choices[0]
    entries = choice.logprobs.content
    assert 0 < len(entries) <= reply.usage.completion_tokens
    assert (
        b"".join(bytes(e.bytes) for e in entries).decode("utf-8", errors="replace").strip()
        == choice.message.content.strip()
    )
    for entry in entries:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        tops = [t.logprob for t in entry.top_logprobs]
        assert tops == sorted(tops, reverse=True) and entry.logprob <= tops[0] + 1e-6


def _post_and_leave(port: int, path: str, body: dict[str, Any]):
    """A client that sends a request on a raw socket and can leave before the answer (``close``)."""
    import socket

    raw = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(f"POST /v1/{path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(raw)}\r\n\r\n".encode() + raw)  # fmt: skip
    return sock


@pytest.mark.real_model
def test_a_client_that_leaves_a_non_streamed_request_cancels_it_while_tokens_keep_coming(smollm2_path):
    """The disconnect was looked for only after 0.25 s without a token: 4,000 tokens (65 s of CPU) were written
    for nobody, and eight such requests held the queue the user's chats wait in."""
    import queue

    from fara_desktop.engine.types import Cancelled, Failed, TokenText

    events: queue.Queue[object] = queue.Queue()
    worker = InferenceWorker(events.put).start()
    worker.load_model(smollm2_path, PARAMS)
    while not isinstance(loaded := events.get(timeout=60), (ModelLoaded, ModelLoadFailed)):
        pass
    assert isinstance(loaded, ModelLoaded)

    class Watched:
        """The worker, with the API's events for its requests also seen by the test."""

        def generate(self, messages: Any, sampling: Any, conversation: Any, thinking: bool, on_event: Any,
                     **kwargs: Any) -> int:  # fmt: skip
            def both(event: object) -> None:
                events.put(event)
                on_event(event)

            return worker.generate(messages, sampling, conversation, thinking, both, **kwargs)

        def cancel_request(self, request_id: int) -> None:
            worker.cancel_request(request_id)

    server = ApiServer(LocalApi(Watched(), lambda: loaded.info, lambda: SamplingParams(temperature=0.0)))
    server.start()
    try:
        sock = _post_and_leave(server.port, "chat/completions", {
            "model": "any", "max_tokens": 4000,
            "messages": [{"role": "user", "content": "Count from 1 to 2000, one number per line."}]})  # fmt: skip
        while not isinstance(events.get(timeout=60), TokenText):
            pass
        sock.close()  # the client leaves while the tokens stream in
        while not isinstance(final := events.get(timeout=120), (Finished, Cancelled, Failed)):
            pass
        assert isinstance(final, Cancelled), final
    finally:
        server.stop()
        assert worker.shutdown(timeout=30)


def _slow_embedder(tmp_path):
    """An embedder of all-MiniLM-L6-v2's shape (random weights): real speed, ~25 passages a second here."""
    from fara_desktop.engine.embedder import Embedder
    from tests.helpers.gguf_factory import write_bert_embedder

    path = write_bert_embedder(tmp_path / "minilm-shape.gguf", n_embd=384, n_layer=6, n_head=12, n_ff=1536)
    return Embedder(path, threads=1)


LONG_TEXTS = ["the pump valve pressure water dry store chapter manual log server " * 7] * 256


@pytest.fixture
def embedding_server(tmp_path):
    """The local API with an embedder of real speed; a long request to it is sent from a raw socket."""
    from tests.helpers.scripted_queue import ScriptedQueue

    embedder = _slow_embedder(tmp_path)
    info = ModelInfo(tmp_path / "chat.gguf", "Chat", "llama", 2048, 2048, 2, 2, "f16", False, "gguf", 0.1, 1)
    server = ApiServer(LocalApi(ScriptedQueue(), lambda: info, embedder=lambda: embedder))
    server.start()
    sock = _post_and_leave(server.port, "embeddings", {"model": "any", "input": LONG_TEXTS})
    wait_until(lambda: embedder.passages_embedded > 0, 60, "the first passage")
    yield server, embedder, sock
    server.stop()
    sock.close()
    embedder.close()


def test_an_embeddings_request_whose_client_leaves_stops_and_the_next_one_is_answered(embedding_server):
    """256 long texts went on being embedded for minutes after the client had gone."""
    server, embedder, sock = embedding_server
    sock.close()
    with client(server) as api:  # waits behind the first request's passages, or what is left of them
        assert len(api.embeddings.create(model="any", input="the pump").data) == 1
    assert embedder.passages_embedded < len(LONG_TEXTS)


def test_stopping_the_server_ends_an_embeddings_request_under_way(embedding_server):
    """SIGTERM waited 67 s for a request's embeddings (``fara-desktop serve`` stops through ``ApiServer.stop``)."""
    server, embedder, _sock = embedding_server
    server.stop(timeout=60)
    assert embedder.passages_embedded < len(LONG_TEXTS)


def test_an_embeddings_request_over_the_total_budget_is_refused(tmp_path):
    from tests.helpers.scripted_queue import ScriptedQueue

    info = ModelInfo(tmp_path / "chat.gguf", "Chat", "llama", 2048, 2048, 2, 2, "f16", False, "gguf", 0.1, 1)
    server = ApiServer(LocalApi(ScriptedQueue(), lambda: info))
    server.start()
    try:
        with client(server) as api, pytest.raises(openai.BadRequestError, match="several requests"):
            api.embeddings.create(model="any", input=["x" * 30_000] * 256)
    finally:
        server.stop()
