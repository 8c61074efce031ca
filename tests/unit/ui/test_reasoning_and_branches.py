"""Reasoning replies and branching chats in the window, on the scripted backend: the reasoning streams into its
own section (open while thinking, folded once the answer starts), is copied and stored apart from the answer;
‹ 2/3 › switches versions; "Branch from here" opens a new chat; the Think switch is kept per chat."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication

from tests.helpers.chatting import ask
from tests.helpers.fakes import FakeBackend

REASONING_REPLY = [
    "<think>",
    "\n",
    "The user",
    " wants",
    " a sum.",
    " 2+2=4.",
    "\n",
    "</think>",
    "\n\n",
    "It is **4**.",
]
SHOTS = Path(os.environ.get("FARA_SCREENSHOTS", "")) if os.environ.get("FARA_SCREENSHOTS") else None


def _shot(win, name: str) -> None:
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        win.grab().save(str(SHOTS / name))


def test_a_reasoning_reply_streams_into_its_own_section_then_folds_away(window, qtbot):
    gate = threading.Semaphore(0)
    win = window(FakeBackend(words=REASONING_REPLY, gate=gate))
    win.composer.setPlainText("What is 2+2?")
    win.send_button.click()
    gate.release(5)  # up to " a sum." (the worker sends pieces in batches: at least "The user" arrives)
    qtbot.waitUntil(
        lambda: (
            win.chat_view.streaming_message is not None
            and "The user" in win.chat_view.streaming_message.reasoning.body.text()
        ),
        timeout=5000,
    )
    streaming = win.chat_view.streaming_message
    section = streaming.reasoning
    assert section.isVisibleTo(streaming) and section.is_open and section.header.text() == "Thinking…"
    assert "<think>" not in section.body.text() and streaming.text == ""
    assert win.status_label.text() == "Thinking…"
    _shot(win, "reasoning-while-thinking.png")

    with qtbot.waitSignal(win.replyFinished, timeout=5000) as finished:
        gate.release(100)
    event = finished.args[0]
    assert (event.reasoning, event.text) == ("The user wants a sum. 2+2=4.", "It is **4**.")
    assert event.stats.reasoning_tokens == 8  # <think> … </think>
    reply = win.chat_view.messages()[-1]
    assert reply.text == "It is **4**." and not reply.reasoning.is_open
    assert reply.reasoning.header.text().startswith("Thought")
    reply.reasoning.header.click()  # opens again on demand
    assert reply.reasoning.is_open and reply.reasoning.body.isVisibleTo(reply)
    reply.reasoning.header.click()
    reply.action_buttons["copy"].click()
    assert QGuiApplication.clipboard().text() == "It is **4**."  # the answer only
    stored = win.store.messages(win.session.conversation_id)[-1]
    assert (stored.content, stored.reasoning) == ("It is **4**.", "The user wants a sum. 2+2=4.")
    assert win.hardware_panel._values["Thinking"].text().endswith("8 tokens")
    _shot(win, "reasoning-after.png")

    # the next turn sends the answer as content and the reasoning apart (the template decides)
    backend: FakeBackend = win.bridge.worker._backend  # type: ignore[assignment]
    backend.words = ["Fine."]
    ask(qtbot, win, "And 3+3?")
    earlier = next(m for m in backend.prompts[-1] if m.role == "assistant")
    assert (earlier.content, earlier.reasoning) == ("It is **4**.", "The user wants a sum. 2+2=4.")

    # reopening the chat shows the reasoning folded, with its time
    win.new_chat()
    win.open_conversation(stored.conversation_id)
    reopened = win.chat_view.messages()[1]
    assert reopened.reasoning.isVisibleTo(reopened) and not reopened.reasoning.is_open
    assert reopened.reasoning.header.text().startswith("Thought")


def test_versions_switch_with_the_arrows_and_the_conversation_follows(window, qtbot):
    backend = FakeBackend(words=["First answer"])
    win = window(backend)
    ask(qtbot, win, "Question")
    ask(qtbot, win, "Follow-up")
    backend.words = ["Second answer"]
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.chat_view.messages()[1].action_buttons["regenerate"].hide()  # only the last reply offers it
        win.chat.regenerate(win.chat_view.messages()[-1])
    replies = [w for w in win.chat_view.messages() if w.role == "assistant"]
    assert [w.text for w in replies] == ["First answer", "Second answer"]
    assert replies[-1].version_label.text() == "2/2"
    _shot(win, "branched-message.png")

    # edit the first question: a new branch; the old one (with its follow-up) is one click away
    win.chat_view.messages()[0].action_buttons["edit"].click()
    win.composer.setPlainText("Another question")
    backend.words = ["Third answer"]
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    assert [w.text for w in win.chat_view.messages()] == ["Another question", "Third answer"]
    first = win.chat_view.messages()[0]
    assert first.version_label.text() == "2/2" and first.action_buttons["next"].isEnabled() is False
    first.action_buttons["previous"].click()
    texts = [w.text for w in win.chat_view.messages()]
    assert texts == ["Question", "First answer", "Follow-up", "Second answer"]
    assert win.chat_view.messages()[-1].version_label.text() == "2/2"
    win.chat_view.messages()[-1].action_buttons["previous"].click()
    assert win.chat_view.messages()[-1].text == "First answer"
    assert win.chat_view.messages()[-1].version_label.text() == "1/2"
    # and the model sees the branch on screen
    backend.words = ["ok"]
    ask(qtbot, win, "Go on")
    assert [m.content for m in backend.prompts[-1] if m.role != "system"] == [
        "Question", "First answer", "Follow-up", "First answer", "Go on",
    ]  # fmt: skip


def test_branch_from_here_opens_a_new_chat_with_the_history_up_to_there(window, qtbot):
    win = window(FakeBackend(words=["Answer"]))
    ask(qtbot, win, "One")
    ask(qtbot, win, "Two")
    original = win.session.conversation_id
    win.chat_view.messages()[1].action_buttons["branch"].click()
    assert win.session.conversation_id != original
    assert [w.text for w in win.chat_view.messages()] == ["One", "Answer"]
    assert win.sidebar.ids()[:2] == [win.session.conversation_id, original] or set(win.sidebar.ids()) >= {
        original, win.session.conversation_id,
    }  # fmt: skip
    assert len(win.store.messages(original)) == 4


def test_the_think_switch_shows_for_models_that_have_it_and_is_kept_per_chat(window, qtbot):
    plain = window(FakeBackend())
    assert not plain.thinking_box.isVisibleTo(plain)

    backend = FakeBackend()
    backend.thinking_switch = True
    win = window(backend)
    assert win.thinking_box.isVisibleTo(win) and win.thinking_box.isChecked()
    win.thinking_box.setChecked(False)
    ask(qtbot, win, "Quick one")
    assert backend.thinking[-1] is False
    chat = win.session.conversation_id
    win.new_chat()
    assert win.thinking_box.isChecked()
    ask(qtbot, win, "Take your time")
    assert backend.thinking[-1] is True
    win.open_conversation(chat)
    assert not win.thinking_box.isChecked()


def test_the_think_switch_starts_where_the_model_s_template_starts(window, qtbot):
    """Issue 54: Qwen3.5 0.8B's template answers directly unless asked to think; a new chat's switch starts off
    with it, a chat whose switch was set keeps its own, and the first message is sent as the switch shows."""
    backend = FakeBackend(words=["Sure"])
    backend.thinking_switch, backend.thinking_default = True, False
    win = window(backend)
    assert win.thinking_box.isVisibleTo(win) and not win.thinking_box.isChecked()
    ask(qtbot, win, "Quick one")
    assert backend.thinking[-1] is False
    chat = win.session.conversation_id
    win.new_chat()
    assert not win.thinking_box.isChecked()
    win.thinking_box.setChecked(True)
    ask(qtbot, win, "Take your time")
    assert backend.thinking[-1] is True
    thoughtful = win.session.conversation_id
    win.open_conversation(chat)
    assert not win.thinking_box.isChecked()
    win.open_conversation(thoughtful)
    assert win.thinking_box.isChecked()


def test_importing_a_chatgpt_export_from_the_window_opens_the_chats(window, qtbot, tmp_path, monkeypatch):
    import json

    from PySide6.QtWidgets import QFileDialog

    from tests.helpers.chat_exports import chatgpt_conversation

    win = window(FakeBackend())
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation(), chatgpt_conversation("Second")]), encoding="utf-8")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a, **_k: (str(export), ""))
    win.conversations.import_chat()
    assert win.task_progress.isVisibleTo(win) and "Importing conversations.json" in win.task_progress.label.text()
    with qtbot.waitSignal(win.conversations.task.done, timeout=30000):
        pass
    assert not win.task_progress.isVisibleTo(win)
    assert win.status_label.text() == "conversations.json: 2 chats added from ChatGPT (conversations.json)"
    assert [w.text for w in win.chat_view.messages()] == ["Plan a day in Porto", "Walk along the Douro."]
    assert win.chat_view.messages()[0].version_label.text() == "2/2"
    assert len(win.sidebar.ids()) == 2

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([chatgpt_conversation(current="a1") | {"title": 7}]), encoding="utf-8")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a, **_k: (str(broken), ""))
    win.conversations.import_chat()
    with qtbot.waitSignal(win.conversations.task.failed, timeout=30000):
        pass
    notice = win.notice_bar.texts("error")[-1]
    assert "broken.json was not imported" in notice and "title is not text" in notice
    assert [m.role for m in win.chat_view.messages()] == ["user", "assistant"]  # the open chat is not written into
    assert win.status_label.text() == "broken.json was not imported"  # not the earlier "2 chats added"
    assert len(win.sidebar.ids()) == 2


def test_import_and_export_run_off_the_window_thread_with_progress_and_stop(window, qtbot, tmp_path, monkeypatch):
    import json

    from fara_desktop.system.sandbox import SandboxStoppedError
    from fara_desktop.ui.controllers import conversations_controller
    from tests.helpers.chat_exports import chatgpt_conversation

    win = window(FakeBackend())
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation(f"Chat {n}") for n in range(30)]), encoding="utf-8")
    on_window_thread = []
    real_read = conversations_controller.read_import

    def read_and_note_thread(path, should_stop=None):
        import threading

        on_window_thread.append(threading.current_thread() is threading.main_thread())
        return real_read(path, should_stop=should_stop)

    monkeypatch.setattr(conversations_controller, "read_import", read_and_note_thread)
    with qtbot.waitSignal(win.conversations.import_file(export).done, timeout=30000):
        pass
    assert on_window_thread == [False] and len(win.sidebar.ids()) == 30

    totals: list[tuple[int, int]] = []
    win.task_progress.progressed.connect(lambda done, total: totals.append((done, total)))
    with qtbot.waitSignal(win.conversations.export_to(tmp_path / "out", None).done, timeout=30000):
        pass
    assert totals[-1] == (30, 30) and len(list((tmp_path / "out").glob("*.json"))) == 30
    assert win.status_label.text().startswith("Exported 60 files to ")

    def wait_for_stop(path, should_stop=None):
        assert win.conversations._stop_task.wait(timeout=30)  # what should_stop() reads: set by Stop
        assert should_stop()
        raise SandboxStoppedError("stopped")

    monkeypatch.setattr(conversations_controller, "read_import", wait_for_stop)
    call = win.conversations.import_file(export)
    assert win.conversations.import_file(export) is None  # one file task at a time
    assert "wait for it, or stop it" in win.status_label.text()
    with qtbot.waitSignal(call.failed, timeout=30000):
        win.task_progress.stop_button.click()
    assert win.status_label.text() == "Import of conversations.json stopped; nothing was imported"
    assert len(win.sidebar.ids()) == 30 and not win.task_progress.isVisibleTo(win)


def test_export_stops_between_chats_and_keeps_the_files_written(tmp_path):
    from fara_desktop.chats.export import ExportStoppedError, export_conversations
    from fara_desktop.chats.storage import ConversationStore

    store = ConversationStore(tmp_path / "c.sqlite3")
    for n in range(5):
        store.create_conversation(f"Chat {n}")
    seen: list[int] = []
    with pytest.raises(ExportStoppedError, match="after 4 files"):
        export_conversations(store, tmp_path / "out", on_progress=lambda done, total: seen.append(done),
                             should_stop=lambda: len(seen) == 2)  # fmt: skip
    assert seen == [1, 2] and len(list((tmp_path / "out").iterdir())) == 4
    store.close()


def test_quitting_stops_an_import_and_waits_for_it_before_the_chats_close(window, qtbot, tmp_path, monkeypatch):
    """Issue 50: quitting left an import running on its own connection while the window closed the chats (it was in
    no one's shutdown order). Now every job is stopped stage after stage (``app.jobs``) and nothing is left."""
    import json

    from fara_desktop.system.sandbox import SandboxStoppedError
    from fara_desktop.ui.controllers import conversations_controller
    from tests.helpers.chat_exports import chatgpt_conversation

    win = window(FakeBackend())
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation("Chat")]), encoding="utf-8")
    reading = threading.Event()
    ended: list[bool] = []

    def wait_for_stop(path, should_stop=None):
        reading.set()
        stopped = win.conversations._stop_task.wait(timeout=30)
        ended.append(stopped and should_stop())
        raise SandboxStoppedError("stopped")

    monkeypatch.setattr(conversations_controller, "read_import", wait_for_stop)
    win.conversations.import_file(export)
    assert reading.wait(30)
    assert [job.name for job in win.core.jobs.running() if job.name.startswith("Importing")] == [
        "Importing conversations.json…"]  # fmt: skip
    win.close()
    assert ended == [True]  # stopped by quitting, and ended before the close returned
    assert win.core.jobs.running() == []


def test_an_import_that_finishes_as_the_window_closes_leaves_the_window_alone(window, qtbot, tmp_path, monkeypatch):
    """Issue 61, suspected: an import finishing as the window closes. Confirmed: quitting waited for the import's
    job, which ended having written its chats; its answer then reached the window after the chats' database was
    closed, and opening the imported chat raised there. The chats are kept; the closed window is not touched."""
    import json

    from fara_desktop.ui import background
    from fara_desktop.ui.controllers import conversations_controller
    from tests.helpers.chat_exports import chatgpt_conversation

    win = window(FakeBackend())
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([chatgpt_conversation("Imported at the last moment")]), encoding="utf-8")
    real_read = conversations_controller.read_import

    def finishes_as_the_quit_begins(path, should_stop=None):  # type: ignore[no-untyped-def]
        assert win.conversations._stop_task.wait(timeout=30)  # the quit asked the import to stop...
        return real_read(path)  # ...as it finished reading: its chats are written all the same

    monkeypatch.setattr(conversations_controller, "read_import", finishes_as_the_quit_begins)
    call = win.conversations.import_file(export)
    database = win.core.store.path
    win.close()
    qtbot.waitUntil(lambda: call not in background.BackgroundCall._running, timeout=30_000)  # its answer delivered
    from fara_desktop.chats.storage import ConversationStore

    store = ConversationStore(database)
    try:
        assert [c.title for c in store.conversations("")] == ["Imported at the last moment"]
    finally:
        store.close()
