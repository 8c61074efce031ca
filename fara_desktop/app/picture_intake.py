"""Pictures coming into a chat — a file picked or dropped, an image pasted — decoded in the sandbox child and kept in
the picture store; what the window and the local API hand over before a message is sent."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from fara_desktop.pictures.decode import MAX_FILE_BYTES, MB, UnreadablePicture, read_picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.system.sandbox import Sandbox, SandboxStoppedError
from fara_desktop.vocabulary.pictures import PICTURE_DIGEST, AttachedPicture

TEMP_PREFIX, TEMP_SUFFIX = "fara-picture-", ".bin"  # a pasted picture's bytes, for the sandbox child to read
TEMP_GRACE_S = 3600.0  # another process of ours may be reading one this fresh


def sweep_left_temp_files(folder: Path | None = None, grace_s: float = TEMP_GRACE_S) -> int:
    """Delete the pasted pictures' temporary files a killed process left (each is deleted when its read ends): those
    of this user, not touched for ``grace_s``. How many were deleted."""
    import time

    where = Path(folder or tempfile.gettempdir())
    before, removed = time.time() - grace_s, 0
    try:
        entries = list(where.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"))
    except OSError:
        return 0
    for entry in entries:
        try:
            info = entry.lstat()
            if entry.is_file() and not entry.is_symlink() and info.st_uid == os.getuid() and info.st_mtime < before:
                entry.unlink()
                removed += 1
        except OSError:
            continue
    return removed


class PictureIntake:
    """Turns a stranger's picture into one of ours: decoded by Pillow in a sandbox child within its budget, stored
    as our own PNG. Safe from any thread (each call has its own child); slow (a child starts): never on the GUI
    thread."""

    def __init__(self, store: PictureStore) -> None:
        self.store = store

    def take_file(
        self,
        path: Path,
        keep_whole: bool = False,
        should_stop: Callable[[], bool] | None = None,
        sandbox: Sandbox | None = None,
    ) -> AttachedPicture:
        """``UnreadablePicture`` says why a file is refused (its message names no path: the caller adds the name);
        ``SandboxStoppedError`` when ``should_stop`` said so while it was read. ``sandbox``: one the caller reuses
        for many pictures (an import's); else a child of its own."""
        if sandbox is not None:
            picture = read_picture(path, sandbox, keep_whole, should_stop=should_stop)
        else:
            with Sandbox() as own:
                picture = read_picture(path, own, keep_whole, should_stop=should_stop)
        digest = self.store.put(picture)
        return AttachedPicture(digest, self.store.path(digest))

    def take_bytes(
        self,
        data: bytes,
        keep_whole: bool = False,
        should_stop: Callable[[], bool] | None = None,
        sandbox: Sandbox | None = None,
    ) -> AttachedPicture:
        """A picture's encoded bytes (a pasted image, a data: URI), through a private file for the child to read."""
        if len(data) > MAX_FILE_BYTES:
            raise UnreadablePicture(f"is larger than {MAX_FILE_BYTES // MB} MB")
        handle, name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            return self.take_file(Path(name), keep_whole, should_stop, sandbox)
        finally:
            Path(name).unlink(missing_ok=True)

    def attached(self, digest: str) -> AttachedPicture:
        return AttachedPicture(digest, self.store.path(digest))

    def take_imported(self, source: Path | bytes, sandbox: Sandbox | None = None) -> str | None:
        """A picture of an imported export: a file beside it (ours, named by its digest: the one here already when
        the store has it) or another app's bytes; read in ``sandbox`` (the import's one) like any stranger's; None
        when it cannot be."""
        ours = isinstance(source, Path) and PICTURE_DIGEST.fullmatch(source.stem) is not None
        if isinstance(source, Path) and ours and self.store.path(source.stem).is_file():
            self.store.touch(source.stem)  # taken in now: a window beside this import neither sweeps nor deletes it
            return source.stem
        try:
            if isinstance(source, Path):
                return self.take_file(source, sandbox=sandbox).digest
            return self.take_bytes(source, sandbox=sandbox).digest
        except UnreadablePicture:
            return None


class ApiPictureFiles:
    """Pictures of local API requests: kept only while their request runs (a client's pictures are not the
    user's, and no chat refers to them), in a private folder of this process's own under ``folder`` (the window and
    ``fara-desktop serve`` run side by side: neither deletes the other's); ``take`` and ``release`` count users,
    so two requests with the same picture never delete it from under each other. At start, the folders of
    processes that have ended are deleted."""

    def __init__(self, folder: Path) -> None:
        _sweep_ended_processes(folder)
        self.store = store = PictureStore(folder / f"p{os.getpid()}")
        self._intake = PictureIntake(store)
        self._users: Counter[str] = Counter()
        self._lock = threading.Lock()
        store.remove(store.digests())  # left by an earlier process with this process's number

    def take(self, data: Sequence[bytes], should_stop: Callable[[], bool] | None = None) -> tuple[AttachedPicture, ...]:
        """Decode and keep each picture (``UnreadablePicture`` for the first that cannot be read,
        ``SandboxStoppedError`` when ``should_stop`` says so: none is kept)."""
        taken: list[AttachedPicture] = []
        try:
            for item in data:
                if should_stop is not None and should_stop():
                    raise SandboxStoppedError("the request's pictures were no longer wanted")
                picture = self._intake.take_bytes(item, should_stop=should_stop)
                with self._lock:
                    self._users[picture.digest] += 1
                taken.append(picture)
        except Exception:
            self.release(taken)
            raise
        return tuple(taken)

    def release(self, pictures: Sequence[AttachedPicture]) -> None:
        with self._lock:
            for picture in pictures:
                self._users[picture.digest] -= 1
                if self._users[picture.digest] <= 0:
                    del self._users[picture.digest]
                    picture.path.unlink(missing_ok=True)


def _sweep_ended_processes(folder: Path) -> None:
    """Delete the picture folders of processes that no longer run, and loose pictures of earlier versions."""
    import psutil

    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_file() and entry.suffix == ".png":
            entry.unlink(missing_ok=True)
        elif entry.is_dir() and entry.name[:1] == "p" and entry.name[1:].isdigit():
            pid = int(entry.name[1:])
            if pid != os.getpid() and not psutil.pid_exists(pid):
                shutil.rmtree(entry, ignore_errors=True)
