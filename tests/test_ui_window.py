"""The main window with a scripted backend: keys, buttons, streaming, stop, object names."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from fara_desktop.ui.main_window import MainWindow
from tests.fakes import FakeBackend


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
    from fara_desktop.ui.widgets.chat_view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    message = view.begin_stream("model")
    view.append_stream("First **bold** paragraph.\n\nSecond *growing*")
    view._flush()
    first, second = message.findChildren(QLabel, "messageBody")
    assert first.textFormat() == Qt.TextFormat.RichText and first.property("draft") is False
    assert first.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    assert second.textFormat() == Qt.TextFormat.PlainText and second.property("draft") is True
    assert second.textInteractionFlags() == Qt.TextInteractionFlag.NoTextInteraction
    view.append_stream(" paragraph.\n\nThird")
    view._flush()
    labels = message.findChildren(QLabel, "messageBody")
    assert [label.property("draft") for label in labels] == [False, False, True]  # the second one is complete
    view.end_stream()
    labels = message.findChildren(QLabel, "messageBody")
    assert [label.textFormat() for label in labels] == [Qt.TextFormat.RichText] * 3  # markdown, rendered without HTML
    assert all(label.property("draft") is False for label in labels)
    assert "font-style:italic;\">growing</span> paragraph." in labels[1].text()  # *growing*, as markdown


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


def test_start_up_probes_the_machine_picks_a_model_and_calibrates(qtbot, smollm2_path):
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=30000):
        win.start_auto()
    panel = win.hardware_panel
    assert panel.value("CPU") != "detecting…"
    assert "physical" in panel.value("Cores")
    assert "free of" in panel.value("RAM")
    assert panel.value("Instructions")
    assert win.plan is not None and win.plan.model is not None
    assert win.plan.model.path == str(smollm2_path)  # the instruction-tuned model wins over the base Gemma
    assert panel.value("Context").startswith("auto (= ")
    qtbot.waitUntil(lambda: "measured tok/s" in panel.value("Threads"), timeout=10000)
    assert panel.value("Threads").startswith("auto (= ")


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
