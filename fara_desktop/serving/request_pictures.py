"""The pictures of local API requests: taken in only once a request is admitted, at most ``PICTURE_DECODERS``
decoded at a time for all clients (each sandbox child can take hundreds of MiB on a big picture), their decoding
stopped when the client leaves or the server stops, and released when the request ends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol

from fara_desktop.engine.errors import cannot_see
from fara_desktop.engine.types import ModelInfo
from fara_desktop.serving.openai_format import ChatRequest
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.pictures import AttachedPicture

PICTURE_DECODERS = 2


class KeepsApiPictures(Protocol):
    """What the API needs to take a request's pictures (``app.picture_intake.ApiPictureFiles``): decoded in the
    sandbox (``should_stop`` asked between and during them) and kept while the request runs."""

    def take(
        self, data: Sequence[bytes], should_stop: Callable[[], bool] | None = None
    ) -> tuple[AttachedPicture, ...]: ...
    def release(self, pictures: Sequence[AttachedPicture]) -> None: ...


class ServerStopping(FaraError):
    """The server stopped while the request's pictures were waiting to be decoded: it is answered 503."""


class ApiPictureIntake:
    """Takes admitted requests' pictures in through ``taker`` (None: pictures are refused), a few at a time."""

    def __init__(self, taker: KeepsApiPictures | None) -> None:
        self.taker = taker
        self._decoders = ThreadPoolExecutor(PICTURE_DECODERS, thread_name_prefix="fara-api-pictures")
        self._stops: set[threading.Event] = set()  # one per request whose pictures are being decoded
        self._stopped = False

    def refusal(self, info: ModelInfo) -> str | None:
        """Why this model cannot take a request's pictures (None: it can)."""
        if info.server is not None:
            return "Pictures are read by a model on this computer; the chat uses a server's model."
        if not info.vision:
            return cannot_see(info.name, info.vision_problem)
        if self.taker is None:
            return "This server takes no pictures."
        return None

    async def take(
        self, chat: ChatRequest, info: ModelInfo, until_gone: Callable[[Callable[[], None]], Coroutine[Any, Any, None]]
    ) -> tuple[ChatRequest, tuple[AttachedPicture, ...]]:
        """The request's pictures decoded in the sandbox (off the event loop) and put in their messages;
        ``until_gone(then)`` calls ``then`` when the client leaves, which stops the decoding. ``FaraError`` says why
        they cannot be taken."""
        why = self.refusal(info)
        taker = self.taker
        if why is not None or taker is None:
            raise FaraError(why or "This server takes no pictures.")
        if self._stopped:  # the decoders are gone: a request that came in as the server stopped
            raise ServerStopping("The server is stopping.")
        flat = [data for message in chat.pictures for data in message]
        stop = threading.Event()
        self._stops.add(stop)
        watcher = asyncio.create_task(until_gone(stop.set))
        decoding: Future[tuple[AttachedPicture, ...]] | None = None
        try:
            decoding = self._decoders.submit(taker.take, flat, stop.is_set)
            taken = await asyncio.wrap_future(decoding)
        except FaraError as exc:
            if self._stopped:
                raise ServerStopping("The server is stopping.") from exc
            raise FaraError(f"A picture could not be read: it {exc}.") from exc
        except (asyncio.CancelledError, RuntimeError):
            # the pool was shut down under it (cancelled) or just before it (RuntimeError: "cannot schedule new
            # futures after shutdown"), not this request cancelled
            if decoding is not None:  # the request is gone; what the decoding still takes is given back
                decoding.add_done_callback(self._release_unclaimed)
            if self._stopped:
                raise ServerStopping("The server is stopping.") from None
            raise
        finally:
            watcher.cancel()
            self._stops.discard(stop)
        given = iter(taken)
        messages = tuple(
            replace(m, pictures=tuple(next(given) for _ in data)) if data else m
            for m, data in zip(chat.messages, chat.pictures, strict=True)
        )
        return replace(chat, messages=messages, pictures=()), taken

    def _release_unclaimed(self, decoding: Future[tuple[AttachedPicture, ...]]) -> None:
        """A decoding that ended after its request was gone (cancelled as the sandbox finished): its pictures are
        released, or their files and counts would stay until the process ends."""
        if not decoding.cancelled() and decoding.exception() is None:
            self.release(decoding.result())

    def release(self, taken: Sequence[AttachedPicture]) -> None:
        if taken and self.taker is not None:
            self.taker.release(taken)

    def stop(self) -> None:
        """The server is stopping: every decoding ends now, and the decoders' threads with them (any thread)."""
        self._stopped = True
        for stop in list(self._stops):
            stop.set()
        self._decoders.shutdown(wait=False, cancel_futures=True)
