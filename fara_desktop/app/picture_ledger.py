"""Who holds each of the user's pictures, and the one place that deletes them.

A picture in the data folder (``pictures.store.PictureStore``) is held by the messages that show it (the chats'
database) and, before it is in a message, by whoever took it in: the composer's tray, an import under way. Only
the ledger deletes a picture, and only one that nobody holds — never against a stand-in database (opened because
the real one could not be: a newer version's, locked, a full disk), which knows none of the user's messages.

Another process (``fara-desktop import`` beside the window) takes pictures in before its messages are saved: the
sweep at start spares every picture written or taken in within the last hour, which covers an import under way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fara_desktop.app.picture_intake import PictureIntake
from fara_desktop.pictures.store import PictureStore
from fara_desktop.system.sandbox import Sandbox

log = logging.getLogger(__name__)

# A picture this fresh may belong to another process's import still saving its messages: the sweep leaves it.
OTHER_PROCESS_GRACE_S = 3600.0
MTIME_SLACK_S = 2.0  # a file system's times are coarser than the clock (FAT: 2 s)


class PictureLedger:
    """The user's pictures and their holders. ``in_use`` reads the digests the chats' messages carry; None when the
    chats' database is a stand-in (then nothing is ever deleted). Safe from any thread."""

    def __init__(self, store: PictureStore, in_use: Callable[[], set[str]] | None) -> None:
        self.store = store
        self.intake = PictureIntake(store)
        self._in_use = in_use
        self._holders: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._imports = 0
        self._readings: dict[int, float] = {}  # pictures being read for the tray: since when (``begin_reading``)
        self._reading_numbers = 0

    def path(self, digest: str) -> Path:
        return self.store.path(digest)

    def hold(self, holder: str, digests: Iterable[str]) -> None:
        """``holder`` (the tray, an import) now holds exactly ``digests``: none of them is deleted meanwhile."""
        with self._lock:
            self._holders[holder] = frozenset(digests)

    def release(self, holder: str) -> None:
        with self._lock:
            self._holders.pop(holder, None)

    def held(self) -> set[str]:
        with self._lock:
            return set().union(*self._holders.values())

    @contextmanager
    def importing(self) -> Iterator[Callable[[Path | bytes], str | None]]:
        """A function that takes an import's pictures in (``PictureIntake.take_imported``), each held until the
        block ends — by then the import's messages hold them, or it failed and a later sweep takes them."""
        with self._lock:
            self._imports += 1
            holder = f"import-{self._imports}"
        taken: set[str] = set()
        sandbox = Sandbox()  # one child reads all the import's pictures, not a process each

        def take(source: Path | bytes) -> str | None:
            digest = self.intake.take_imported(source, sandbox)
            if digest is not None:
                taken.add(digest)
                self.hold(holder, taken)
            return digest

        try:
            yield take
        finally:
            sandbox.close()
            self.release(holder)

    def begin_reading(self) -> int:
        """Pictures are being read for the tray (a batch, on another thread): until ``end_reading`` — once the tray
        holds them — none written or taken in since now is deleted (a chat deleted meanwhile took the picture the
        batch had just read, and every later turn of the chat it was sent in failed)."""
        with self._lock:
            self._reading_numbers += 1
            self._readings[self._reading_numbers] = time.time() - MTIME_SLACK_S
            return self._reading_numbers

    def end_reading(self, token: int) -> None:
        with self._lock:
            self._readings.pop(token, None)

    def delete_unheld(self, candidates: Iterable[str]) -> int:
        """Delete those of ``candidates`` (a deleted chat's pictures) that no message shows, nobody here holds, and
        no other process took in within the grace (an import beside the window, whose messages are not written
        yet: the next start's sweep decides on those); how many were deleted."""
        if self._in_use is None:
            return 0
        wanted = set(candidates)
        if not wanted:
            return 0
        elsewhere = self.store.fresh_elsewhere(wanted, OTHER_PROCESS_GRACE_S)
        with self._lock:
            reading_since = min(self._readings.values(), default=None)
        being_read = self.store.written_since(wanted, reading_since) if reading_since is not None else set()
        return self.store.remove(wanted - self._in_use() - self.held() - elsewhere - being_read)

    def sweep(self, grace_s: float = OTHER_PROCESS_GRACE_S) -> int:
        """At start: delete every picture no message shows, nobody here holds, and no process wrote or took in
        within ``grace_s`` (a picture attached and never sent; one of a chat deleted while the database was out of
        reach). Nothing against a stand-in database."""
        if self._in_use is None:
            log.info("Pictures not swept: the chats' database is not the real one")
            return 0
        unused = self.store.digests(older_than_s=grace_s) - self._in_use() - self.held()
        return self.store.remove(unused)
