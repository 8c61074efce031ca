"""The local API's pictures are bounded and stoppable (issue 51 item 6, issue 52 item 3): a request counts against
the admission limit from its arrival (before, any number of picture requests decoded at once and none got 429), a
request carries at most 16 pictures, at most two requests' pictures decode at a time, and their decoding stops when
the client leaves or the server stops. A real uvicorn server on 127.0.0.1, a scripted model queue and a stand-in
for the sandbox's decoding that waits for the test."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.serving.request_pictures import PICTURE_DECODERS
from fara_desktop.system.sandbox import SandboxStoppedError
from fara_desktop.vocabulary.pictures import AttachedPicture
from tests.helpers.scripted_queue import ScriptedQueue
from tests.unit.serving.test_admission import LOCAL

SEEING = replace(LOCAL, vision="mmproj-tiny.gguf", picture_tokens=16)
PIXEL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n stand-in").decode()


class HeldPictures:
    """Stands in for ``ApiPictureFiles``: each take waits until the test lets it go, or until it is told to stop."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.go = threading.Event()
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.running = self.most = 0

    def take(self, data: Sequence[bytes], should_stop: Callable[[], bool] | None = None) -> tuple[AttachedPicture, ...]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.started.release()
        try:
            while not self.go.wait(0.02):  # the sandbox's watchdog asks as often
                if should_stop is not None and should_stop():
                    self.stopped.set()
                    raise SandboxStoppedError("stopped")
            return tuple(AttachedPicture("a" * 64, Path("/nowhere/a.png")) for _ in data)
        finally:
            with self.lock:
                self.running -= 1

    def release(self, pictures: Sequence[AttachedPicture]) -> None:
        return None


def picture_request(count: int = 1, messages: int = 1) -> dict[str, object]:
    parts = [{"type": "image_url", "image_url": {"url": PIXEL}} for _ in range(count)]
    turn = {"role": "user", "content": [*parts, {"type": "text", "text": "What is it?"}]}
    return {"messages": [turn] * messages}


def post(server: ApiServer, body: object, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{server.address}/chat/completions", content=json.dumps(body).encode(), timeout=timeout,
                      headers={"content-type": "application/json"})  # fmt: skip


@pytest.fixture
def server():
    pictures = HeldPictures()
    started = ApiServer(LocalApi(ScriptedQueue(), lambda: SEEING, max_pending=2, pictures=pictures))
    started.start()
    yield started, pictures
    pictures.go.set()
    started.stop()


def test_picture_requests_count_from_their_arrival_and_decode_two_at_a_time(server):
    api, pictures = server
    answers: list[int] = []
    clients = [threading.Thread(target=lambda: answers.append(post(api, picture_request()).status_code))
               for _ in range(5)]  # fmt: skip
    for client in clients:
        client.start()
    assert pictures.started.acquire(timeout=10) and pictures.started.acquire(timeout=10)
    assert not pictures.started.acquire(timeout=0.5), "a third request's pictures were decoded beyond the limit"
    pictures.go.set()
    for client in clients:
        client.join(30)
    assert sorted(answers) == [200, 200, 429, 429, 429] and pictures.most <= PICTURE_DECODERS == 2


def test_a_request_carries_at_most_sixteen_pictures(server):
    api, pictures = server
    refused = post(api, picture_request(count=6, messages=3))  # 6 a message is allowed; 18 a request are not
    assert refused.status_code == 400 and "at most 16 pictures a request" in refused.json()["error"]["message"]
    assert pictures.most == 0


def test_the_decoding_stops_when_the_client_leaves(server):
    api, pictures = server

    def give_up() -> None:
        with pytest.raises(httpx.ReadTimeout):
            post(api, picture_request(), timeout=1.0)

    leaving = threading.Thread(target=give_up)
    leaving.start()
    assert pictures.started.acquire(timeout=10)
    leaving.join(30)  # the client gave up and closed its connection
    assert pictures.stopped.wait(10), "the pictures of a client that left were still being decoded"


def test_the_decoding_stops_when_the_server_stops(server):
    api, pictures = server
    threading.Thread(target=lambda: httpx.post(f"{api.address}/chat/completions", json=picture_request(),
                                               timeout=30), daemon=True).start()  # fmt: skip
    assert pictures.started.acquire(timeout=10)
    api.stop()
    assert pictures.stopped.wait(5), "stopping the server left a request's pictures decoding"


def test_pictures_taken_as_the_client_left_are_released():
    """Issue 61, suspected: ``ApiPictureIntake`` counters leaked on cancellation. Confirmed: a request cancelled
    while the sandbox finished its pictures (the client left at that moment) never released them — the files and
    their counts stayed until the process ended. What the decoding took after its request was gone is released."""
    import asyncio
    import contextlib

    from fara_desktop.serving.openai_format import ChatRequest
    from fara_desktop.serving.request_pictures import ApiPictureIntake
    from fara_desktop.vocabulary.messages import ChatMessage
    from fara_desktop.vocabulary.sampling import SamplingParams

    class FinishesAnyway:
        def __init__(self) -> None:
            self.entered, self.go, self.released = threading.Event(), threading.Event(), threading.Event()
            self.taken: list[AttachedPicture] = []
            self.given_back: list[AttachedPicture] = []

        def take(
            self, data: Sequence[bytes], should_stop: Callable[[], bool] | None = None
        ) -> tuple[AttachedPicture, ...]:
            self.entered.set()
            self.go.wait(30)  # the sandbox's last picture, decoded as the client leaves
            self.taken = [AttachedPicture(f"{n:064x}", Path(f"/nowhere/{n}.png")) for n in range(len(data))]
            return tuple(self.taken)

        def release(self, pictures: Sequence[AttachedPicture]) -> None:
            self.given_back.extend(pictures)
            self.released.set()

    taker = FinishesAnyway()
    pictures = ApiPictureIntake(taker)
    asked = (ChatMessage("user", "what is this"),)
    chat = ChatRequest(asked, SamplingParams(), False, False, pictures=((b"png", b"png"),))

    async def client_leaves() -> None:
        async def never_gone(_then: Callable[[], None]) -> None:
            await asyncio.Event().wait()

        request = asyncio.create_task(pictures.take(chat, SEEING, never_gone))
        await asyncio.to_thread(taker.entered.wait, 30)
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request
        taker.go.set()

    asyncio.run(client_leaves())
    assert taker.released.wait(30), "the pictures taken for a request that was gone were never released"
    assert taker.given_back == taker.taken and len(taker.taken) == 2
    pictures.stop()


def test_a_signal_that_interrupts_the_intake_inside_its_own_lock_still_ends_every_request(server):
    """``serve`` hung one run in three under a flood of pictures: SIGTERM was handled on the thread that was inside
    the decoders' ``submit``, holding their pool's lock, and the handler waited for that lock for ever. The signal's
    handler takes no lock now: it hands the ending of the requests to the server's event loop, which ends them once
    the interrupted code goes on."""
    import signal

    api, pictures = server
    threading.Thread(target=lambda: httpx.post(f"{api.address}/chat/completions", json=picture_request(),
                                               timeout=30), daemon=True).start()  # fmt: skip
    assert pictures.started.acquire(timeout=10)
    handler = threading.Thread(target=api._server.handle_exit, args=(signal.SIGTERM, None), daemon=True)
    with api.api._pictures_in._decoders._shutdown_lock:  # as the code the signal interrupted holds it
        handler.start()
        handler.join(5)
        assert not handler.is_alive(), "the signal's handler waited for a lock the code it interrupted holds"
    assert pictures.stopped.wait(5), "the signal left a request's pictures decoding"


def test_a_request_that_arrives_once_the_server_is_stopping_is_refused_not_started(server):
    """``serve --parallel 4`` with eight clients hung on SIGTERM one run in four: a request whose handler ran after
    every request under way had been ended was started anyway, wrote its 2,000 tokens, and uvicorn waited for it."""
    api, _pictures = server
    queue = api.api.queue
    api.api.stop_everything()
    refused = post(api, {"messages": [{"role": "user", "content": "Hi"}]})
    assert refused.status_code == 503 and "stopping" in refused.json()["error"]["message"]
    assert queue.requests == []
