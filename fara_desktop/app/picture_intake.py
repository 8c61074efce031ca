"""Pictures coming into a chat — a file picked or dropped, an image pasted — decoded in the sandbox child and kept in
the picture store; what the window and the local API hand over before a message is sent."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fara_desktop.pictures.decode import MAX_FILE_BYTES, MB, UnreadablePicture, read_picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.system.sandbox import Sandbox
from fara_desktop.vocabulary.pictures import AttachedPicture


class PictureIntake:
    """Turns a stranger's picture into one of ours: decoded by Pillow in a sandbox child within its budget, stored
    as our own PNG. Safe from any thread (each call has its own child); slow (a child starts): never on the GUI
    thread."""

    def __init__(self, store: PictureStore) -> None:
        self.store = store

    def take_file(self, path: Path, keep_whole: bool = False) -> AttachedPicture:
        """``UnreadablePicture`` says why a file is refused (its message names no path: the caller adds the name)."""
        with Sandbox() as sandbox:
            picture = read_picture(path, sandbox, keep_whole)
        digest = self.store.put(picture)
        return AttachedPicture(digest, self.store.path(digest))

    def take_bytes(self, data: bytes, keep_whole: bool = False) -> AttachedPicture:
        """A picture's encoded bytes (a pasted image, a data: URI), through a private file for the child to read."""
        if len(data) > MAX_FILE_BYTES:
            raise UnreadablePicture(f"is larger than {MAX_FILE_BYTES // MB} MB")
        handle, name = tempfile.mkstemp(prefix="fara-picture-", suffix=".bin")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            return self.take_file(Path(name), keep_whole)
        finally:
            Path(name).unlink(missing_ok=True)

    def attached(self, digest: str) -> AttachedPicture:
        return AttachedPicture(digest, self.store.path(digest))


def cannot_see(model: str, problem: str = "", seeing: Sequence[str] = ()) -> str:
    """What to say when pictures are attached for a model that has no vision projector loaded."""
    why = f" ({problem})" if problem else ": no vision projector (mmproj) was found beside it"
    instead = f" Models here that can: {', '.join(seeing[:3])}." if seeing else (
        " Choose a model with an mmproj file beside it (Gemma 3 or 4, Qwen3.5 …), or put its projector in the "
        "model's folder.")
    return f"{model} cannot see pictures{why}.{instead}"
