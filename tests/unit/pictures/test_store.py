"""Pictures kept by content, referenced by messages, gone when no message uses them (issue 44)."""

from __future__ import annotations

import stat

import pytest

from fara_desktop.app.core import AppCore
from fara_desktop.chats.storage import ConversationStore
from fara_desktop.files.paths import app_paths
from fara_desktop.pictures.decode import Picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.settings import Settings
from tests.helpers.fakes import FakeBackend

RED = Picture(2, 1, bytes([255, 0, 0, 255, 0, 0]))
BLUE = Picture(1, 1, bytes([0, 0, 255]))


def test_a_picture_is_kept_once_by_its_content_and_privately(tmp_path):
    store = PictureStore(tmp_path / "pictures")
    first, again, other = store.put(RED), store.put(RED), store.put(BLUE)
    assert first == again != other and store.digests() == {first, other}
    assert stat.S_IMODE(store.path(first).stat().st_mode) == 0o600
    with pytest.raises(ValueError):
        store.path("../../etc/passwd")
    assert store.remove({first}) == 1 and store.digests() == {other}


def test_a_message_carries_its_pictures_and_a_deleted_chat_takes_them_along(fara_home):
    core = AppCore(app_paths().ensure(), Settings(), FakeBackend())
    try:
        shared, own = core.pictures.store.put(RED), core.pictures.store.put(BLUE)
        core.session.add_user_message("What is in these?", pictures=(shared, own))
        first = core.session.conversation_id
        core.session.new()
        core.session.add_user_message("And this one?", pictures=(shared,))
        second = core.session.conversation_id
        assert first is not None and second is not None
        stored = core.store.messages(first)[0]
        assert stored.pictures == (shared, own)  # kept in order, read back from the database
        core.delete_chat(first)
        assert core.pictures.store.digests() == {shared}  # the other chat still shows it
        core.delete_chat(second)
        assert core.pictures.store.digests() == set()
    finally:
        core.close()


def test_a_hand_edited_reference_cannot_name_a_file_outside_the_store(tmp_path):
    store = ConversationStore(tmp_path / "chats.sqlite3")
    chat = store.create_conversation("x")
    message = store.add_message(chat, "user", "hi", pictures=("a" * 64,))
    with store.transaction() as db:
        edited = '["../../secret", "' + "b" * 64 + '"]'
        db.execute("UPDATE messages SET pictures = ? WHERE id = ?", (edited, message.id))
    assert store.messages(chat)[0].pictures == ("b" * 64,)
    assert store.pictures_in_use() == {"b" * 64}
    store.close()
