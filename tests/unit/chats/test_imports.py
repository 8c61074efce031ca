"""Conversations from ChatGPT, Open WebUI and LM Studio, written to their documented formats: branches, times,
titles, models and reasoning are kept; a file with one bad value is refused whole, with the reason."""

from __future__ import annotations

import time

import pytest

from fara_desktop.chats.export import import_conversations
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.chats.session import ChatSession
from tests.helpers.chat_exports import (
    T0,
    chatgpt_conversation,
    gpt_node,
    lm_studio_conversation,
    open_webui_chat,
    write_export,
)


def _open(store, conversation_id) -> ChatSession:
    session = ChatSession(store)
    session.open(conversation_id)
    return session


# ---------------------------------------------------------------- ChatGPT


def test_chatgpt_export_keeps_branches_titles_times_models_and_reasoning(store, tmp_path):
    second = chatgpt_conversation("Second chat", current="a1")
    result = import_conversations(store, write_export(tmp_path, [chatgpt_conversation(), second], "conversations.json"))
    assert result.format_name.startswith("ChatGPT") and len(result.conversation_ids) == 2
    session = _open(store, result.conversation_ids[0])
    summary = store.conversation(result.conversation_ids[0])
    assert summary.title == "Trip to Lisbon" and summary.created_at == T0
    # the branch ChatGPT showed (current_node), with the edited first message as a sibling
    assert [m.content for m in session.messages] == ["Plan a day in Porto", "Walk along the Douro."]
    assert session.place(0).count == 2 and session.messages[1].model == "gpt-4o"
    assert session.messages[0].created_at == T0 + 10
    assert session.switch_version(0, -1)
    reply = session.messages[1]
    assert (reply.content, reply.reasoning, reply.model) == (
        "Take tram 28, then go to Belém.",
        "Trams, then Belém.",
        "o3",
    )
    assert next(m.content for m in _open(store, result.conversation_ids[1]).messages) == "Plan a day in Lisbon"


def test_a_10000_message_chatgpt_conversation_imports_in_seconds(store, tmp_path):
    mapping = {"root": gpt_node("root", None, ["m0"])}
    parent = "root"
    for i in range(10_000):
        key = f"m{i}"
        role = "user" if i % 2 == 0 else "assistant"
        mapping[key] = gpt_node(key, parent, [f"m{i + 1}"], role, f"Message number {i} " * 5, T0 + i)
        parent = key
    data = [
        {"title": "Long", "create_time": T0, "update_time": T0 + 10_000, "mapping": mapping, "current_node": parent}
    ]
    path = write_export(tmp_path, data)
    started = time.perf_counter()
    result = import_conversations(store, path)
    elapsed = time.perf_counter() - started
    print(f"\n10,000 messages ({path.stat().st_size / 1e6:.1f} MB) imported in {elapsed:.2f} s")
    session = _open(store, result.conversation_ids[0])
    assert len(session.messages) == 10_000 and session.messages[-1].content.startswith("Message number 9999")
    assert elapsed < 10


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda c: c["mapping"]["root"].update(parent="a2"), "loop"),
        (lambda c: c["mapping"]["u1"]["message"].update(create_time="yesterday"), "not a time"),
        (lambda c: c["mapping"]["u1"]["message"].update(create_time=1e30), "out of range"),
        (lambda c: c.update(title=["not", "text"]), "title is not text"),
        (lambda c: c["mapping"]["a1"]["message"]["content"].update(parts="text"), "not a list"),
        (lambda c: c["mapping"].update(extra="not a node"), "not an object"),
    ],
)
def test_a_chatgpt_file_with_one_bad_value_is_refused_whole(store, tmp_path, change, reason):
    bad = chatgpt_conversation()
    change(bad)
    with pytest.raises(ImportRefusedError, match=reason):
        import_conversations(store, write_export(tmp_path, [chatgpt_conversation(), bad]))
    assert store.conversations() == []  # not even the good first conversation


# ---------------------------------------------------------------- Open WebUI


def test_open_webui_export_keeps_regenerations_and_moves_reasoning_out_of_the_answer(store, tmp_path):
    result = import_conversations(store, write_export(tmp_path, [open_webui_chat()]))
    assert result.format_name == "Open WebUI"
    session = _open(store, result.conversation_ids[0])
    question, reply = session.messages
    assert question.content == "Why is the sky blue?" and question.created_at == T0
    assert reply.content == "Because of **Rayleigh scattering**."
    assert reply.reasoning == "Rayleigh scattering.\nShorter wavelengths scatter more."
    assert reply.model == "Qwen3 8B" and session.place(1).count == 2
    assert store.conversation(result.conversation_ids[0]).title == "Sky colour"


def test_open_webui_message_that_follows_a_missing_parent_becomes_a_first_turn(store, tmp_path):
    chat = open_webui_chat()
    chat["chat"]["history"]["messages"]["u"]["parentId"] = "gone"
    result = import_conversations(store, write_export(tmp_path, [chat]))
    assert _open(store, result.conversation_ids[0]).messages[0].content == "Why is the sky blue?"


# ---------------------------------------------------------------- LM Studio


def test_lm_studio_conversation_keeps_versions_system_prompt_and_thinking(store, tmp_path):
    path = write_export(tmp_path, lm_studio_conversation(), "1730000000000.conversation.json")
    result = import_conversations(store, path)
    assert result.format_name == "LM Studio"
    session = _open(store, result.conversation_ids[0])
    assert session.system_prompt == "You are a poet."
    assert [m.content for m in session.messages] == [
        "Write a haiku about rain", "Grey sky, soft drum", "Another one", "Puddles hold the sky",
    ]  # fmt: skip
    assert session.place(1) == session.tree.place(session.messages[1]) and session.place(1).count == 2
    assert session.switch_version(1, -1)
    first = session.messages[1]
    assert (first.content, first.reasoning) == ("Rain taps the window", "Five, seven, five.")
    assert first.model == "lmstudio-community/Qwen3-8B-GGUF" and session.messages[0].created_at == T0


# ---------------------------------------------------------------- anything else


@pytest.mark.parametrize(
    "data",
    [{"hello": "world"}, [1, 2, 3], "just text", {"messages": [{"role": "user", "content": "hi"}]}],
    ids=["object", "numbers", "string", "openai-style"],
)
def test_a_file_in_no_known_format_is_refused_with_the_formats_we_read(store, tmp_path, data):
    with pytest.raises(ImportRefusedError, match=r"ChatGPT.*Open WebUI.*LM Studio"):
        import_conversations(store, write_export(tmp_path, data))
    assert store.conversations() == []
