"""Whole, bounded lines from an MCP server's stdout, for the ``mcp`` SDK's stdio reader.

Measured: the SDK (2.x) joins its line buffer with every 64 KiB chunk (``(buffer + chunk).split("\\n")``), so a
50 MB result took 57 s and 566 MB to read — a server could stall every call and fill memory. This stream stands in
for the ``TextReceiveStream`` that reader wraps the pipe in and hands it whole lines only (its buffer stays empty;
reading is linear). A line longer than ``MAX_MESSAGE_CHARS`` is not kept: it is replaced by a JSON-RPC error for
the same request id, so the call ends at once with a clear message and the server stays usable.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncIterator
from typing import Any

MAX_MESSAGE_CHARS = 8 * 1024 * 1024
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
                if line is not None:
                    yield line + "\n"
        self._add(self._decoder.decode(b"", final=True))
        if self._size:
            line = self._take()
            if line is not None:
                yield line

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
        message = (f"The server sent {size:,} characters in one message, more than the {MAX_MESSAGE_CHARS:,} this "
                   "app reads; it was dropped.")  # fmt: skip
        error = {"code": OVERSIZE_CODE, "message": message}
        return json.dumps({"jsonrpc": "2.0", "id": json.loads(found[1]), "error": error})


def bound_the_sdks_stdio_reader() -> None:
    """Make the SDK's stdio client read through ``BoundedLines`` (once; the hub calls it before any server)."""
    import mcp.client.stdio as stdio

    stdio.TextReceiveStream = BoundedLines  # type: ignore[attr-defined,assignment]
