"""The local API with the real model, spoken to by the official ``openai`` client: streaming and not, a client that
disconnects, two clients at once beside a GUI chat (every reply complete and none interleaved), and the API key
that listening beyond this computer requires."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest

from fara_desktop.engine.types import ChatMessage, Finished, ModelLoaded, ModelLoadFailed, SamplingParams
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.serving.local_api import ApiKeyRequired, ApiServer, LocalApi
from fara_desktop.serving.openai_format import model_id

PARAMS = LoadParams(n_ctx=2048, prefault=False)


@pytest.fixture(scope="module")
def served(smollm2_path):
    events = []
    loaded = threading.Event()

    def sink(event):
        events.append(event)
        if isinstance(event, (ModelLoaded, ModelLoadFailed)):
            loaded.set()

    worker = InferenceWorker(sink).start()
    worker.load_model(smollm2_path, PARAMS)
    assert loaded.wait(60) and isinstance(events[-1], ModelLoaded)
    info = events[-1].info
    server = ApiServer(LocalApi(worker, lambda: info, lambda: SamplingParams(temperature=0.0)))
    server.start()
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
    with pytest.raises(openai.BadRequestError, match="only text content"):
        client(server).chat.completions.create(
            model=info.name, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
        )
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
    guarded = ApiServer(LocalApi(worker, lambda: info, api_key="s3cret"))
    guarded.start()
    try:
        with pytest.raises(openai.AuthenticationError):
            client(guarded, "wrong").models.list()
        assert client(guarded, "s3cret").models.list().data[0].id == model_id(info)
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

        worker.generate(messages, SamplingParams(temperature=0.0, max_tokens=8), on_event=sink)
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
