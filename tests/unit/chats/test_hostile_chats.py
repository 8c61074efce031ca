"""Chat files and databases from strangers or older versions, and a disk that refuses writes: refused whole,
shown safely, never losing a message."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from fara_desktop.chats.export import export_conversations, import_conversation
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore, StorageError
from fara_desktop.ui.widgets.chat_view import footer_for
from tests.helpers.failing_disk import allow_writes, refuse_writes
from tests.helpers.fifo_watch import watched_fifo


@pytest.fixture
def store(tmp_path: Path):
    db = ConversationStore(tmp_path / "chats.sqlite3")
    yield db
    db.close()


def export(**overrides: object) -> dict:
    message = {
        "role": "user",
        "content": "hi",
        "status": "complete",
        "model": None,
        "stats": None,
        "created_at": 1_700_000_000.0,
        "updated_at": 1_700_000_000.0,
    }
    message.update(overrides.pop("message", {}))  # type: ignore[arg-type]
    data = {
        "format": "fara-desktop-conversation",
        "version": 1,
        "title": "t",
        "system_prompt": "",
        "created_at": 1_700_000_000.0,
        "updated_at": 1_700_000_000.0,
        "messages": [message],
    }
    data.update(overrides)
    return data


HOSTILE_IMPORTS = {
    "time 1e300": export(created_at=1e300),
    "message time Infinity": export(message={"created_at": float("inf")}),
    "time as words": export(message={"created_at": "yesterday"}),
    "model as an object": export(message={"model": {"name": "x"}}),
    "unknown status": export(message={"status": "pwned"}),
    "stats of another shape": export(message={"stats": [1, 2, 3]}),
    "stats holding text": export(message={"stats": {"gen_tok_per_s": "fast"}}),
    "content not text": export(message={"content": ["a"]}),
    "title not text": export(title={"a": 1}),
    "huge title": export(title="x" * 10_000),
}


@pytest.mark.parametrize("name", HOSTILE_IMPORTS)
def test_a_chat_file_with_one_bad_value_is_refused_whole(store, tmp_path: Path, name: str):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(HOSTILE_IMPORTS[name]))
    with pytest.raises(ImportRefusedError):
        import_conversation(store, path)
    assert store.conversations() == []


def test_deep_nesting_and_a_fifo_are_refused_with_a_reason(store, tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ImportRefusedError, match=r"nested|JSON"):
        import_conversation(store, deep)
    with watched_fifo(tmp_path / "fifo.json") as fifo, pytest.raises(ImportRefusedError, match="not a regular"):
        import_conversation(store, fifo.path)
    assert fifo.opened == 0


def test_what_an_older_version_left_in_the_database_still_shows_and_exports(store, tmp_path: Path):
    session = ChatSession(store)
    session.add_user_message("hello")
    session.begin_reply("m")
    session.end_reply("world", "complete")
    store._db.execute(
        "UPDATE messages SET created_at = 1e300, status = 'pwned', stats = '[1,2]', model = X'FF00' WHERE role = 'user'"
    )
    store._db.execute("UPDATE messages SET stats = '{\"completion_tokens\": \"many\"}' WHERE role = 'assistant'")
    store._db.execute("UPDATE conversations SET created_at = 'yesterday', updated_at = 1e308")
    messages = store.messages(session.conversation_id)
    assert [footer_for(m) for m in messages] == ["", ""]
    assert messages[0].status == "complete" and messages[0].model is None and messages[0].created_at == 0.0
    written = export_conversations(store, tmp_path / "out")
    assert len(written) == 2
    assert store.conversations()[0].created_at == 0.0


def test_exports_are_private_and_never_follow_a_planted_link(store, tmp_path: Path):
    ChatSession(store).add_user_message("private")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    for name in ["0001-private.md.tmp", "0001-private.json.tmp"]:
        (out / name).symlink_to(victim)
    written = export_conversations(store, out)
    assert victim.read_text() == "untouched"
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_failed_commit_is_rolled_back_so_later_writes_work(store):
    session = ChatSession(store)
    session.add_user_message("first")
    refuse_writes(store, "COMMIT")
    with pytest.raises(StorageError):
        session.add_user_message("lost?")
    allow_writes(store)
    assert not store._db.in_transaction
    session.add_user_message("second")
    assert [m.content for m in store.messages(session.conversation_id)] == ["first", "second"]


def test_a_reply_the_disk_refuses_is_kept_and_saved_once_the_disk_allows(store):
    session = ChatSession(store)
    session.add_user_message("question")
    reply = session.begin_reply("m")
    refuse_writes(store, "messages")
    session.reply_text("half ")
    session._last_save -= 2
    session.reply_text("answer")  # a periodic save fails: no exception reaches the caller
    final = session.end_reply(None, "complete")
    assert final is not None and final.content == "half answer"
    assert session.save_problem and not session.replying and session.unsaved_count == 1
    assert not session.retry_pending()
    allow_writes(store)
    assert session.retry_pending() and session.save_problem is None
    assert store.messages(session.conversation_id)[-1].content == "half answer"
    assert store.messages(session.conversation_id)[-1].id == reply.id


def test_regenerate_never_loses_the_old_reply(store):
    session = ChatSession(store)
    session.add_user_message("question")
    session.begin_reply("m")
    session.end_reply("old answer", "complete")
    session.redo_from(1)
    session.begin_reply("m")
    session.end_reply("", "failed", error="the model crashed")
    assert [m.content for m in store.messages(session.conversation_id)] == ["question", "old answer"]
    assert [m.content for m in session.messages] == ["question", "old answer"]
    session.redo_from(1)
    session.begin_reply("m")
    session.end_reply("new answer", "complete")
    assert [m.content for m in session.messages] == ["question", "new answer"]
    assert [m.content for m in store.messages(session.conversation_id)] == ["question", "old answer", "new answer"]


def test_edit_and_resend_keeps_every_version(store):
    session = ChatSession(store)
    session.add_user_message("first version")
    session.begin_reply("m")
    session.end_reply("reply to first", "complete")
    session.redo_from(0)
    session.add_user_message("second version")
    session.begin_reply("m")
    session.end_reply("", "failed", error="boom")
    contents = [m.content for m in store.messages(session.conversation_id)]
    assert contents == ["first version", "reply to first", "second version"]
    session.redo_from(0)
    session.add_user_message("third version")
    session.begin_reply("m")
    session.end_reply("reply to third", "complete")
    assert [m.content for m in session.messages] == ["third version", "reply to third"]
    assert session.place(0).count == 3
