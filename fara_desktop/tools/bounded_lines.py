"""Whole, bounded lines from an MCP server's stdout, for the ``mcp`` SDK's stdio reader.

Measured: the SDK (2.x) joins its line buffer with every 64 KiB chunk (``(buffer + chunk).split("\\n")``), so a
50 MB result took 57 s and 566 MB to read — a server could stall every call and fill memory. This stream stands in
for the ``TextReceiveStream`` that reader wraps the pipe in and hands it whole lines only (its buffer stays empty;
reading is linear). A line longer than ``MAX_MESSAGE_CHARS`` is not kept: it is replaced by a JSON-RPC error for
the same request id, so the call ends at once with a clear message and the server stays usable.

Messages a server sends unasked (notifications, its own requests) are budgeted: 400,000 of them took the SDK 40 s
to validate, and a call's answer waited behind them. Past ``UNASKED_BURST`` (then ``UNASKED_PER_SECOND``) they
are dropped here, counted, and the count logged; answers to the app's requests always pass.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 8 * 1024 * 1024
UNASKED_BURST = 1000
UNASKED_PER_SECOND = 50.0
OVERSIZE_CODE = -32099  # in JSON-RPC's range for implementation errors: a message dropped for its size
_REQUEST_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


class BoundedLines:
    """Replaces ``anyio.streams.text.TextReceiveStream`` in the SDK's stdio client (same constructor)."""

    def __init__(self, transport_stream: Any, encoding: str = "utf-8", errors: str = "strict") -> None:
        self._stream = transport_stream
        self._decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
        self._parts: list[str] = []
        self._size = 0
        self._head = ""  # the start of an oversized line: where its request id is
        self._unasked_tokens = float(UNASKED_BURST)
        self._unasked_stamp = time.monotonic()
        self._dropped = 0

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for data in self._stream:
            text = self._decoder.decode(data)
            while text:
                end = text.find("\n")
                if end < 0:
                    self._add(text)
                    break
                self._add(text[:end])
                text = text[end + 1 :]
                line = self._take()
                if line is not None and self._within_budget(line):
                    yield line + "\n"
        self._add(self._decoder.decode(b"", final=True))
        if self._size:
            line = self._take()
            if line is not None:
                yield line

    def _within_budget(self, line: str) -> bool:
        """False for a message the server sent unasked once its budget is spent (an answer always passes)."""
        if '"method"' not in line:
            return True  # an answer (its "result" or "error"): not even parsed
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return True  # the SDK reports what it cannot read
        if not isinstance(message, dict) or "method" not in message:
            return True
        now = time.monotonic()
        self._unasked_tokens = min(
            float(UNASKED_BURST), self._unasked_tokens + (now - self._unasked_stamp) * UNASKED_PER_SECOND
        )
        self._unasked_stamp = now
        if self._unasked_tokens >= 1:
            self._unasked_tokens -= 1
            if self._dropped:
                log.info(
                    "An MCP server sent %s messages unasked faster than they are read; they were dropped",
                    f"{self._dropped:,}",
                )
                self._dropped = 0
            return True
        if not self._dropped:
            log.info(
                "An MCP server sends messages unasked faster than %s a second; they are dropped",
                f"{UNASKED_PER_SECOND:g}",
            )
        self._dropped += 1
        return False

    def _add(self, piece: str) -> None:
        if not piece:
            return
        if self._size + len(piece) <= MAX_MESSAGE_CHARS:
            self._parts.append(piece)
        elif not self._head:
            self._head = ("".join(self._parts) + piece)[:1024]
            self._parts = []
        self._size += len(piece)

    def _take(self) -> str | None:
        size, head, line = self._size, self._head, "".join(self._parts)
        self._parts, self._size, self._head = [], 0, ""
        if not head:
            return line
        found = _REQUEST_ID.search(head)
        if found is None:
            return None  # a notification too large to read: dropped
        message = (
            f"The server sent {size:,} characters in one message, more than the {MAX_MESSAGE_CHARS:,} this "
            "app reads; it was dropped."
        )
        error = {"code": OVERSIZE_CODE, "message": message}
        return json.dumps({"jsonrpc": "2.0", "id": json.loads(found[1]), "error": error})


def bound_the_sdks_stdio_reader() -> None:
    """Make the SDK's stdio client read through ``BoundedLines`` (once; the hub calls it before any server)."""
    import mcp.client.stdio as stdio

    stdio.TextReceiveStream = BoundedLines  # type: ignore[attr-defined,assignment]
