"""The user's pictures have one owner (issue 50, items 1, 2 and 6): a picture is deleted only when no message
shows it and nobody holds it, never against a stand-in database, and the window's and ``serve``'s API pictures
never delete each other's."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

from fara_desktop.app.core import AppCore
from fara_desktop.app.picture_intake import ApiPictureFiles
from fara_desktop.app.picture_ledger import PictureLedger
from fara_desktop.chats.storage import ConversationStore, database_path
from fara_desktop.files.paths import app_paths
from fara_desktop.pictures.decode import Picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.settings import Settings
from tests.helpers.fakes import FakeBackend

RED = Picture(2, 1, bytes([255, 0, 0, 255, 0, 0]))
BLUE = Picture(1, 1, bytes([0, 0, 255]))
GREEN = Picture(1, 1, bytes([0, 255, 0]))


def age(store: PictureStore, digest: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(store.path(digest), (then, then))


def test_a_database_of_a_newer_version_leaves_every_picture_on_disk(fara_home):
    """Item 1: the app falls back to an empty stand-in store; the real pictures are not swept against it, at start
    nor when a chat of the stand-in is deleted."""
    paths = app_paths().ensure()
    real = ConversationStore(database_path(paths.data))
    chat = real.create_conversation("Holiday")
    store = PictureStore(paths.data / "pictures")
    kept = {store.put(RED), store.put(BLUE)}
    real.add_message(chat, "user", "Look", pictures=tuple(sorted(kept)))
    real.close()
    for digest in kept:
        age(store, digest, 7200)  # old enough for any sweep
    with sqlite3.connect(database_path(paths.data)) as db:
        db.execute("PRAGMA user_version = 999")  # written by a newer Fara Desktop
    core = AppCore(paths, Settings(), FakeBackend())
    try:
        assert core.store_problem and "newer" in core.store_problem
        assert store.digests() == kept, "the start swept the user's pictures against the stand-in"
        core.session.add_user_message("In the stand-in", pictures=(core.pictures.store.put(GREEN),))
        stand_in_chat = core.session.conversation_id
        assert stand_in_chat is not None
        core.delete_chat(stand_in_chat)
        assert kept <= store.digests(), "deleting a chat of the stand-in deleted the user's pictures"
    finally:
        core.close()


def test_deleting_a_chat_leaves_the_pictures_the_tray_and_an_import_hold(fara_home):
    """Item 2: pictures in no message yet (the tray's, an import's under way) survive any chat's deletion, even a
    chat that showed the same picture; the chat's own other pictures go."""
    core = AppCore(app_paths().ensure(), Settings(), FakeBackend())
    try:
        shown, only_here = core.pictures.store.put(RED), core.pictures.store.put(BLUE)
        core.session.add_user_message("Old chat", pictures=(shown, only_here))
        old = core.session.conversation_id
        core.session.new()
        core.session.add_user_message("A chat without pictures")
        plain = core.session.conversation_id
        core.session.new()
        assert old is not None and plain is not None
        in_tray = core.pictures.store.put(GREEN)
        core.pictures.hold("tray", {in_tray, shown})  # the same picture attached again, and a new one
        core.delete_chat(plain)
        assert core.pictures.store.digests() == {shown, only_here, in_tray}
        with core.pictures.importing() as take:
            importing = take(core.paths.cache / "an export" / "pictures" / f"{shown}.png")  # ours: known by digest
            core.delete_chat(old)
            assert importing == shown and core.pictures.store.digests() == {shown, in_tray}
        core.pictures.hold("tray", ())  # sent elsewhere or removed: nobody holds them now
        assert core.pictures.delete_unheld({shown, in_tray}) == 2
        assert core.pictures.store.digests() == set()
    finally:
        core.close()


def test_the_sweep_at_start_spares_fresh_pictures_of_another_process(tmp_path):
    store = PictureStore(tmp_path / "pictures")
    stale, fresh, used = store.put(RED), store.put(BLUE), store.put(GREEN)
    age(store, stale, 7200)
    age(store, used, 7200)
    ledger = PictureLedger(store, lambda: {used})
    assert ledger.sweep() == 1  # an unsent picture of long ago; not one another process's import just wrote
    assert store.digests() == {fresh, used}
    store.put(RED)  # taken in again (an import of an export of ours): fresh again
    age(store, fresh, 7200)
    assert PictureLedger(store, None).sweep() == 0  # a stand-in database: nothing is ever deleted


def test_the_window_and_serve_keep_their_api_pictures_apart(tmp_path):
    """Item 6: each process has its own folder; a new one deletes only the folders of processes that ended."""
    folder = tmp_path / "api-pictures"
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        theirs = PictureStore(folder / f"p{other.pid}")
        in_their_request = theirs.put(RED)
        ended = PictureStore(folder / "p999999999")  # no such process
        ended.put(BLUE)
        mine = ApiPictureFiles(folder)
        assert theirs.digests() == {in_their_request}, "a second process deleted the first's request pictures"
        assert not ended.folder.exists()
        assert mine.store.folder.parent == folder and mine.store.folder != theirs.folder
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(10)


def test_a_pasted_pictures_temporary_file_left_by_a_kill_is_swept(tmp_path):
    """Issue 51, item 11: each is deleted when its read ends; one a killed process left goes at the next start, not
    one another process of ours is reading now."""
    from fara_desktop.app.picture_intake import sweep_left_temp_files

    left, fresh, other = tmp_path / "fara-picture-ab12.bin", tmp_path / "fara-picture-cd34.bin", tmp_path / "x.bin"
    for path in (left, fresh, other):
        path.write_bytes(b"\x89PNG")
    then = time.time() - 7200
    os.utime(left, (then, then))
    os.utime(other, (then, then))
    assert sweep_left_temp_files(tmp_path) == 1
    assert not left.exists() and fresh.exists() and other.exists()
