"""Reading ahead while the user types, in the real window (scripted engine): started by a pause or a paste,
stopped by the next key and by Send, and the wait it leaves said in the composer."""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtCore import Qt

from fara_desktop.engine.kv_disk import KVDiskStore, StateIdentity
from fara_desktop.engine.kv_states import KVSnapshot
from fara_desktop.vocabulary.messages import ChatMessage
from tests.helpers.fakes import FakeBackend

PASTE = "Please summarise this report. " * 20  # 600 characters: a paste


def reading_a_paste(window, qtbot) -> tuple[FakeBackend, Any]:
    """A window whose engine is reading a paste ahead, held at its first batch until the test releases it."""
    backend = FakeBackend()
    backend.read_ahead_gate = threading.Semaphore(0)
    win = window(backend)
    win.composer.insertPlainText(PASTE)
    qtbot.waitUntil(lambda: len(backend.read_ahead_prompts) == 1, timeout=10_000)
    return backend, win


def test_a_pause_in_typing_reads_the_chat_and_the_draft_ahead(window, qtbot):
    backend = FakeBackend()
    win = window(backend)
    qtbot.keyClicks(win.composer, "What is a heron?")
    qtbot.waitUntil(lambda: bool(backend.read_ahead_prompts), timeout=10_000)
    assert backend.read_ahead_prompts[-1][-1] == ChatMessage("user", "What is a heron?")
    assert backend.prompts == []  # nothing was sent


def test_a_paste_is_read_at_once_and_the_wait_is_said_until_it_is_read(window, qtbot):
    backend = FakeBackend()
    backend.prompt_speed = 100.0  # the system prompt and the draft, 800 tokens in the fake: 8 s
    backend.read_ahead_gate = threading.Semaphore(0)
    win = window(backend)
    win.composer.insertPlainText(PASTE)
    qtbot.waitUntil(lambda: bool(win.wait_hint.isVisible()), timeout=10_000)
    assert win.wait_hint.text() == "about 8 s to read"
    backend.read_ahead_gate.release(2)  # half of it is read
    qtbot.waitUntil(lambda: bool(win.wait_hint.text() == "about 4 s to read"), timeout=10_000)
    backend.read_ahead_gate.release(2)
    qtbot.waitUntil(lambda: bool(not win.wait_hint.isVisible()), timeout=10_000)


def test_the_wait_follows_the_speed_the_read_ahead_measures_now(window, qtbot):
    """The machine got busy since the model's last reply (which read at 100 tok/s): the read-ahead reads at
    25 tok/s. The wait said must be the one at the speed measured now — it said "about 5 s" for a minute's read."""
    backend = FakeBackend()
    backend.read_ahead_speed = 25.0
    backend.read_ahead_gate = threading.Semaphore(0)
    win = window(backend)
    win.composer.insertPlainText(PASTE)
    qtbot.waitUntil(lambda: bool(win.wait_hint.isVisible()), timeout=10_000)
    assert win.wait_hint.text() == "about 8 s to read"  # 800 tokens at the last replies' speed: nothing read yet
    backend.read_ahead_gate.release(1)  # a quarter read at 25 tok/s: 600 tokens left, 24 s
    qtbot.waitUntil(lambda: bool(win.wait_hint.text() == "about 25 s to read"), timeout=10_000)
    backend.read_ahead_gate.release(100)
    qtbot.waitUntil(lambda: bool(not win.wait_hint.isVisible()), timeout=10_000)


def test_a_key_that_changes_the_text_before_its_end_stops_reading_ahead(window, qtbot):
    backend, win = reading_a_paste(window, qtbot)
    qtbot.keyClick(win.composer, Qt.Key.Key_Backspace)  # the pasted text's end is deleted
    backend.read_ahead_gate.release(1)
    qtbot.waitUntil(lambda: bool(backend.read_ahead_stopped == 1), timeout=10_000)
    backend.read_ahead_gate.release(100)
    qtbot.waitUntil(lambda: len(backend.read_ahead_prompts) == 2, timeout=10_000)  # the new text, after a pause
    assert backend.read_ahead_prompts[-1][-1].content == PASTE[:-1].strip()


def test_typing_on_at_the_end_lets_the_reading_go_on_and_follows_it(window, qtbot):
    backend, win = reading_a_paste(window, qtbot)
    qtbot.keyClicks(win.composer, " Why?")  # the question typed after the paste: the paste stays valid
    backend.read_ahead_gate.release(4)
    qtbot.waitUntil(lambda: len(backend.read_ahead_prompts) == 2, timeout=10_000)
    assert backend.read_ahead_stopped == 0  # the paste was read to its end
    assert backend.read_ahead_prompts[-1][-1].content.endswith("Why?")
    backend.read_ahead_gate.release(100)


def test_send_stops_reading_ahead_and_the_reply_goes_first(window, qtbot):
    """The batch being read is part of what Enter sends: it is finished (thrown away before: at 1.7B on a busy
    machine, seconds of reading), then the reply goes first."""
    backend, win = reading_a_paste(window, qtbot)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=10_000):
        qtbot.keyClick(win.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: win.chat.turn.request_id is not None, timeout=5000)  # queued once the bubble is drawn
        backend.read_ahead_gate.release(1)  # the batch being read ends; the next is not begun
    assert backend.read_ahead_stopped == 1 and backend.read_ahead_batches_read == 1
    assert backend.prompts[-1][-1] == ChatMessage("user", PASTE.strip())
    assert not win.wait_hint.isVisible()
    backend.read_ahead_gate.release(100)


def test_reading_ahead_is_off_on_battery_unless_allowed(window, qtbot, monkeypatch):
    import dataclasses

    from fara_desktop.app import core

    backend = FakeBackend()
    win = window(backend)
    monkeypatch.setattr(core, "on_battery_now", lambda: True)
    win.composer.insertPlainText(PASTE)
    qtbot.waitUntil(lambda: bool(win.wait_hint.isVisible()), timeout=10_000)
    assert backend.read_ahead_prompts == [] or backend.read_ahead_stopped == len(backend.read_ahead_prompts)
    win.composer.clear()
    win.core.settings = dataclasses.replace(
        win.settings, prompts=dataclasses.replace(win.settings.prompts, read_ahead_on_battery=True)
    )
    before = len(backend.read_ahead_prompts)
    win.composer.insertPlainText(PASTE)
    qtbot.waitUntil(lambda: len(backend.read_ahead_prompts) > before and not win.wait_hint.isVisible(), timeout=10_000)


def test_deleting_a_chat_hands_its_saved_states_to_the_engine_to_forget(window, qtbot):
    """The engine forgets them on its own thread, after whatever it does for that chat (the real model's files:
    ``test_real_model_window.py``); the window does not delete files under the engine's feet."""
    backend = FakeBackend()
    win = window(backend)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=10_000):
        win.composer.setPlainText("Hello")
        win.chat.send()
    conversation = win.session.conversation_id
    assert conversation is not None
    win.conversations.delete_conversation(conversation, confirm=False)
    qtbot.waitUntil(lambda: backend.forgotten == [conversation], timeout=10_000)
    assert isinstance(win.chat_states, KVDiskStore)


def test_the_prompts_page_shows_the_saved_states_and_a_budget_of_zero_keeps_none(window, qtbot):
    win = window(FakeBackend())
    with qtbot.waitSignal(win.chat.replyFinished, timeout=10_000):
        win.composer.setPlainText("Hello")
        win.chat.send()
    conversation = win.session.conversation_id
    identity = StateIdentity("/m.gguf", 1, "1", 4096, "f16", False, "x")
    win.chat_states.save(conversation, identity, KVSnapshot(tuple(range(100)), bytearray(3 << 20)))
    dialog = win.open_settings("Prompts")
    page = dialog.prompts_page
    assert page.usage.text() == "In use: 3.0 MiB; this chat: 3.0 MiB."
    page.states_gb.setValue(0.0)
    dialog.accept()
    assert win.settings.prompts.chat_states_gb == 0.0
    assert win.chat_states.bytes_used() == 0


def test_escape_stops_reading_ahead_and_hides_the_wait(window, qtbot):
    backend = FakeBackend()
    backend.read_ahead_gate = threading.Semaphore(0)
    win = window(backend)
    win.composer.insertPlainText(PASTE)
    qtbot.waitUntil(lambda: win.wait_hint.isVisible(), timeout=10_000)
    qtbot.keyClick(win.composer, Qt.Key.Key_Escape)
    backend.read_ahead_gate.release(1)
    qtbot.waitUntil(lambda: backend.read_ahead_stopped == 1, timeout=10_000)
    assert not win.wait_hint.isVisible()
    backend.read_ahead_gate.release(100)


def test_a_chat_with_documents_searches_them_on_the_typing_pause_and_enter_sends_what_was_read(window, qtbot, tmp_path):
    from tests.helpers.documents import write_mixed_folder

    backend = FakeBackend()
    win = window(backend)
    write_mixed_folder(tmp_path / "manuals")
    with qtbot.waitSignal(win.documents.finished, timeout=60_000):
        win.documents.index_paths("manuals", [tmp_path / "manuals"])
    win.documents.use_collection("manuals", True)
    searches = []
    search = win.chat.retrieve
    assert search is not None
    win.chat.retrieve = lambda *args: searches.append(args[0][-1].content) or search(*args)
    qtbot.keyClicks(win.composer, "Which valve controls the pressure?")
    qtbot.waitUntil(lambda: bool(backend.read_ahead_prompts), timeout=10_000)
    read = backend.read_ahead_prompts[-1]
    assert "The aquamarine valve controls the pressure." in read[-1].content  # the passages were read ahead
    with qtbot.waitSignal(win.chat.replyFinished, timeout=10_000):
        qtbot.keyClick(win.composer, Qt.Key.Key_Return)
    assert backend.prompts[-1] == read  # Enter sent exactly what was read ahead
    assert searches == ["Which valve controls the pressure?"]  # searched once, on the pause


def test_background_indexing_waits_while_the_model_reads_ahead(window, qtbot, tmp_path):
    from tests.helpers.documents import write_mixed_folder

    backend, win = reading_a_paste(window, qtbot)
    documents = win.documents
    assert documents.engine_busy()  # two llama.cpp thread pools would spin on the same cores
    write_mixed_folder(tmp_path / "docs")
    documents.index_paths("docs", [tmp_path / "docs"])
    backend.read_ahead_gate.release(100)
    qtbot.waitUntil(lambda: not documents.engine_busy(), timeout=10_000)
    qtbot.waitUntil(lambda: "docs" in documents.collection_names() and not documents._scan.is_alive(), timeout=60_000)
