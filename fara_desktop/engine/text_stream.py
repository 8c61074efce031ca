"""Incremental detokenization: bytes of token pieces in, complete text out, stop strings held back.

llama-cpp-python's streaming API re-detokenizes the whole reply on every token (quadratic); this keeps the
per-token cost constant: an incremental UTF-8 decoder for pieces that split a multibyte character, and a
hold-back window only as long as the longest stop string.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence


class TextStream:
    """Accumulates a reply; ``feed`` returns the text that is safe to show now."""

    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = tuple(s for s in stop if s)
        self._pending = ""  # decoded but not yet released (might start a stop string)
        self._released: list[str] = []
        self.stopped = False

    def feed(self, piece: bytes) -> str:
        if self.stopped:
            return ""
        self._pending += self._decoder.decode(piece)
        if not self._stop:
            out, self._pending = self._pending, ""
            self._released.append(out)
            return out
        for stop in self._stop:
            index = self._pending.find(stop)
            if index >= 0:
                self.stopped = True
                out = self._pending[:index]
                self._pending = ""
                self._released.append(out)
                return out
        # Keep back the tail that could be the start of a stop string.
        keep = 0
        for stop in self._stop:
            for length in range(min(len(stop) - 1, len(self._pending)), 0, -1):
                if self._pending.endswith(stop[:length]):
                    keep = max(keep, length)
                    break
        cut = len(self._pending) - keep
        out, self._pending = self._pending[:cut], self._pending[cut:]
        self._released.append(out)
        return out

    def flush(self) -> str:
        """End of reply: release what was held back (it did not become a stop string)."""
        if self.stopped:
            return ""
        out = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        self._released.append(out)
        return out

    @property
    def text(self) -> str:
        return "".join(self._released)
