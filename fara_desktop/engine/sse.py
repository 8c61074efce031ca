"""Server-sent events as OpenAI-compatible servers stream them: ``data: {json}`` lines, events separated by a blank
line, ``data: [DONE]`` at the end.

A stranger's server may send anything: a line longer than ``max_line`` bytes, or an event whose data lines add up
to more than ``max_event`` (``data:`` lines with no blank line between them), is refused (``SSELineTooLong``)
instead of growing a buffer without end; lines that are not SSE fields are counted, not fatal.
"""

from __future__ import annotations

from fara_desktop.vocabulary.errors import FaraError

MAX_LINE_BYTES = 1024 * 1024
MAX_EVENT_BYTES = 1024 * 1024  # the data lines of one event together (a server may never send the blank line)


class SSELineTooLong(FaraError):
    """One line of the stream is longer than any reply chunk could be."""


class SSEDecoder:
    """Bytes in, the ``data`` payload of each complete event out."""

    def __init__(self, max_line: int = MAX_LINE_BYTES, max_event: int = MAX_EVENT_BYTES) -> None:
        self._max_line = max_line
        self._max_event = max_event
        self._buffer = bytearray()
        self._data: list[str] = []
        self._data_size = 0
        self.malformed_lines = 0

    def feed(self, chunk: bytes) -> list[str]:
        self._buffer += chunk
        events: list[str] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > self._max_line:
                    raise SSELineTooLong(f"The server sent a line of more than {self._max_line // 1024} KiB.")
                return events
            line = bytes(self._buffer[:end]).rstrip(b"\r")
            del self._buffer[: end + 1]
            self._line(line.decode("utf-8", errors="replace"), events)

    def finish(self) -> list[str]:
        events: list[str] = []
        if self._buffer:
            self._line(bytes(self._buffer).decode("utf-8", errors="replace"), events)
            self._buffer.clear()
        self._line("", events)
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if not line:  # end of an event
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
                self._data_size = 0
            return
        if line.startswith(":"):
            return  # a comment (keep-alive)
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
            self._data_size += len(value) + 1
            if self._data_size > self._max_event:
                raise SSELineTooLong(f"The server sent an event of more than {self._max_event // 1024} KiB.")
        elif field not in ("event", "id", "retry"):
            self.malformed_lines += 1
