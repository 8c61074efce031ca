"""Conversations from ChatGPT, Open WebUI and LM Studio, written to their documented formats: branches, times,
titles, models and reasoning are kept; a file with one bad value is refused whole, with the reason."""

from __future__ import annotations

import json
import time

import pytest

from fara_desktop.chats.export import import_conversations
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore

T0 = 1_700_000_000.0


@pytest.fixture
def store(tmp_path):
    store = ConversationStore(tmp_path / "conversations.sqlite3")
    yield store
    store.close()


def _write(tmp_path, data, name="export.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _open(store, conversation_id) -> ChatSession:
    session = ChatSession(store)
    session.open(conversation_id)
    return session


# ---------------------------------------------------------------- ChatGPT


def _gpt_node(key, parent, children, role=None, text=None, when=None, kind="text", **extra):
    message = None
    if role is not None:
        content = {"content_type": kind, "parts": [text]} if kind in ("text", "multimodal_text") else {}
        content.update(extra.pop("content", {}))
        content["content_type"] = kind
        message = {
            "id": key, "author": {"role": role, "name": None, "metadata": {}}, "create_time": when,
            "update_time": None, "content": content, "status": "finished_successfully", "end_turn": True,
            "weight": 1.0, "metadata": extra.pop("metadata", {}), "recipient": "all",
        }  # fmt: skip
    return {"id": key, "message": message, "parent": parent, "children": children}


def chatgpt_conversation(title="Trip to Lisbon", current="a2"):
    mapping = {
        "root": _gpt_node("root", None, ["sys"]),
        "sys": _gpt_node("sys", "root", ["u1", "u1b"], "system", "", T0,
                         metadata={"is_visually_hidden_from_conversation": True}),
        "u1": _gpt_node("u1", "sys", ["th"], "user", "Plan a day in Lisbon", T0 + 1),
        "th": _gpt_node("th", "u1", ["a1"], "assistant", None, T0 + 2, kind="thoughts",
                        content={"thoughts": [{"summary": "Planning", "content": "Trams, then Belém."}]}),
        "a1": _gpt_node("a1", "th", [], "assistant", "Take tram 28, then go to Belém.", T0 + 3,
                        metadata={"model_slug": "o3"}),
        "u1b": _gpt_node("u1b", "sys", ["tool", "a2"], "user", "Plan a day in Porto", T0 + 10),
        "tool": _gpt_node("tool", "u1b", [], "tool", "search results", T0 + 11),
        "a2": _gpt_node("a2", "u1b", [], "assistant", "Walk along the Douro.", T0 + 12, kind="multimodal_text",
                        metadata={"model_slug": "gpt-4o"}),
    }  # fmt: skip
    mapping["a2"]["message"]["content"]["parts"] = ["Walk along ", {"asset_pointer": "file-service://x"}, "the Douro."]
    return {"title": title, "create_time": T0, "update_time": T0 + 12, "mapping": mapping, "current_node": current,
            "conversation_id": "c1", "id": "c1", "default_model_slug": "gpt-4o"}  # fmt: skip


def test_chatgpt_export_keeps_branches_titles_times_models_and_reasoning(store, tmp_path):
    second = chatgpt_conversation("Second chat", current="a1")
    result = import_conversations(store, _write(tmp_path, [chatgpt_conversation(), second], "conversations.json"))
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
    mapping = {"root": _gpt_node("root", None, ["m0"])}
    parent = "root"
    for i in range(10_000):
        key = f"m{i}"
        role = "user" if i % 2 == 0 else "assistant"
        mapping[key] = _gpt_node(key, parent, [f"m{i + 1}"], role, f"Message number {i} " * 5, T0 + i)
        parent = key
    data = [
        {"title": "Long", "create_time": T0, "update_time": T0 + 10_000, "mapping": mapping, "current_node": parent}
    ]
    path = _write(tmp_path, data)
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
        import_conversations(store, _write(tmp_path, [chatgpt_conversation(), bad]))
    assert store.conversations() == []  # not even the good first conversation


# ---------------------------------------------------------------- Open WebUI


WEBUI_REPLY = (
    '<details type="reasoning" done="true" duration="3">\n<summary>Thought for 3 seconds</summary>\n'
    "> Rayleigh scattering.\n> Shorter wavelengths scatter more.\n</details>\nBecause of **Rayleigh scattering**."
)


def open_webui_chat():
    messages = {
        "u": {"id": "u", "parentId": None, "childrenIds": ["a", "b"], "role": "user", "content": "Why is the sky blue?",
              "timestamp": int(T0), "models": ["qwen3:8b"]},
        "a": {"id": "a", "parentId": "u", "childrenIds": [], "role": "assistant", "model": "qwen3:8b",
              "modelName": "Qwen3 8B", "timestamp": int(T0) + 5, "done": True,
              "content": WEBUI_REPLY},
        "b": {"id": "b", "parentId": "u", "childrenIds": [], "role": "assistant", "model": "qwen3:8b",
              "timestamp": int(T0) + 9, "content": "Short answer: scattering."},
    }  # fmt: skip
    return {
        "id": "chat-1", "user_id": "me", "title": "Sky colour", "created_at": int(T0), "updated_at": int(T0) + 9,
        "chat": {"id": "", "title": "Sky colour", "models": ["qwen3:8b"], "timestamp": int(T0 * 1000),
                 "history": {"messages": messages, "currentId": "a"}, "messages": list(messages.values())},
        "archived": False, "pinned": False, "meta": {}, "folder_id": None,
    }  # fmt: skip


def test_open_webui_export_keeps_regenerations_and_moves_reasoning_out_of_the_answer(store, tmp_path):
    result = import_conversations(store, _write(tmp_path, [open_webui_chat()]))
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
    result = import_conversations(store, _write(tmp_path, [chat]))
    assert _open(store, result.conversation_ids[0]).messages[0].content == "Why is the sky blue?"


# ---------------------------------------------------------------- LM Studio


def lm_studio_conversation():
    def user(text):
        return {"type": "singleStep", "role": "user", "content": [{"type": "text", "text": text}]}

    def assistant(text, thinking=None):
        steps = []
        if thinking:
            style = {"type": "thinking", "ended": True, "title": "Thought for 2.10 seconds"}
            content = [{"type": "text", "text": thinking}]
            steps.append({"type": "contentBlock", "stepIdentifier": "t", "style": style, "content": content})
        steps.append({"type": "contentBlock", "stepIdentifier": "s", "content": [{"type": "text", "text": text}],
                      "genInfo": {"stats": {"tokensPerSecond": 12.5}}})  # fmt: skip
        return {"type": "multiStep", "role": "assistant", "steps": steps,
                "senderInfo": {"senderName": "lmstudio-community/Qwen3-8B-GGUF"}}  # fmt: skip

    return {
        "name": "Haiku practice", "pinned": False, "createdAt": int(T0 * 1000), "preset": "", "tokenCount": 80,
        "systemPrompt": "You are a poet.",
        "messages": [
            {"versions": [user("Write a haiku about rain")], "currentlySelected": 0},
            {"versions": [assistant("Rain taps the window", "Five, seven, five."), assistant("Grey sky, soft drum")],
             "currentlySelected": 1},
            {"versions": [user("Another one")], "currentlySelected": 0},
            {"versions": [assistant("Puddles hold the sky")], "currentlySelected": 0},
        ],
        "lastUsedModel": {"identifier": "qwen3-8b"}, "clientInput": "", "notes": [],
    }  # fmt: skip


def test_lm_studio_conversation_keeps_versions_system_prompt_and_thinking(store, tmp_path):
    path = _write(tmp_path, lm_studio_conversation(), "1730000000000.conversation.json")
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
        import_conversations(store, _write(tmp_path, data))
    assert store.conversations() == []
