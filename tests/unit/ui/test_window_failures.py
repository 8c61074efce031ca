"""The window under failure: a failing disk, a failed regenerate, a closed owner — never wedged, nothing lost."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from PySide6.QtWidgets import QWidget

from fara_desktop.chats.storage import StorageError
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.main_window import MainWindow
from tests.helpers.chatting import ask
from tests.helpers.failing_disk import allow_writes, refuse_writes
from tests.helpers.fakes import FakeBackend


def _notices(win: MainWindow) -> list[str]:
    return win.notice_bar.texts("error")


def _deleted(widget: QWidget) -> bool:
    import shiboken6

    return not shiboken6.isValid(widget)


def test_a_background_result_is_not_delivered_to_a_closed_owner(qtbot):
    owner = QWidget()
    release = threading.Event()
    delivered: list[object] = []
    call = BackgroundCall(lambda: release.wait(10) and "result", owner)
    call.done.connect(delivered.append)
    call.start()
    owner.deleteLater()
    qtbot.waitUntil(lambda: _deleted(owner), timeout=5000)
    release.set()
    qtbot.waitUntil(lambda: call not in BackgroundCall._running, timeout=5000)
    assert delivered == []


def test_a_background_task_that_breaks_leaves_its_traceback_in_the_log(qtbot, caplog):
    """Background work caught every exception and logged nothing: a bug there left no trace (issue 42)."""
    import logging

    caplog.set_level(logging.INFO)

    def broken() -> None:
        raise ZeroDivisionError("a bug in the background")

    call = BackgroundCall(broken)
    with qtbot.waitSignal(call.failed, timeout=5000) as failed:
        call.start()
    assert isinstance(failed.args[0], ZeroDivisionError)
    (record,) = [r for r in caplog.records if r.name == "fara_desktop.ui.background"]
    assert record.exc_info is not None and "ZeroDivisionError" in caplog.text


def test_a_reopened_chat_shows_when_each_message_was_written(qtbot, window):
    win = window()
    ask(qtbot, win, "What time is it?")
    conversation = win.session.conversation_id
    win.store._db.execute("UPDATE messages SET created_at = 1600000000")  # 13 Sep 2020
    win.new_chat()
    win.open_conversation(conversation)
    titles = [w.title.text() for w in win.chat_view.messages()]
    moment = time.localtime(1600000000)
    expected = f"{moment.tm_mday} Sep 2020 {time.strftime('%H:%M', moment)}"  # another year: with its year
    assert len(titles) == 2 and all(t.endswith(expected) for t in titles)


def test_a_disk_that_refuses_the_final_save_does_not_wedge_the_window(qtbot, window):
    gate = threading.Semaphore(0)
    win = window(FakeBackend(words=["Hello", " there", ", friend", "!"], gate=gate))
    win.composer.setPlainText("Say hello")
    win.send_button.click()  # the question is saved; from here on the disk refuses every message write
    refuse_writes(win.store, "messages")
    win.session._last_save -= 2  # the first batch of the reply tries a periodic save, which fails
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        gate.release(10)
    assert win.send_button.isEnabled() and not win.stop_button.isEnabled()
    assert len(_notices(win)) == 1  # one notice, not one per failed save
    assert win.chat_view.messages()[-1].text == "Hello there, friend!"  # the notice is not in the transcript
    conversation = win.session.conversation_id
    win.new_chat()  # switching chats works
    allow_writes(win.store)
    win.chat.retry_saving()
    assert win.store.messages(conversation)[-1].content == "Hello there, friend!"


def _regenerate_and_fail(qtbot, win) -> None:
    """Regenerate the last reply with an engine whose replies fail."""
    backend: FakeBackend = win.bridge.worker._backend  # type: ignore[assignment]
    from fara_desktop.engine.errors import GenerationError

    def broken_reply(*_args, **_kwargs):
        raise GenerationError("llama.cpp failed")

    backend.reply = broken_reply  # type: ignore[method-assign]
    with qtbot.waitSignal(win.replyFailed, timeout=5000):
        win.chat_view.messages()[-1].action_buttons["regenerate"].click()


def test_a_regenerate_that_fails_keeps_the_earlier_reply(qtbot, window):
    win = window(FakeBackend(words=["First", " answer"]))
    ask(qtbot, win, "Question")
    _regenerate_and_fail(qtbot, win)
    shown = [(w.role, w.text) for w in win.chat_view.messages() if w.role in ("user", "assistant")]
    assert ("assistant", "First answer") in shown
    stored = [m.content for m in win.store.messages(win.session.conversation_id)]
    assert "First answer" in stored and "Question" in stored
    assert win.send_button.isEnabled()


def test_a_failing_disk_gives_the_message_back_instead_of_losing_it(qtbot, monkeypatch):
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(Path("fake.gguf"))

    def disk_full(*_args, **_kwargs):
        raise StorageError("Could not save to conversations.sqlite3: database or disk is full")

    monkeypatch.setattr(win.store, "add_message", disk_full)
    win.composer.setPlainText("Please keep me")
    win.send_button.click()
    assert win.composer.toPlainText() == "Please keep me"
    assert "could not be saved" in _notices(win)[-1] and "disk is full" in _notices(win)[-1]
    assert win.send_button.isEnabled()


def test_the_panel_keeps_no_stale_figures_after_a_failed_or_stopped_reply(qtbot, window):
    """Issue 29, item 4: no "(live)" speed, first-token time or "waiting for first token…" outlives its reply."""
    win = window(FakeBackend(words=["First", " answer"]))
    ask(qtbot, win, "Question")
    panel = win.hardware_panel
    assert "tok/s" in panel.value("Speed") and panel.value("First token").endswith("ms")
    _regenerate_and_fail(qtbot, win)
    assert panel.value("Speed") == "failed" and panel.value("First token") == "—"

    panel.reply_started()
    panel.token_arrived()
    panel.token_arrived(5)
    panel.reply_ended("stopped")
    assert panel.value("Speed") == "stopped after 5 tokens" and "live" not in panel.value("Speed")


def test_a_server_model_leaves_no_local_memory_figures(qtbot, window):
    import dataclasses

    win = window()
    panel = win.hardware_panel
    local = win.chat.model_info
    remote = dataclasses.replace(local, server="127.0.0.1:8080", name="qwen3")
    panel.show_model(remote)
    assert panel.value("Model weights") == "on the server" and panel.value("KV memory") == "on the server"


def test_quitting_during_a_reply_hides_the_window_at_once_and_keeps_the_reply(window, qtbot):
    """Issue 43, item 14: Ctrl+Q during a reply left the window standing on "Writing the answer…" for 3.6 s while
    the engine stopped, kept the chat's reading and freed the model. The window goes first; the reply is kept."""
    import threading

    from tests.helpers.fakes import FakeBackend

    gate = threading.Semaphore(0)
    backend = FakeBackend(words=["One", " two", " three"], gate=gate)
    win = window(backend)
    win.composer.setPlainText("Count")
    win.send_button.click()
    gate.release()
    qtbot.waitUntil(lambda: "One" in win.session.draft.answer, timeout=10_000)
    seen: list[bool] = []
    real_close = win.core.close

    def close(*args, **kwargs):
        seen.append(win.isVisible())
        gate.release(10)
        return real_close(*args, **kwargs)

    win.core.close = close  # type: ignore[method-assign]
    conversation = win.session.conversation_id
    win.close()
    assert seen == [False]  # hidden before the engine was asked to stop
    from fara_desktop.chats.storage import ConversationStore, database_path

    reopened = ConversationStore(database_path(win.paths.data))  # the window's store is closed by now
    try:
        messages = reopened.messages(conversation)
        assert messages[-1].role == "assistant" and messages[-1].status == "stopped"
    finally:
        reopened.close()
