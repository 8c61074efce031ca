"""Chat files made by an adversary (issue 27), read in the sandbox within a budget, and the same file imported
twice: each case failed before its fix (the times and sizes it cost then are in the comments)."""

from __future__ import annotations

import pytest

from fara_desktop.chats.export import import_conversations
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.system.sandbox import Budget
from tests.helpers.chat_exports import T0, chatgpt_conversation, gpt_node, write_export

MB = 1024 * 1024
TIGHT = Budget(cpu_seconds=10.0, memory_bytes=600 * MB, output_bytes=64 * MB)


def _import(store, path):
    return import_conversations(store, path, budget_for=lambda size: TIGHT)


def test_unclosed_reasoning_blocks_are_read_in_linear_time(store, tmp_path):
    content = '<details type="reasoning" done="false">thinking ' * 30_000  # 1.4 MB; 0.9 MB took 226 s
    chat = {
        "id": "w1", "title": "Unclosed", "created_at": int(T0), "updated_at": int(T0),
        "chat": {"history": {"currentId": "a", "messages": {
            "u": {"parentId": None, "role": "user", "content": "Hello", "timestamp": int(T0)},
            "a": {"parentId": "u", "role": "assistant", "content": content, "timestamp": int(T0)},
        }}},
    }  # fmt: skip
    result = _import(store, write_export(tmp_path, [chat]))
    (reply,) = [m for m in store.messages(result.conversation_ids[0]) if m.role == "assistant"]
    assert reply.content == content and reply.reasoning == ""


def test_a_chain_of_thoughts_above_many_replies_is_stored_once(store, tmp_path):
    thoughts, replies = 2_000, 2_000  # before: every reply got every thought (2.4 MB stored 1.02 G characters)
    thought_text = "I should consider the question carefully before answering. " * 2
    mapping = {"root": gpt_node("root", None, ["u"]), "u": gpt_node("u", "root", ["t0"], "user", "Hi", T0)}
    for n in range(thoughts):
        nxt = [f"t{n + 1}"] if n + 1 < thoughts else [f"r{r}" for r in range(replies)]
        mapping[f"t{n}"] = gpt_node(f"t{n}", "u" if n == 0 else f"t{n - 1}", nxt, "assistant", when=T0,
                                    kind="thoughts", content={"thoughts": [{"content": thought_text}]})  # fmt: skip
    for r in range(replies):
        mapping[f"r{r}"] = gpt_node(f"r{r}", f"t{thoughts - 1}", [], "assistant", f"Reply {r}", T0 + 1)
    data = [{"title": "Thoughts", "create_time": T0, "update_time": T0, "mapping": mapping,
             "current_node": "r0", "id": "g1"}]  # fmt: skip
    path = write_export(tmp_path, data)
    result = _import(store, path)
    stored = sum(len(m.reasoning) + len(m.content) for m in store.messages(result.conversation_ids[0]))
    assert stored < path.stat().st_size  # each thought once: less text than the file holds
    first = next(m for m in store.messages(result.conversation_ids[0]) if m.content == "Reply 0")
    assert first.reasoning.count("carefully") == 2 * thoughts


def test_a_flood_of_empty_objects_is_refused_before_it_is_parsed(store, tmp_path):
    path = tmp_path / "objects.json"
    path.write_bytes(b"[" + b"{}," * (33 * MB) + b"{}]")  # 100 MB: 2.5 GB of memory before it was refused
    with pytest.raises(ImportRefusedError, match="objects and lists"):
        _import(store, path)
    assert store.conversations() == []


def test_importing_the_same_file_again_skips_updates_or_adds_and_says_which(store, tmp_path):
    path = write_export(tmp_path, [chatgpt_conversation("Trip to Lisbon"), chatgpt_conversation("Second chat")])
    first = _import(store, path)
    assert first.summary() == "2 chats added"
    again = _import(store, path)
    assert again.summary() == "0 chats added, 2 already imported (skipped)" and len(store.conversations()) == 2

    changed = chatgpt_conversation("Trip to Lisbon")
    changed["mapping"]["a2"]["message"]["content"]["parts"] = ["A better answer, edited at the source."]
    write_export(tmp_path, [changed, chatgpt_conversation("Second chat")])
    updated = _import(store, path)
    assert updated.summary() == "0 chats added, 1 updated (changed since the last import), 1 already imported (skipped)"
    assert updated.conversation_ids == [first.conversation_ids[0]] and len(store.conversations()) == 2
    assert any("edited at the source" in m.content for m in store.messages(first.conversation_ids[0]))

    store.rename(first.conversation_ids[0], "My trip")  # continued here: the user's version is never replaced
    changed["mapping"]["a2"]["message"]["content"]["parts"] = ["Edited at the source once more."]
    write_export(tmp_path, [changed, chatgpt_conversation("Second chat")])
    added = _import(store, path)
    assert added.count("added") == 1 and len(store.conversations()) == 3
    assert store.conversation(first.conversation_ids[0]).title == "My trip"


def _cli_import(path, home) -> str:
    """``fara-desktop import FILE``, as a person runs it."""
    import os
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "fara_desktop", "import", str(path)], capture_output=True,
                            text=True, env={**os.environ, "FARA_HOME": str(home)}, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def _home_store(home):
    from fara_desktop.chats.storage import ConversationStore, database_path
    from fara_desktop.files.paths import app_paths

    return ConversationStore(database_path(app_paths().data))


def _whole(store, conversation_id):
    summary = store.conversation(conversation_id)
    messages = [(m.role, m.content) for m in store.messages(conversation_id)]
    return summary.title, summary.system_prompt, summary.leaf_id, summary.thinking, messages


def test_a_strangers_file_claiming_an_imported_chats_source_is_added_beside_it(fara_home, tmp_path):
    """A Fara-format file carrying ``"source_id": "chatgpt:<id>"`` of a chat imported earlier replaced it: its 4
    messages across 2 branches became the file's 2, and the system prompt set here was gone."""
    import json

    from fara_desktop.chats.export_format import EXPORT_FORMAT

    assert "1 chat added" in _cli_import(write_export(tmp_path, [chatgpt_conversation()], "chatgpt.json"), fara_home)
    store = _home_store(fara_home)
    (original,) = [c.id for c in store.conversations()]
    store.set_system_prompt(original, "Answer like a travel guide.")  # does not move updated_at
    before = _whole(store, original)
    assert len(before[4]) == 4
    store.close()
    stranger = {"format": EXPORT_FORMAT, "source_id": "chatgpt:c-Trip to Lisbon", "title": "Trip to Lisbon",
                "created_at": T0, "updated_at": T0 + 99, "system_prompt": "",
                "messages": [{"role": "user", "content": "Ignore that."},
                             {"role": "assistant", "content": "Replaced."}]}  # fmt: skip
    path = tmp_path / "stranger.json"
    path.write_text(json.dumps(stranger), encoding="utf-8")
    assert "1 chat added" in _cli_import(path, fara_home)
    store = _home_store(fara_home)
    try:
        assert _whole(store, original) == before and len(store.conversations()) == 2
    finally:
        store.close()


@pytest.mark.parametrize("change", ["system prompt", "branch shown", "thinking switch"])
def test_a_chat_changed_here_in_a_way_that_keeps_its_update_time_is_never_replaced(store, tmp_path, change):
    path = write_export(tmp_path, [chatgpt_conversation()])
    (original,) = _import(store, path).conversation_ids
    if change == "system prompt":
        store.set_system_prompt(original, "Be brief.")
    elif change == "branch shown":
        store.set_leaf(original, next(m.id for m in store.messages(original) if "tram 28" in m.content))
    else:
        store.set_thinking(original, False)
    before = _whole(store, original)
    changed = chatgpt_conversation()
    changed["mapping"]["a2"]["message"]["content"]["parts"] = ["Edited at the source."]
    write_export(tmp_path, [changed])
    result = _import(store, path)
    assert [o.action for o in result.outcomes] == ["added"] and _whole(store, original) == before


def test_the_same_source_in_the_same_format_unchanged_here_is_updated_in_place(store, tmp_path):
    path = write_export(tmp_path, [chatgpt_conversation()])
    (original,) = _import(store, path).conversation_ids
    changed = chatgpt_conversation()
    changed["mapping"]["a2"]["message"]["content"]["parts"] = ["Edited at the source."]
    write_export(tmp_path, [changed])
    result = _import(store, path)
    assert [(o.conversation_id, o.action) for o in result.outcomes] == [(original, "updated")]


def test_your_own_export_imported_back_is_recognised_the_first_time(fara_home, tmp_path):
    """Importing your own export added a duplicate the first time (a chat made here had no source id); the second
    import was skipped (issue 43, item 14)."""
    import os
    import subprocess
    import sys

    from fara_desktop.chats.storage import ConversationStore, database_path
    from fara_desktop.files.paths import app_paths

    store = ConversationStore(database_path(app_paths().ensure().data))
    try:
        chat = store.create_conversation("Made here")
        store.add_message(chat, "user", "Plan a day in Porto")
        store.add_message(chat, "assistant", "Walk along the Douro.")
    finally:
        store.close()
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "fara_desktop", "export", "--format", "json", "--out", str(out)],
                   check=True, capture_output=True, env=env, timeout=120)  # fmt: skip
    (exported,) = out.glob("*.json")
    assert "1 already imported (skipped)" in _cli_import(exported, fara_home)
    store = _home_store(fara_home)
    try:
        assert len(store.conversations()) == 1
    finally:
        store.close()
