"""The pictures chats carry, kept in the data folder by content: one PNG per picture, named by the sha256 of its
file (the same picture in two chats is kept once), readable by the user only, and deleted when no message uses
it any more (a deleted chat's pictures go with it)."""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Iterable
from pathlib import Path

from fara_desktop.files.atomic import write_bytes_atomically
from fara_desktop.pictures.decode import Picture
from fara_desktop.vocabulary.pictures import PICTURE_DIGEST


class PictureStore:
    """``put`` a decoded picture (our own pixels: encoded here, never a stranger's file), ``path`` of a digest,
    ``keep_only`` the digests still used."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def put(self, picture: Picture) -> str:
        """Keep ``picture`` (PNG, lossless) and return its digest; the same picture again is the same file."""
        from PIL import Image

        image = Image.frombytes("RGB", (picture.width, picture.height), picture.rgb)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=False)
        data = buffer.getvalue()
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if not target.is_file():
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_bytes_atomically(target, data)
        return digest

    def path(self, digest: str) -> Path:
        """Where a picture is kept; ``ValueError`` for anything that is not a digest (no path from a message can
        name a file outside the store)."""
        if not PICTURE_DIGEST.fullmatch(digest):
            raise ValueError("not a picture digest")
        return self.folder / f"{digest}.png"

    def digests(self) -> set[str]:
        if not self.folder.is_dir():
            return set()
        return {p.stem for p in self.folder.glob("*.png") if PICTURE_DIGEST.fullmatch(p.stem)}

    def keep_only(self, used: Iterable[str]) -> int:
        """Delete every picture no message uses; how many were deleted."""
        gone = self.digests() - set(used)
        for digest in gone:
            with contextlib.suppress(OSError):
                self.path(digest).unlink()
        return len(gone)
