"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for each request's headers.

uvicorn closes a connection that stays idle between requests (``timeout_keep_alive``), but not one that sends a
request's headers a byte at a time ("slowloris"): 500 such connections stayed open for a minute, each holding a
file descriptor, before any key was checked. Here a connection whose next request has not finished its headers
within ``HEADER_TIMEOUT_S`` of the connection (or of the previous response) is closed. The rest is uvicorn's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


class HeaderDeadlineProtocol(H11Protocol):
    """``H11Protocol`` that closes connections whose request headers do not arrive in time."""

    header_timeout_s = HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._awaited: object = None  # the request cycle in place when the deadline was armed

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._deadline is not None and self.cycle is not self._awaited:  # a request's headers are complete
            self._deadline.cancel()
            self._deadline = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next request on this connection gets the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._awaited = self.cycle
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self.cycle is self._awaited and not self.transport.is_closing():
            self.transport.close()
