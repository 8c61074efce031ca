"""Conversations that branch: regenerate and edit keep every version as siblings, nothing is deleted, the branch
shown persists, old databases migrate in place, and a hostile database cannot hang the tree."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from fara_desktop.chats.exchange import export_json, export_markdown, import_json
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.chats.schema import MIGRATIONS
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore


def turn(session: ChatSession, question: str | None, answer: str, reasoning: str = "") -> None:
    if question is not None:
        session.add_user_message(question)
    session.begin_reply("Model")
    if reasoning:
        session.reply_text(reasoning, reasoning=True)
    session.reply_text(answer)
    session.end_reply(None, "complete")


def shown(session: ChatSession) -> list[str]:
    return [m.content for m in session.messages]


def test_regenerate_keeps_the_earlier_reply_as_a_sibling(store):
    session = ChatSession(store)
    turn(session, "Question", "First answer")
    session.redo_from(1)
    turn(session, None, "Second answer")
    assert shown(session) == ["Question", "Second answer"]
    assert (session.place(1).index, session.place(1).count) == (1, 2)
    assert session.switch_version(1, -1)
    assert shown(session) == ["Question", "First answer"]
    assert not session.switch_version(1, -1)  # already the first version
    assert len(store.messages(session.conversation_id)) == 3  # nothing deleted


def test_editing_a_message_branches_and_each_branch_keeps_its_continuation(store):
    session = ChatSession(store)
    turn(session, "one", "uno")
    turn(session, "two", "dos")
    turn(session, "three", "tres")
    session.redo_from(2)  # edit "two"
    turn(session, "TWO", "DOS")
    assert shown(session) == ["one", "uno", "TWO", "DOS"]
    assert session.switch_version(2, -1)
    assert shown(session) == ["one", "uno", "two", "dos", "three", "tres"]  # the old branch, to its end
    assert session.switch_version(2, +1)
    assert shown(session) == ["one", "uno", "TWO", "DOS"]
    # the branch shown is remembered: another session opens it
    again = ChatSession(store)
    again.open(session.conversation_id)
    assert shown(again) == ["one", "uno", "TWO", "DOS"]
    assert again.place(2).count == 2 and again.place(0).count == 1


def test_editing_the_first_message_makes_sibling_roots(store):
    session = ChatSession(store)
    turn(session, "Hi", "Hello")
    session.redo_from(0)
    turn(session, "Hey", "Hey yourself")
    assert shown(session) == ["Hey", "Hey yourself"] and session.place(0).count == 2
    assert session.switch_version(0, -1) and shown(session) == ["Hi", "Hello"]


def test_a_failed_regenerate_goes_back_to_the_reply_it_redid(store):
    session = ChatSession(store)
    turn(session, "Question", "Answer")
    session.redo_from(1)
    session.begin_reply("Model")
    session.end_reply("", "failed", error="boom")
    assert shown(session) == ["Question", "Answer"]
    assert [m.content for m in store.messages(session.conversation_id)] == ["Question", "Answer"]


def test_a_failed_edit_keeps_the_edited_message(store):
    session = ChatSession(store)
    turn(session, "Question", "Answer")
    session.redo_from(0)
    session.add_user_message("Better question")
    session.begin_reply("Model")
    session.end_reply("", "failed", error="boom")
    assert shown(session) == ["Better question"]
    assert session.switch_version(0, -1) and shown(session) == ["Question", "Answer"]


def test_branch_from_here_copies_the_branch_into_a_new_chat(store):
    session = ChatSession(store)
    turn(session, "one", "uno", reasoning="counting in Spanish")
    turn(session, "two", "dos")
    original = session.conversation_id
    branch = session.branch_off(1)
    assert branch != original
    copy = ChatSession(store)
    copy.open(branch)
    assert shown(copy) == ["one", "uno"] and copy.messages[1].reasoning == "counting in Spanish"
    assert store.conversation(branch).title.endswith("(branch)")
    assert len(store.messages(original)) == 4  # the original is untouched


def test_reasoning_is_stored_apart_and_sent_apart(store):
    session = ChatSession(store, system_prompt="")
    turn(session, "Why?", "Because.", reasoning="Let me think about why.")
    stored = store.messages(session.conversation_id)[1]
    assert (stored.content, stored.reasoning) == ("Because.", "Let me think about why.")
    prompt = session.prompt_messages()
    assert prompt[1].content == "Because." and prompt[1].reasoning == "Let me think about why."
    markdown = export_markdown(store, session.conversation_id)
    assert "<details><summary>Reasoning</summary>" in markdown
    assert markdown.index("Let me think about why.") < markdown.index("Because.")


def test_a_version_1_database_migrates_in_place(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    now = time.time()
    db.execute("INSERT INTO conversations VALUES (1, 'Old chat', '', ?, ?)", (now, now))
    for position, (role, text) in enumerate([("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]):
        db.execute(
            "INSERT INTO messages (conversation_id, position, role, content, created_at, updated_at) "
            "VALUES (1, ?, ?, ?, ?, ?)",
            (position, role, text, now, now),
        )
    db.commit()
    db.close()
    store = ConversationStore(path)
    session = ChatSession(store)
    session.open(1)
    assert shown(session) == ["a", "b", "c", "d"]
    assert [m.parent_id for m in session.messages] == [None, *[m.id for m in session.messages[:-1]]]
    session.redo_from(3)
    turn(session, None, "D")
    assert shown(session) == ["a", "b", "c", "D"] and store.integrity_ok()
    store.delete(1)
    assert store.create_conversation("new") == 2  # the old chat's id was counted when its schema was brought up
    store.close()


def test_a_loop_of_parents_in_the_database_does_not_hang(store):
    session = ChatSession(store)
    turn(session, "one", "uno")
    first, second = store.messages(session.conversation_id)
    with store.transaction() as db:
        db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (second.id, first.id))
    again = ChatSession(store)
    again.open(session.conversation_id)
    assert len(again.messages) <= 2
    again.add_user_message("still works")  # and the chat goes on


def test_export_and_import_keep_every_branch_and_the_one_shown(store):
    session = ChatSession(store)
    turn(session, "Question", "First", reasoning="hmm")
    session.redo_from(1)
    turn(session, None, "Second")
    session.switch_version(1, -1)
    data = json.loads(json.dumps(export_json(store, session.conversation_id)))
    assert data["version"] == 2 and len(data["messages"]) == 3
    imported = ChatSession(store)
    imported.open(import_json(store, data))
    assert shown(imported) == ["Question", "First"] and imported.messages[1].reasoning == "hmm"
    assert imported.place(1).count == 2


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d["messages"][0].update(parent=2), "not earlier in the file"),
        (lambda d: d["messages"][1].update(key=0), "same key"),
        (lambda d: d.update(current=99), "current message"),
        (lambda d: d["messages"][1].update(reasoning=7), "reasoning is not text"),
        (lambda d: d.update(thinking="yes"), "thinking switch"),
    ],
)
def test_a_branching_export_with_a_bad_link_is_refused_whole(store, change, reason):
    session = ChatSession(store)
    turn(session, "Question", "Answer")
    data = export_json(store, session.conversation_id)
    change(data)
    before = len(store.conversations())
    with pytest.raises(ImportRefusedError, match=reason):
        import_json(store, data)
    assert len(store.conversations()) == before


def test_the_store_adds_after_the_branch_shown_unless_told_otherwise(store):
    conversation = store.create_conversation("Direct")
    first = store.add_message(conversation, "user", "one")
    second = store.add_message(conversation, "assistant", "uno")
    assert second.parent_id == first.id
    root = store.add_message(conversation, "user", "another start", first_turn=True)
    assert root.parent_id is None
    assert [m.content for m in store.branch(conversation)] == ["another start"]


def test_tool_calls_survive_export_and_import_and_read_as_text(store):
    from fara_desktop.chats.tool_rounds import ToolRound, ToolUse
    from fara_desktop.vocabulary.tools import ToolCall

    session = ChatSession(store)
    session.add_user_message("Time in Tokyo?")
    session.begin_reply("model")
    hostile = "19:42\n```\n![x](http://evil.example/x.png) <script>alert(1)</script>"
    call = ToolCall("abcDEF123", "get_current_time", '{"timezone": "Asia/Tokyo"}')
    session.add_tool_round(ToolRound("Checking.", "", (ToolUse(call, "time", "ran", hostile),)))
    session.end_reply("It is 19:42.", "complete")
    data = json.loads(json.dumps(export_json(store, session.conversation_id)))
    assert data["messages"][1]["tool_rounds"][0]["uses"][0]["result"] == hostile
    imported = ChatSession(store)
    imported.open(import_json(store, data))
    assert imported.messages[1].tool_rounds == session.messages[1].tool_rounds
    assert [m.role for m in imported.prompt_messages()] == ["system", "user", "assistant", "tool", "assistant"]
    markdown = export_markdown(store, session.conversation_id)
    block = markdown[markdown.index("<details><summary>Tool get_current_time (time) — ran</summary>"):]
    fence = "````"  # longer than the result's own ``` so the result cannot close it
    assert f"Result:\n\n{fence}\n{hostile}\n{fence}" in block
    # a file whose tool calls are not a list is refused whole; malformed entries inside are dropped
    data["messages"][1]["tool_rounds"] = "rm -rf"
    with pytest.raises(ImportRefusedError, match="tool calls are not a list"):
        import_json(store, data)
    data["messages"][1]["tool_rounds"] = [{"uses": [{"name": 7}]}, "x", {"text": "t", "uses": []}]
    assert ChatSession(store).store.messages(import_json(store, data))[1].tool_rounds == ()
