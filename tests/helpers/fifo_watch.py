"""Detect whether anything in this process opens a FIFO for reading, without ever hanging the test.

Qt reads local files for images in rich text with a blocking open(); on a FIFO that open waits for a writer
forever — and it may wait while holding Python's GIL, so a watcher thread in this process could not run. The
watcher is therefore a separate process: it keeps trying to open the FIFO's write end without blocking, which
succeeds only while a reader is waiting; a success both counts the read and releases the reader (it sees end of
file), so a regression makes the test fail instead of hang.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

_WATCHER = r"""
import os, select, sys
path, opened = sys.argv[1], 0
print("ready", flush=True)
while True:
    ready, _, _ = select.select([sys.stdin], [], [], 0.005)  # the watcher's poll; stdin closing ends it
    if ready and not sys.stdin.readline():
        break
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: nobody has it open for reading
        continue
    opened += 1
    os.close(fd)
print(opened, flush=True)
"""


class FifoWatch:
    """``opened`` (after ``close``) counts the readers seen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.opened = 0
        self._process = subprocess.Popen(
            [sys.executable, "-c", _WATCHER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        assert self._process.stdout.readline().strip() == "ready"

    def close(self) -> None:
        output, _ = self._process.communicate(timeout=30)  # closes its stdin: it stops and reports
        self.opened = int(output.strip() or 0)


@contextlib.contextmanager
def watched_fifo(path: Path) -> Iterator[FifoWatch]:
    watch = FifoWatch(path)
    try:
        yield watch
    finally:
        watch.close()
