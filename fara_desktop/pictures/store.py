"""The pictures chats carry, kept in the data folder by content: one PNG per picture, named by the sha256 of its
file (the same picture in two chats is kept once), readable by the user only. Which of them may be deleted is not
this folder's to decide: ``app.picture_ledger.PictureLedger`` knows who holds each."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import time
from collections.abc import Iterable
from pathlib import Path

from fara_desktop.files.atomic import write_bytes_atomically
from fara_desktop.pictures.decode import Picture
from fara_desktop.vocabulary.pictures import PICTURE_DIGEST


class PictureStore:
    """``put`` a decoded picture (our own pixels: encoded here, never a stranger's file), ``path`` of a digest,
    ``remove`` the files of digests its owner lets go."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._touched_here: dict[str, float] = {}  # each picture's time as this object last wrote or took it in

    def put(self, picture: Picture) -> str:
        """Keep ``picture`` (PNG, lossless) and return its digest; the same picture again is the same file."""
        from PIL import Image

        image = Image.frombytes("RGB", (picture.width, picture.height), picture.rgb)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=False)
        data = buffer.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if target.is_file():
            self.touch(digest)  # taken in again just now: as fresh as a new one (``digests(older_than)``)
        else:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_bytes_atomically(target, data)
            self._note_touched(digest)
        return digest

    def touch(self, digest: str) -> None:
        """Mark a picture as taken in just now (another process's sweep or deletion leaves it for a while)."""
        with contextlib.suppress(OSError):
            os.utime(self.path(digest))
        self._note_touched(digest)

    def _note_touched(self, digest: str) -> None:
        with contextlib.suppress(OSError):
            self._touched_here[digest] = self.path(digest).stat().st_mtime

    def written_since(self, digests: Iterable[str], since: float) -> set[str]:
        """Those of ``digests`` written or taken in at ``since`` (a time) or later."""
        found = set()
        for digest in digests:
            with contextlib.suppress(OSError):
                if self.path(digest).stat().st_mtime >= since:
                    found.add(digest)
        return found

    def fresh_elsewhere(self, digests: Iterable[str], within_s: float) -> set[str]:
        """Those of ``digests`` written or taken in within ``within_s`` by someone else than this object — another
        process (``fara-desktop import`` beside the window) whose messages may not show them yet."""
        since = time.time() - within_s
        fresh = set()
        for digest in digests:
            with contextlib.suppress(OSError):
                mtime = self.path(digest).stat().st_mtime
                if mtime >= since and mtime > self._touched_here.get(digest, 0.0):
                    fresh.add(digest)
        return fresh

    def path(self, digest: str) -> Path:
        """Where a picture is kept; ``ValueError`` for anything that is not a digest (no path from a message can
        name a file outside the store)."""
        if not PICTURE_DIGEST.fullmatch(digest):
            raise ValueError("not a picture digest")
        return self.folder / f"{digest}.png"

    def digests(self, older_than_s: float = 0.0) -> set[str]:
        """The pictures kept here; ``older_than_s``: only those not written nor taken in again for that long."""
        if not self.folder.is_dir():
            return set()
        found = {p.stem: p for p in self.folder.glob("*.png") if PICTURE_DIGEST.fullmatch(p.stem)}
        if older_than_s <= 0:
            return set(found)
        before = time.time() - older_than_s
        old = set()
        for digest, path in found.items():
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < before:
                    old.add(digest)
        return old

    def remove(self, digests: Iterable[str]) -> int:
        """Delete these pictures' files (those that are here); how many were deleted."""
        removed = 0
        for digest in set(digests):
            with contextlib.suppress(OSError):
                self.path(digest).unlink()
                removed += 1
        return removed
