"""Everything an MCP server says besides its results, bounded: its stderr, its log notifications and the bodies of
its HTTP answers. A server is a stranger's program; what it writes must not grow the app's memory, burn its CPU or
wipe its log.

Measured before: stderr without newlines grew the app with it (1.5 GB in 17 s); a stderr line flood cost 39 s of
CPU in 63 s and rotated the app's own log away; a streamable-HTTP result of 400 MB was read whole (peak 1.3 GB).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, TextIO

from fara_desktop.text.untrusted import one_line
from fara_desktop.tools.bounded_lines import MAX_MESSAGE_CHARS

log = logging.getLogger(__name__)

MAX_LOGGED_LINE = 500  # characters of one line of a server's stderr or log message that reach the app's log
LINES_PER_MINUTE = 600  # of one server's output in the log; the rest are counted, and the count is logged
_READ = 64 * 1024


class LogBudget:
    """At most ``per_minute`` lines of one server in the log (a burst of them at once, then as the minute goes by);
    lines over it are counted and said in one line when the budget allows again."""

    def __init__(self, server: str, per_minute: int = LINES_PER_MINUTE) -> None:
        self.server = one_line(server, 64)
        self._per_minute = per_minute
        self._tokens = float(per_minute)
        self._stamp = time.monotonic()
        self._skipped = 0
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        if self._take(1):
            log.info("MCP server %s: %s", self.server, one_line(text, MAX_LOGGED_LINE))

    def skip(self, count: int) -> None:
        """``count`` lines arrived while the budget was spent (not even looked at)."""
        with self._lock:
            announce = self._skipped == 0
            self._skipped += count
        if announce:
            self._announce()

    def spent(self) -> bool:
        with self._lock:
            self._refill()
            return self._tokens < 1

    def _take(self, count: int) -> bool:
        with self._lock:
            self._refill()
            allowed = self._tokens >= count
            announce = not allowed and self._skipped == 0
            skipped = 0
            if allowed:
                self._tokens -= count
                skipped, self._skipped = self._skipped, 0
            else:
                self._skipped += count
        if announce:
            self._announce()
        if skipped:
            log.info("MCP server %s: %s more lines were not logged", self.server, f"{skipped:,}")
        return allowed

    def _announce(self) -> None:
        log.info(
            "MCP server %s writes more than %s lines a minute; the rest are counted, not logged",
            self.server,
            f"{self._per_minute:,}",
        )

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(float(self._per_minute), self._tokens + (now - self._stamp) * self._per_minute / 60)
        self._stamp = now


class StderrToLog:
    """A pipe whose write end is a server's stderr; a thread logs what arrives, line by line, within a
    ``LogBudget``: each line is cut to ``MAX_LOGGED_LINE`` as it is read (a line that never ends costs nothing),
    and lines over the budget are only counted."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")
        self.budget = LogBudget(server)
        self._reader = threading.Thread(target=self._log, args=(read_fd,), name="fara-mcp-stderr", daemon=True)
        self._reader.start()

    def _log(self, read_fd: int) -> None:
        line = bytearray()  # the start of the line being read, at most MAX_LOGGED_LINE * 4 bytes
        keep = MAX_LOGGED_LINE * 4
        try:
            while chunk := os.read(read_fd, _READ):
                ends = chunk.count(b"\n")
                if ends > 1 and self.budget.spent():
                    self.budget.skip(ends)  # a flood: counted in C, not split, decoded or formatted
                    line = bytearray(chunk[chunk.rfind(b"\n") + 1 :][:keep])
                    continue
                pieces = chunk.split(b"\n")
                for piece in pieces[:-1]:
                    line += piece[: max(0, keep - len(line))]
                    self.budget.line(line.decode("utf-8", "replace"))
                    line = bytearray()
                line += pieces[-1][: max(0, keep - len(line))]
            if line:
                self.budget.line(line.decode("utf-8", "replace"))
        finally:
            os.close(read_fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()


def server_log_callback(budget: LogBudget) -> Any:
    """The SDK's ``logging_callback``: a server's log notifications go to the app's log within ``budget``."""

    async def logged(params: Any) -> None:
        budget.line(f"[{getattr(params, 'level', 'info')}] {getattr(params, 'data', '')}")

    return logged


def bounded_http_client() -> Any:
    """The SDK's HTTP client with its default timeouts, whose answers other than event streams are cut off past
    ``MAX_MESSAGE_CHARS`` bytes: the call then ends with an error that says so (the SDK reports a body it could
    not read as an error of that request). Event streams are bounded per event by the SDK itself."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    class ResponseTooLargeError(httpx2.StreamError):
        """A server's answer longer than the app reads."""

    class BoundedBody(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > MAX_MESSAGE_CHARS:
                    raise ResponseTooLargeError(
                        f"the answer is longer than the {MAX_MESSAGE_CHARS // (1024 * 1024)} MiB this app reads; it "
                        "was dropped"
                    )
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class BoundedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                response.stream = BoundedBody(response.stream)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(timeout=timeout, transport=BoundedTransport())
