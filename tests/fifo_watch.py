"""Detect whether anything in this process opens a FIFO for reading, without ever hanging the test.

Qt reads local files for images in rich text with a blocking open(); on a FIFO that open waits for a writer
forever. A watcher thread keeps trying to open the FIFO's write end without blocking: that succeeds only while a
reader is waiting, so a success both records the read and releases the reader (it then sees end of file).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path


class FifoWatch:
    """``opened`` counts the readers seen; stop the watcher with ``close``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.005):  # a watcher's poll, not a test's synchronisation
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody has it open for reading
                continue
            self.opened += 1
            os.close(fd)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def watched_fifo(path: Path) -> Iterator[FifoWatch]:
    watch = FifoWatch(path)
    try:
        yield watch
    finally:
        watch.close()
