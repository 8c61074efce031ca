"""The window's first token while API clients stream (issue 63): the engine as the app runs it — an
``InferenceWorker`` over a model loaded with four sequences — answers a question of the window's chat while idle,
and while three local API requests decode together; the time from Enter to the first piece of text, rounds
interleaved, medians. The window's reply is read in the model's own context, the clients' sequences stepping
between its tokens."""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fara_desktop.bench.stream_client import prompt_text
from fara_desktop.engine.types import Cancelled, Event, Failed, Finished, ModelLoaded, ModelLoadFailed, TokenText
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

CLIENTS = 3
WAIT_S = 1800.0


class _Replies:
    """What the engine said of each request: when its first text came, and whether it ended."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.first: dict[int, float] = {}
        self.ended: set[int] = set()
        self.loaded: Event | None = None

    def __call__(self, event: Event) -> None:
        with self.lock:
            request = getattr(event, "request_id", None)
            if isinstance(event, TokenText) and isinstance(request, int):
                self.first.setdefault(request, time.monotonic())
            if isinstance(event, (Finished, Cancelled, Failed)):
                self.ended.add(event.request_id)
            if isinstance(event, (ModelLoaded, ModelLoadFailed)):
                self.loaded = event
            self.lock.notify_all()

    def wait(self, done: Any) -> None:
        with self.lock:
            if not self.lock.wait_for(done, WAIT_S):
                raise TimeoutError("the engine did not answer")


def _window_first_token(worker: InferenceWorker, replies: _Replies, seed: int, tokens: int) -> float:
    sampling = SamplingParams(temperature=0.0, max_tokens=tokens)
    asked = time.monotonic()
    request = worker.generate([ChatMessage("user", prompt_text(1000 + seed, 80))], sampling)
    replies.wait(lambda: request in replies.ended)
    return replies.first.get(request, time.monotonic()) - asked


def window_beside_clients(model: Path, params: LoadParams, rounds: int = 3, tokens: int = 16) -> dict[str, Any]:
    """The figures (see the module): the window's first token idle and beside three clients, and their ratio."""
    replies = _Replies()
    worker = InferenceWorker(replies).start()
    try:
        worker.load_model(model, replace(params, parallel=CLIENTS + 1, prefault=False))
        replies.wait(lambda: replies.loaded is not None)
        if not isinstance(replies.loaded, ModelLoaded):
            raise RuntimeError(f"the model did not load: {replies.loaded}")
        idle: list[float] = []
        busy: list[float] = []
        client = SamplingParams(temperature=0.0, max_tokens=100_000, ignore_eos=True)
        for round_ in range(rounds):
            idle.append(_window_first_token(worker, replies, 2 * round_, tokens))
            clients = [
                worker.generate([ChatMessage("user", prompt_text(i + 10 * round_, 80))], client, on_event=replies)
                for i in range(CLIENTS)
            ]
            replies.wait(lambda clients=clients: all(c in replies.first for c in clients))  # all three stream
            busy.append(_window_first_token(worker, replies, 2 * round_ + 1, tokens))
            for request in clients:
                worker.cancel_request(request)
            replies.wait(lambda clients=clients: all(c in replies.ended for c in clients))
    finally:
        worker.shutdown(timeout=60)
    return {
        "window_first_token_idle_s": round(statistics.median(idle), 3),
        "window_first_token_beside_3_clients_s": round(statistics.median(busy), 3),
        "window_first_token_beside_3_over_idle": round(
            statistics.median(b / i for b, i in zip(busy, idle, strict=True)), 3
        ),
    }
