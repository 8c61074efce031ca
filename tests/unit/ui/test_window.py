"""The main window with a scripted engine: sending, stopping, streaming, start-up with a pending message."""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget

from fara_desktop.ui.main_window import MainWindow
from tests.helpers.fakes import FakeBackend
from tests.helpers.screenshots import keep_screenshot


def test_key_widgets_have_stable_names(window):
    win = window()
    for name in ("chatView", "composer", "sendButton", "stopButton", "hardwarePanel"):
        widget = win.findChild(object, name)
        assert widget is not None, name
        assert widget.accessibleName(), f"{name} has no accessible name"


def test_enter_sends_and_shift_enter_adds_a_line(window, qtbot):
    win = window()
    qtbot.keyClicks(win.composer, "first line")
    qtbot.keyClick(win.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(win.composer, "second line")
    assert win.composer.toPlainText() == "first line\nsecond line"
    with qtbot.waitSignal(win.replyFinished, timeout=5000) as finished:
        qtbot.keyClick(win.composer, Qt.Key.Key_Return)
    assert finished.args[0].text == "Hello there!"
    roles = [m.role for m in win.chat_view.messages()]
    assert roles == ["user", "assistant"]
    assert win.chat_view.messages()[0].text == "first line\nsecond line"
    assert win.chat_view.messages()[1].text == "Hello there!"
    assert "tok/s" in win.chat_view.messages()[1].footer.text()
    assert win.composer.toPlainText() == ""
    assert [(m.role, m.status) for m in win.store.messages(win.session.conversation_id)] == [
        ("user", "complete"),
        ("assistant", "complete"),
    ]


def test_empty_message_is_not_sent(window, qtbot):
    win = window()
    win.composer.setPlainText("   \n  ")
    win.send_button.click()
    assert win.chat_view.messages() == []


def test_stop_button_and_escape_cancel_the_reply(window, qtbot):
    gate = threading.Semaphore(0)
    win = window(FakeBackend(words=[f"w{i} " for i in range(100)], gate=gate))
    win.composer.setPlainText("Tell me a story")
    win.send_button.click()
    assert win.stop_button.isEnabled() and not win.send_button.isEnabled()
    gate.release(3)
    qtbot.waitUntil(
        lambda: win.chat_view.streaming_message is not None and win.chat_view.streaming_message.text.startswith("w0"),
        timeout=5000,
    )
    with qtbot.waitSignal(win.replyCancelled, timeout=5000) as cancelled:
        qtbot.keyClick(win.composer, Qt.Key.Key_Escape)
        gate.release(100)
    assert cancelled.args[0].text == "w0 w1 w2 "
    last = win.chat_view.messages()[-1]
    assert last.footer.text().startswith("Stopped")
    assert win.send_button.isEnabled() and not win.stop_button.isEnabled()
    # the panel shows what the stopped reply measured, not a live speed and "…" left over (issue 43, item 9)
    panel = win.hardware_panel
    assert "(live)" not in panel.value("Speed") and "stopped" in panel.value("Speed")
    assert "…" not in panel.value("First token") and "…" not in panel.value("Prompt")


def test_streaming_repaints_in_batches_not_per_token(window, qtbot):
    gate = threading.Semaphore(0)
    win = window(FakeBackend(words=[f"t{i} " for i in range(400)], gate=gate))
    flushes = []
    win.chat_view.streamFlushed.connect(lambda: flushes.append(1))
    win.composer.setPlainText("go")
    with qtbot.waitSignal(win.replyFinished, timeout=10000):
        win.send_button.click()
        gate.release(400)
    assert win.chat_view.messages()[-1].text.endswith("t399 ")
    assert len(flushes) < 100, f"{len(flushes)} repaints for 400 tokens"


def test_the_paragraph_being_written_is_a_plain_draft_until_complete(qtbot):
    """The growing block is laid out as plain text (cheap); finished blocks, and the whole reply at the end, get
    their markdown formatting and become selectable."""
    from fara_desktop.chats.draft import ReplyDraft
    from fara_desktop.ui.widgets.chat_view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    draft = ReplyDraft()
    message = view.begin_stream("model", draft=draft)
    draft.add("First **bold** paragraph.\n\nSecond *growing*")
    view.stream_changed()
    view._flush()
    first, second = message.findChildren(QLabel, "messageBody")
    assert first.textFormat() == Qt.TextFormat.RichText and first.property("draft") is False
    assert first.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    assert second.textFormat() == Qt.TextFormat.PlainText and second.property("draft") is True
    assert second.textInteractionFlags() == Qt.TextInteractionFlag.NoTextInteraction
    draft.add(" paragraph.\n\nThird")
    view.stream_changed()
    view._flush()
    labels = message.findChildren(QLabel, "messageBody")
    assert [label.property("draft") for label in labels] == [False, False, True]  # the second one is complete
    view.end_stream()
    labels = message.findChildren(QLabel, "messageBody")
    assert [label.textFormat() for label in labels] == [Qt.TextFormat.RichText] * 3  # markdown, rendered without HTML
    assert all(label.property("draft") is False for label in labels)
    assert 'font-style:italic;">growing</span> paragraph.' in labels[1].text()  # *growing*, as markdown


def test_wrapping_label_remembers_heights_until_its_text_changes(qtbot):
    from fara_desktop.ui.widgets.message_widget import WrappingLabel

    label = WrappingLabel()
    qtbot.addWidget(label)
    label.setWordWrap(True)
    label.setText("word " * 200)
    tall = label.heightForWidth(200)
    assert label.heightForWidth(200) == tall and label.heightForWidth(800) < tall
    label.setText("word")
    assert label.heightForWidth(200) < tall  # not the remembered height of the old text


def test_stop_when_idle_does_nothing(window, qtbot):
    win = window()
    win.stop_button.click()
    win.stop()
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.composer.setPlainText("hi")
        win.send_button.click()
    assert win.chat_view.messages()[-1].text == "Hello there!"


def test_a_message_typed_during_start_up_is_sent_once_a_model_is_chosen(qtbot):
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.replyFinished, timeout=30000) as finished:
        win.start_auto()
        win.composer.setPlainText("early bird")
        win.send_button.click()
    assert finished.args[0].text == "Hello there!"
    assert [m.role for m in win.chat_view.messages()] == ["user", "assistant"]


@pytest.fixture
def fine_window(qtbot):
    """A window whose scripted model always answers \"Fine.\"."""
    win = MainWindow(backend=FakeBackend(words=["Fine", "."]))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(Path("fake.gguf"))
    return win


@pytest.mark.parametrize(
    "text",
    [
        "مرحبا بالعالم — שלום עולם",
        "emoji 👩‍💻🚀🇵🇹 and combining é",
        "control \x00 \x07 \x1b[31m characters \u202e reversed",
        "x" * 1_000_000,
    ],
    ids=["rtl", "emoji", "control", "1MB"],
)
def test_odd_text_is_sent_stored_and_shown_intact(fine_window, qtbot, text):
    fine_window.composer.setPlainText(text)
    with qtbot.waitSignal(fine_window.replyFinished, timeout=20000):
        fine_window.send_button.click()
    stored = fine_window.store.messages(fine_window.session.conversation_id)
    assert stored[0].content == text.strip()
    shown = fine_window.chat_view.messages()[0]
    assert shown.text == text.strip()  # the widget keeps (and copies) the whole text
    if len(text) > 100_000:
        assert "1,000,000 characters in all" in shown._block_widgets[-1].text()


def test_send_twice_sends_once(fine_window, qtbot):
    fine_window.composer.setPlainText("once")
    with qtbot.waitSignal(fine_window.replyFinished, timeout=5000):
        fine_window.send_button.click()
        fine_window.send()  # a second press while the first is in flight
    assert [m.role for m in fine_window.store.messages(fine_window.session.conversation_id)] == ["user", "assistant"]


def test_closing_the_window_mid_reply_saves_the_reply(qtbot):
    import threading

    gate = threading.Semaphore(0)
    win = MainWindow(backend=FakeBackend(words=["partial ", "reply ", "never ", "finished"], gate=gate))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(Path("fake.gguf"))
    win.composer.setPlainText("Tell me")
    win.send_button.click()
    gate.release(2)
    qtbot.waitUntil(lambda: win.session.draft.answering, timeout=5000)
    store_path = win.store.path
    conversation = win.session.conversation_id
    gate.release(10)
    win.close()
    assert not win.bridge.worker.thread.is_alive()
    from fara_desktop.chats.storage import ConversationStore

    store = ConversationStore(store_path)
    reply = store.messages(conversation)[1]
    assert reply.status in ("stopped", "complete") and reply.content.startswith("partial ")
    store.close()


def test_an_uncaught_exception_shows_a_short_dialog_with_the_log_path(qtbot, monkeypatch, tmp_path):

    from PySide6.QtWidgets import QMessageBox

    from fara_desktop.ui.crash_dialog import install_exception_dialog

    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append((self.text(), self.informativeText())) or 0)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    log_file = tmp_path / "fara-desktop.log"
    install_exception_dialog(log_file)
    try:
        raise RuntimeError("something broke")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    assert shown == [
        ("RuntimeError: something broke", f"Your conversations are safe. Details were written to:\n{log_file}")
    ]


def test_the_newest_start_up_plan_wins_not_the_slowest(qtbot, monkeypatch: pytest.MonkeyPatch):
    from fara_desktop.ui.main_window import MainWindow
    from tests.helpers.fakes import FakeBackend

    gates = [threading.Event(), threading.Event()]
    calls: list[int] = []

    def slow_plan(*_args, **_kwargs):
        number = len(calls)
        calls.append(number)
        gates[number].wait(10)
        return SimpleNamespace(model=None, name=f"plan {number}")

    monkeypatch.setattr("fara_desktop.app.model_loading.prepare_load", slow_plan)
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    applied: list[str] = []
    win.startup.apply_plan = lambda result: applied.append(result.name)  # type: ignore[method-assign]
    win.start_auto()
    qtbot.waitUntil(lambda: len(calls) == 1)
    win.start_auto()
    qtbot.waitUntil(lambda: len(calls) == 2)
    gates[1].set()
    qtbot.waitUntil(lambda: applied == ["plan 1"])
    gates[0].set()
    from fara_desktop.ui.background import BackgroundCall

    qtbot.waitUntil(lambda: not BackgroundCall._running)
    assert applied == ["plan 1"]


def test_a_long_prompt_shows_how_much_is_read_and_the_time_left(window, qtbot):
    gate = threading.Semaphore(0)
    backend = FakeBackend(words=["Done"], gate=gate)
    backend.prompt_batches = 4
    win = window(backend)
    win.composer.setPlainText("A very long paste")
    win.send_button.click()
    gate.release(2)
    qtbot.waitUntil(lambda: win.status_label.text().startswith("Reading your message: 1,024 of 2,048 tokens"),
                    timeout=5000)  # fmt: skip
    gate.release(1)
    qtbot.waitUntil(lambda: "1,536 of 2,048 tokens · about" in win.status_label.text(), timeout=5000)
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        gate.release(10)


def test_a_failed_switch_says_the_model_in_use_stays_and_it_still_answers(window, qtbot):
    win = window()
    with qtbot.waitSignal(win.modelLoadFailed, timeout=5000):
        win.load_model(Path("broken.gguf"))
    assert win.status_label.text() == "Ready · Fake model (the switch failed)"
    assert win.chat.model_info is not None and win.chat.model_info.name == "Fake model"
    notice = win.notice_bar.texts("error")[-1]
    assert "broken.gguf" in notice and "Still chatting with Fake model" in notice
    win.composer.setPlainText("Still there?")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()


def test_loading_shows_how_far_it_is_and_stop_loading_keeps_the_model_in_use(window, qtbot):
    win = window()  # the fake model is loaded; now a big one starts loading
    gate = threading.Semaphore(0)
    backend = win.bridge.worker._backend
    backend.load_steps, backend.load_gate = 10, gate
    win.load_model(Path("big-model.gguf"))
    qtbot.waitUntil(win.stop_loading_button.isVisible, timeout=5000)
    gate.release(3)
    qtbot.waitUntil(lambda: win.load_progress.value() == 30, timeout=5000)
    assert win.load_progress.maximum() == 100 and win.load_progress.isVisible()
    assert win.status_label.text().startswith("Loading big-model: 30%")  # the name the model will have
    with qtbot.waitSignal(win.modelLoadFailed, timeout=5000):
        win.stop_loading_button.click()
        assert win.status_label.text() == "Stopping the load…"
        gate.release(1)  # the next progress report is answered "stop"
    assert not win.load_progress.isVisible() and not win.stop_loading_button.isVisible()
    assert win.status_label.text() == "Ready · Fake model (the switch was stopped)"
    assert win.chat.model_info is not None and win.chat.model_info.name == "Fake model"
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):  # and a model loads again afterwards
        backend.load_steps = 0
        win.load_model(Path("fake.gguf"))


class _PaintSeen(QObject):
    """Notes that a widget was painted."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self.painted = False
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.painted = True
        return False


def test_the_engine_starts_only_after_the_users_message_is_painted(window, qtbot, monkeypatch):
    """The reply's bubble and llama.cpp's threads wait for the user's message to be on screen: the GUI thread lays
    it out and paints it without inference threads taking the CPU (the window stays live on a slow 2-core laptop)."""
    win = window()
    qtbot.waitExposed(win)
    painted_when_started: list[bool] = []
    watchers: list[_PaintSeen] = []
    real_generate = win.core.worker.generate

    def generate(*args, **kwargs):
        painted_when_started.append(watchers[0].painted)
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(win.core.worker, "generate", generate)
    win.composer.setPlainText("Hello")
    original_add = win.chat_view.add_message

    def add_message(*args, **kwargs):
        widget = original_add(*args, **kwargs)
        watchers.append(_PaintSeen(widget))
        return widget

    monkeypatch.setattr(win.chat_view, "add_message", add_message)
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
        assert win.stop_button.isEnabled() and not win.send_button.isEnabled()  # busy at once
        assert painted_when_started == []  # not started within the click
    assert painted_when_started == [True]
    assert [m.role for m in win.chat_view.messages()] == ["user", "assistant"]


def test_stop_before_the_reply_begins_ends_it_as_stopped_without_the_engine(window, qtbot):
    backend = FakeBackend()
    win = window(backend)
    win.composer.setPlainText("Never mind")
    win.send_button.click()
    with qtbot.waitSignal(win.replyCancelled, timeout=5000) as cancelled:  # it never came (issue 28)
        win.stop_button.click()
    assert cancelled.args[0].text == "" and cancelled.args[0].stats is None
    assert backend.prompts == []  # the engine never saw it
    assert win.send_button.isEnabled() and not win.stop_button.isEnabled()
    assert [(m.role, m.status) for m in win.store.messages(win.session.conversation_id)] == [
        ("user", "complete"),
        ("assistant", "stopped"),
    ]
    assert win.chat_view.messages()[-1].footer.text().startswith("Stopped")
    win.chat.turns._begin_reply()  # the step that was waiting for the paint comes after all: it does nothing
    assert backend.prompts == [] and len(win.chat_view.messages()) == 2 and win.send_button.isEnabled()


def test_closing_the_window_before_the_reply_begins_keeps_it_as_stopped(window):
    backend = FakeBackend()
    win = window(backend)
    win.composer.setPlainText("Bye")
    win.send_button.click()
    conversation = win.session.conversation_id
    store_path = win.store.path
    win.close()
    from fara_desktop.chats.storage import ConversationStore

    store = ConversationStore(store_path)
    stored = [(m.role, m.status) for m in store.messages(conversation)]
    assert stored == [("user", "complete"), ("assistant", "stopped")]
    store.close()
    assert backend.prompts == []


def test_a_reply_whose_row_cannot_be_saved_is_not_started_and_says_why(window, qtbot, monkeypatch):
    from fara_desktop.chats.storage import StorageError

    backend = FakeBackend()
    win = window(backend)

    def refused(*_args, **_kwargs):
        raise StorageError("Could not save to conversations.sqlite3: disk I/O error")

    monkeypatch.setattr(win.session, "begin_reply", refused)
    win.composer.setPlainText("Hello?")
    win.send_button.click()
    assert win.send_button.isEnabled() and not win.stop_button.isEnabled()
    notices = win.notice_bar.texts("error")
    assert notices and "could not be started" in notices[-1] and "disk I/O error" in notices[-1]
    assert [m.text for m in win.chat_view.messages() if m.role == "user"] == ["Hello?"]
    assert backend.prompts == []


def test_a_message_sent_after_a_failed_load_is_told_why_there_is_no_model(qtbot):
    """After a load that failed, sending said "No model is loaded yet." as if one were coming (issue 29, item 12)."""
    from fara_desktop.ui.main_window import MainWindow
    from tests.helpers.fakes import FakeBackend

    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoadFailed, timeout=5000):
        win.load_model(Path("broken-Qwen3-4B-Q4_K_M.gguf"))
    win.composer.setPlainText("Hello?")
    with qtbot.waitSignal(win.replyFailed, timeout=5000) as failed:
        win.send_button.click()
    said = failed.args[0]
    assert "yet" not in said
    assert said.startswith("No model is loaded: broken-Qwen3-4B could not be loaded (llama.cpp could not load")
    assert said.endswith("Choose another one in Settings ▸ Model, or get one with Get models.")
    assert win.notice_bar.texts("error")[-1] == said
    assert win.chat_view.messages()[0].text == "Hello?"  # the question is kept


def test_file_dialogs_open_where_the_user_last_went_for_the_same_purpose(window, qtbot, tmp_path, monkeypatch):
    """Issue 43, item 14: every file dialog opened in the home folder. Each purpose now remembers its last folder,
    across restarts (a folder since removed: home again)."""
    from PySide6.QtWidgets import QFileDialog

    models = tmp_path / "my models"
    models.mkdir()
    (models / "tiny.gguf").write_bytes(b"not a model")
    starts: list[str] = []

    def pick(_parent, _caption, start, _filters=""):
        starts.append(start)
        return str(models / "tiny.gguf"), ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", pick)
    win = window()
    win.start_auto = lambda preferred=None: None  # only where the dialog opens matters here
    win.choose_model_file()
    win.choose_model_file()
    assert starts == [str(Path.home()), str(models)]
    again = window()
    again.start_auto = lambda preferred=None: None
    again.choose_model_file()
    assert starts[-1] == str(models)
    assert again.folders.start("documents") == str(Path.home())  # another purpose keeps its own
    models.joinpath("tiny.gguf").unlink()
    models.rmdir()
    assert again.folders.start("models") == str(Path.home())


def test_settings_and_the_machine_panel_say_the_same_thread_count_after_it_is_measured(window, qtbot):
    """Issue 43, item 11: Settings said "auto (= 2)" (physical cores, not yet calibrated) while the panel said the
    count measured fastest (1) — both true once, contradicting each other after the measurement."""
    from fara_desktop.engine.types import ThreadsCalibrated

    win = window()
    with qtbot.waitSignal(win.modelLoaded, timeout=30000):
        win.start_auto()
    assert win.plan is not None and win.plan.tuned is not None
    measured = 1 if win.plan.tuned.n_threads != 1 else 2
    win.startup.on_engine_event(ThreadsCalibrated(win.model_info.path, {1: 10.0, 2: 9.0, measured: 11.0}, measured))
    dialog = win.open_settings("Inference")
    assert dialog.threads.specialValueText() == f"auto (= {measured})"
    assert "not yet calibrated" not in dialog.findChild(type(win.status_label), "tuningReasons").text()
    assert f"{measured}" in win.hardware_panel.value("Threads")
    dialog.reject()


def test_a_long_paste_grows_the_message_box_and_scrolls(window, qtbot):
    """Issue 43, item 8: a 3,000-word paste showed one line of the message box and no scroll bar (the height was
    measured before Qt had laid the pasted text out)."""
    from PySide6.QtGui import QGuiApplication

    win = window()
    QGuiApplication.clipboard().setText("A long paragraph of a pasted report, word after word. " * 330)  # 3,000 words
    win.composer.setFocus()
    win.composer.paste()
    line = win.composer.fontMetrics().lineSpacing()
    qtbot.waitUntil(lambda: win.composer.height() >= 7 * line, timeout=5000)
    assert win.composer.verticalScrollBar().maximum() > 0  # the rest is a scroll away


def test_the_welcome_suggests_a_far_better_model_until_not_now(window, qtbot):
    """Issue 43, item 4: a first start with only the small embedded model said nothing of the models that fit this
    computer far better. The welcome says which, its size, its download time and its speed here; Not now is kept."""
    win = window()
    with qtbot.waitSignal(win.modelLoaded, timeout=30000):
        win.start_auto()
    empty = win.chat_view.empty_state
    qtbot.waitUntil(lambda: empty.suggestion.isVisibleTo(win), timeout=60000)
    assert empty.suggestion.text().startswith("Worth downloading for this computer: ")
    assert empty.get_button.isVisibleTo(win) and empty.not_now_button.isVisibleTo(win)
    empty.not_now_button.click()
    assert not empty.suggestion.isVisibleTo(win) and not empty.get_button.isVisibleTo(win)
    again = window()
    seen: list[str] = []
    again.advice.downloadSuggested.connect(seen.append)
    with qtbot.waitSignal(again.planReady, timeout=30000):
        again.start_auto()
    assert again.advice._download is None and seen == []  # not worked out again after Not now


def test_dialogs_opened_again_and_again_leave_nothing_behind(window, qtbot):
    window = window()
    """Issue 50, item 10: each opening of Settings added a dialog and one more link to the tool servers' changes
    that no close removed; the shortcuts, a citation's passage and a picture's viewer were kept until quit."""
    from PySide6.QtWidgets import QDialog

    from fara_desktop.ui.dialogs.settings_dialog import SettingsDialog

    links = window.receivers("2toolsChanged()")
    for _ in range(3):
        settings = window.open_settings()
        settings.reject()
        window.show_shortcuts().close()
    qtbot.waitUntil(lambda: not window.findChildren(SettingsDialog), timeout=5000)
    qtbot.waitUntil(lambda: not [d for d in window.findChildren(QDialog) if type(d).__name__ == "ShortcutsDialog"],
                    timeout=5000)  # fmt: skip
    assert window.receivers("2toolsChanged()") == links


def test_a_model_opened_with_model_open_is_the_one_loaded_at_the_next_start(window, qtbot, tmp_path, monkeypatch):
    """Issue 53, item 4: Model ▸ Open loaded the file but kept the previous choice, so a restart went back to the
    previous model and the file was in no list. It is now the user's choice, as a model picked in Settings is."""
    from PySide6.QtWidgets import QFileDialog

    from fara_desktop.settings import load_settings

    chosen = tmp_path / "elsewhere" / "my-model.gguf"
    chosen.parent.mkdir()
    chosen.write_bytes(b"GGUF")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_args: (str(chosen), ""))
    win = window()
    asked: list[Path | None] = []
    win.startup.start_auto = lambda preferred=None, avoid=None: asked.append(preferred)
    win.choose_model_file()
    assert asked == [chosen]
    assert load_settings(win.paths.config).settings.model_path is None  # issue 64, item 2: kept once it loaded
    assert win.model_info is not None
    win.startup.model_loaded(dataclasses.replace(win.model_info, path=chosen))
    assert win.settings.model_path == str(chosen)
    assert load_settings(win.paths.config).settings.model_path == str(chosen)  # kept for the next start


def test_a_folder_added_in_settings_lists_its_models_before_ok(window, qtbot, tmp_path, monkeypatch, smollm2_path):
    """Issue 53, item 4: a folder added on Settings ▸ Model showed its models only after OK and reopening."""
    import shutil

    from PySide6.QtWidgets import QFileDialog

    folder = tmp_path / "more models"
    folder.mkdir()
    shutil.copy(smollm2_path, folder / "my-smol-copy.gguf")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_args: str(folder))
    win = window()
    dialog = win.open_settings("Model")
    dialog._add_folder()

    def listed() -> list[str]:
        return [dialog.models.item(row, 1).text() for row in range(dialog.models.rowCount())]

    qtbot.waitUntil(lambda: any("my-smol-copy" in name.lower() or "smol" in name.lower() for name in listed()),
                    timeout=10000)  # fmt: skip
    row = next(r for r, name in enumerate(listed()) if "smol" in name.lower())
    assert dialog.models.item(row, 4).text() == "Added folder"
    assert dialog.models.item(row, 5).text() == "Judged after OK"
    assert "Found 1 model" in dialog.status.text()
    dialog.reject()


def test_a_reply_stopped_for_repeating_itself_says_so_under_it_and_after_a_reopen(window, qtbot):
    """Issue 53, item 11: a reply the loop detector ended was marked only in the status bar, which the next
    message replaces; the reply itself looked finished."""
    backend = FakeBackend(words=["la", " la", " la"])
    backend.finish = "repetition"
    win = window(backend)
    win.composer.setPlainText("Sing")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    reply = win.chat_view.messages()[-1]
    assert reply.footer.text().startswith("Stopped: it began repeating itself")
    win.chat.show_session_messages()  # as the chat is shown again after a switch or a restart
    assert win.chat_view.messages()[-1].footer.text().startswith("Stopped: it began repeating itself")


def test_repetition_the_user_asks_for_is_not_cut_as_a_loop(window, qtbot):
    """Issue 64, item 10: the loop detector cut a reply the user had asked to repeat ("say this word four times")."""
    from fara_desktop.engine.repetition import asks_for_repetition

    backend = FakeBackend()
    win = window(backend)
    for text, stops in (("Say the word 'banana' four times.", False), ("Tell me about bananas.", True),
                        ("Repeat after me: la la la", False), ("Write it 20 times", False)):  # fmt: skip
        win.composer.setPlainText(text)
        with qtbot.waitSignal(win.replyFinished, timeout=5000):
            win.send_button.click()
        assert backend.samplings[-1].stop_loops is stops, text
    assert not asks_for_repetition("Times New Roman is a font")


def test_a_branch_at_ones_own_question_puts_it_in_the_message_box_to_ask_again(window, qtbot):
    """Issue 64, item 4: a branch at the user's own message ended the new chat with the unanswered question and no
    Regenerate (Ctrl+Shift+R then made a new version of the earlier reply and hid the question). Chosen: the new
    chat stops before the question, which waits in the message box to be changed and sent."""
    win = window()
    for text in ("First question", "Second question"):
        win.composer.setPlainText(text)
        with qtbot.waitSignal(win.replyFinished, timeout=5000):
            win.send_button.click()
    original = win.session.conversation_id
    second = [w for w in win.chat_view.messages() if w.role == "user"][1]
    win.chat.branch_off(second)
    assert win.session.conversation_id != original
    assert [m.content for m in win.session.messages if m.role == "user"] == ["First question"]
    assert win.composer.toPlainText() == "Second question" and "to change and send" in win.status_label.text()
    keep_screenshot(win, "issue64-4-branch-at-a-question")
    win.composer.setPlainText("Second question, put otherwise")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    assert [m.role for m in win.session.messages] == ["user", "assistant", "user", "assistant"]
    win.conversations.open_conversation(original)  # type: ignore[arg-type]
    first = next(w for w in win.chat_view.messages() if w.role == "user")
    win.chat.branch_off(first)
    assert win.session.messages == [] and win.composer.toPlainText() == "First question"
