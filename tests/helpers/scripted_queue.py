"""A stand-in for the inference worker's queue, for local API tests that need no model."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fara_desktop.engine.types import Event, Finished, TokenText
from fara_desktop.vocabulary.sampling import SamplingParams


class ScriptedQueue:
    """Answers every request with "Hi" at once; ``hold`` keeps requests waiting instead."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.hold = threading.Event()
        self.cancelled: list[int] = []
        self.tools: list[Any] = []  # the tools offered with each request
        self.conversations: list[Any] = []  # each request's conversation (an API client: its principal)

    def generate(self, messages: Any, sampling: SamplingParams | None = None, conversation: int | None = None,
                 thinking: bool = True, on_event: Callable[[Event], None] | None = None,
                 raw: bool = False, tools: Any = None) -> int:  # fmt: skip
        self.requests.append(messages)
        self.tools.append(tools)
        self.conversations.append(conversation)
        request_id = len(self.requests)
        assert on_event is not None

        def answer() -> None:
            if self.hold.is_set():
                return
            on_event(TokenText(request_id, "Hi"))
            on_event(Finished(request_id, "Hi", None, "stop"))  # type: ignore[arg-type]

        threading.Thread(target=answer, daemon=True).start()
        return request_id

    def cancel_request(self, request_id: int) -> None:
        self.cancelled.append(request_id)
