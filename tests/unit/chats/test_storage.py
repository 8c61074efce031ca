"""Conversations in SQLite: schema, migrations, transactions, export and import."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import stat

import pytest

from fara_desktop.chats.export import export_conversations, import_conversation
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.chats.records import title_from
from fara_desktop.chats.schema import SCHEMA_VERSION
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore, StorageError
from fara_desktop.vocabulary.stats import GenerationStats

STATS = GenerationStats(10, 10, 5, 0.1, 100.0, 50.0, 15, 2048, 0.2)


@pytest.fixture
def store(tmp_path):
    store = ConversationStore(tmp_path / "data" / "conversations.sqlite3")
    yield store
    store.close()


def test_database_settings_and_permissions(store, tmp_path):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.integrity_ok()


def test_newer_schema_is_refused_without_touching_the_file(tmp_path):
    path = tmp_path / "c.sqlite3"
    ConversationStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StorageError, match="newer Fara Desktop"):
        ConversationStore(path)


def test_corrupt_database_is_a_typed_error(tmp_path):
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageError, match="cannot be opened"):
        ConversationStore(path)


def test_titles_from_first_message():
    assert title_from("How do I bake bread?") == "How do I bake bread?"
    assert title_from("  \n ") == "New chat"
    long = title_from("Please explain in great detail how the memory bandwidth limits token generation speed")
    assert long.endswith("…") and len(long) <= 49


def test_session_commits_the_user_message_before_the_reply(store):
    session = ChatSession(store)
    user = session.add_user_message("Hello there")
    assert [m.content for m in store.messages(user.conversation_id)] == ["Hello there"]
    reply = session.begin_reply("SmolLM2")
    assert store.messages(user.conversation_id)[1].status == "streaming"
    session.reply_text("Hi")
    session._last_save -= 2  # a second has passed
    session.reply_text(" you")
    assert store.messages(user.conversation_id)[1].content == "Hi you"  # saved while streaming
    session.end_reply("Hi you!", "complete", STATS, "SmolLM2")
    saved = store.messages(user.conversation_id)[1]
    assert (saved.id, saved.content, saved.status, saved.model) == (reply.id, "Hi you!", "complete", "SmolLM2")
    assert saved.stats["completion_tokens"] == 5
    assert store.conversations()[0].title == "Hello there"


def test_interrupted_replies_become_stopped(store):
    session = ChatSession(store)
    session.add_user_message("Tell me a story")
    session.begin_reply(None)
    session.reply_text("Once upon")
    session._last_save -= 2
    session.reply_text(" a time")
    assert store.mark_interrupted() == 1
    reply = store.messages(session.conversation_id)[1]
    assert (reply.content, reply.status) == ("Once upon a time", "stopped")
    assert reply.stats == {"ended_early": "interrupted"}  # told apart from a reply the user stopped


def test_an_interrupted_reply_says_so_with_what_was_saved_and_keeps_its_figures(store):
    """Issue 66: a reply left "streaming" by a killed process is shown as interrupted at the next start."""
    from fara_desktop.ui.widgets.chat_view import footer_for

    session = ChatSession(store)
    session.add_user_message("Tell me a story")
    session.begin_reply(None)
    # the process dies here, before any of the reply was saved
    other = ChatSession(store)
    other.add_user_message("And another")
    other.begin_reply(None)
    other.reply_text("Once")
    other._last_save -= 2
    other.reply_text(" upon")
    store._db.execute("UPDATE messages SET stats = '{\"ttft_s\": 0.5}' WHERE id = ?", (other._reply.id,))
    assert store.mark_interrupted() == 2
    empty = store.messages(session.conversation_id)[1]
    saved = store.messages(other.conversation_id)[1]
    assert saved.stats == {"ttft_s": 0.5, "ended_early": "interrupted"}
    assert footer_for(saved) == "Interrupted: the app ended before this reply did"
    assert footer_for(empty).startswith("Interrupted before any of it was saved")
    assert store.mark_interrupted() == 0
    stopped_by_user = dataclasses.replace(saved, stats=None)
    assert footer_for(stopped_by_user) == "Stopped"


def test_replace_regenerate_and_prompt(store):
    session = ChatSession(store, system_prompt="Be brief.")
    session.add_user_message("one")
    session.begin_reply(None)
    session.end_reply("uno", "complete")
    session.add_user_message("two")
    session.begin_reply(None)
    session.end_reply("", "failed", error="boom")
    # a reply that failed before writing anything is not kept: the turn ends at the question
    assert [m.content for m in session.prompt_messages()] == ["Be brief.", "one", "uno", "two"]
    assert [m.content for m in store.messages(session.conversation_id)] == ["one", "uno", "two"]
    session.redo_from(2)
    assert [m.content for m in session.messages] == ["one", "uno"]
    session.apply_trim(1)
    assert [m.content for m in session.prompt_messages()] == ["Be brief.", "uno"]


def test_search_rename_delete(store):
    first = ChatSession(store)
    first.add_user_message("Recipes for sourdough bread")
    second = ChatSession(store)
    second.add_user_message("Travel plans")
    second.begin_reply(None)
    second.end_reply("Lisbon has great bread too", "complete")
    assert {c.id for c in store.conversations("bread")} == {first.conversation_id, second.conversation_id}
    assert [c.id for c in store.conversations("sourdough")] == [first.conversation_id]
    assert store.conversations("100%_") == []
    store.rename(second.conversation_id, "Portugal")
    assert store.conversation(second.conversation_id).title == "Portugal"
    store.delete(first.conversation_id)
    assert [c.id for c in store.conversations()] == [second.conversation_id]
    assert store._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2  # cascade


def test_export_and_import_round_trip(store, tmp_path):
    session = ChatSession(store, system_prompt="Be nice.")
    session.add_user_message("What is **mmap**?")
    session.begin_reply("SmolLM2")
    session.end_reply("It maps a file into memory.", "complete", STATS, "SmolLM2")
    written = export_conversations(store, tmp_path / "out")
    assert sorted(p.suffix for p in written) == [".json", ".md"]
    markdown = next(p for p in written if p.suffix == ".md").read_text()
    assert "# What is **mmap**?" in markdown and "It maps a file into memory." in markdown
    assert "> System prompt: Be nice." in markdown
    imported = import_conversation(store, next(p for p in written if p.suffix == ".json"))
    copy = store.messages(imported)
    assert [(m.role, m.content, m.model) for m in copy] == [
        ("user", "What is **mmap**?", None),
        ("assistant", "It maps a file into memory.", "SmolLM2"),
    ]
    assert copy[1].stats["completion_tokens"] == 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ImportRefusedError, match="not a conversation export"):
        import_conversation(store, bad)


def test_a_reply_that_ended_early_keeps_why_through_an_export_and_back(store, tmp_path):
    """Issue 53, item 11: why a reply ended early is kept with it — and an export of it imports back (the import
    refused the chat: "stats hold a value that is not a number ('ended_early')")."""
    import dataclasses

    session = ChatSession(store)
    session.add_user_message("Sing")
    session.begin_reply("SmolLM2")
    session.end_reply("la la la", "complete", dataclasses.replace(STATS, ended_early="repetition"), "SmolLM2")
    assert store.messages(session.conversation_id)[1].stats["ended_early"] == "repetition"
    written = export_conversations(store, tmp_path / "out")
    imported = import_conversation(store, next(p for p in written if p.suffix == ".json"))
    assert store.messages(imported)[1].stats["ended_early"] == "repetition"
    hostile = json.loads(next(p for p in written if p.suffix == ".json").read_text())
    hostile["messages"][1]["stats"]["ended_early"] = "<script>"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(hostile))
    with pytest.raises(ImportRefusedError, match="ended_early"):
        import_conversation(store, forged)


def test_a_deleted_chats_id_is_never_given_to_a_new_chat(tmp_path):
    """SQLite hands out the highest id + 1: the newest chat deleted, the next chat got its id — and with it
    whatever is keyed by the id outside the database (its saved reading's file name, notices said once per
    chat). Ids only grow now, across restarts and imports too."""
    from fara_desktop.chats.exchange import import_conversations
    from fara_desktop.chats.export_format import ImportedConversation

    path = tmp_path / "chats.sqlite3"
    store = ConversationStore(path)
    first = store.create_conversation("one")
    second = store.create_conversation("two")
    store.delete(second)
    third = store.create_conversation("three")
    assert third > second
    store.delete(third)
    store.close()
    again = ConversationStore(path)
    (imported,) = import_conversations(again, [ImportedConversation("imported", "", 0.0, 0.0, [])])
    assert imported > third > first
    again.close()


def test_renaming_keeps_a_chats_place_and_a_search_says_where_it_matched(tmp_path):
    """Issue 43, item 13: renaming moved a chat to the top of the list; a search showed no hint of where it
    matched."""
    store = ConversationStore(tmp_path / "chats.sqlite3")
    older = store.create_conversation("Plumbing")
    session = ChatSession(store)
    session.open(older)
    session.add_user_message("The aquamarine valve controls the pressure of the whole heating circuit, it says.")
    newer = store.create_conversation("Recipes")
    ChatSession(store).open(newer)
    store.rename(newer, "Recipes")  # touch the newer so the order is settled by times, not ids
    order = [c.id for c in store.conversations()]
    store.rename(older, "Plumbing, renamed")
    assert [c.id for c in store.conversations()] == order
    (found,) = store.conversations("AQUAMARINE valve")
    assert found.id == older and "aquamarine valve controls" in found.match and found.match.startswith("The")
    assert store.conversations("")[0].match == ""
    store.close()


def test_under_a_reply_the_wait_the_user_had_and_what_was_not_read_again(store):
    """Issue 64, items 5 and 7: "first token 64 ms" under a reply the user waited 1.64 s for; a chat resumed
    after a restart (first word in 1.8 s, not 25.5 s) did not say why."""
    from fara_desktop.ui.widgets.chat_view import footer_for

    session = ChatSession(store)
    session.add_user_message("Hello")
    session.begin_reply(None)
    stats = GenerationStats(3400, 86, 12, 0.064, 900.0, 20.0, 3412, 8192, 1.0)
    final = session.end_reply("Hi", "complete", stats, waited_s=1.64)
    again = store.messages(session.conversation_id)[1]
    for message in (final, again):
        footer = footer_for(message)  # type: ignore[arg-type]
        assert "first words after 1.6 s (the model's first token 64 ms)" in footer, footer
        assert "resumed: 3,314 tokens not read again" in footer
    quick = dataclasses.replace(again, stats={**(again.stats or {}), "waited_s": 0.1, "prompt_tokens_evaluated": 3400})
    assert "first token 64 ms" in footer_for(quick) and "resumed" not in footer_for(quick)


def test_under_a_reply_what_speculation_proposed_and_the_model_accepted_after_a_reopen(store):
    """Issue 65: the reply's line says "n tokens proposed, m accepted" (kept with the reply, as every figure); a
    reply that proposed nothing says nothing of it."""
    from fara_desktop.ui.widgets.chat_view import footer_for

    session = ChatSession(store)
    session.add_user_message("Quote the passage")
    session.begin_reply(None)
    stats = GenerationStats(300, 300, 200, 0.1, 900.0, 20.0, 500, 8192, 2.0, draft_proposed=1312, draft_accepted=1208)
    final = session.end_reply("The passage…", "complete", stats)
    again = store.messages(session.conversation_id)[1]
    for message in (final, again):
        assert "1,312 tokens proposed, 1,208 accepted" in footer_for(message)  # type: ignore[arg-type]
    plain = dataclasses.replace(again, stats={**(again.stats or {}), "draft_proposed": 0, "draft_accepted": 0})
    assert "proposed" not in footer_for(plain)
