"""The whole window by keyboard (issue 29, item 9): every message action has a key and they are listed in Help ▸
Keyboard shortcuts; Ctrl+F, Down, Enter opens a chat; every widget Tab reaches has a visible focus ring."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.helpers.chatting import ask
from tests.helpers.fakes import FakeBackend

CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def _active(qtbot, win):
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=5000)  # shortcuts reach the active window


def test_message_actions_have_keys_and_help_lists_them(window, qtbot):
    win = window(FakeBackend(words=["An", " answer"]))
    _active(qtbot, win)
    ask(qtbot, win, "First question")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        qtbot.keyClick(win.composer, Qt.Key.Key_R, CTRL_SHIFT)  # regenerate the last reply
    assert win.chat_view.messages()[-1].version_label.text() == "2/2"
    qtbot.keyClick(win.composer, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)
    assert win.chat_view.messages()[-1].version_label.text() == "1/2"
    qtbot.keyClick(win.composer, Qt.Key.Key_E, CTRL_SHIFT)  # edit your last message
    assert win.composer.toPlainText() == "First question" and win.edit_banner.isVisibleTo(win)
    qtbot.keyClick(win.composer, Qt.Key.Key_Escape)
    dialog = win.show_shortcuts()
    qtbot.addWidget(dialog)
    listed = {dialog.table.item(r, 0).text(): dialog.table.item(r, 1).text() for r in range(dialog.table.rowCount())}
    for what in ("Copy the last message", "Edit your last message", "Regenerate the last reply",
                 "Branch from the last message", "Previous version of the last reply", "Keyboard shortcuts",
                 "Chat list", "Machine panel"):  # fmt: skip
        assert listed.get(what), what


def test_find_then_down_and_enter_opens_a_chat(window, qtbot):
    win = window()
    ask(qtbot, win, "About penguins")
    first = win.session.conversation_id
    win.new_chat()
    ask(qtbot, win, "About otters")
    _active(qtbot, win)
    qtbot.keyClick(win.composer, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert win.sidebar.search.hasFocus()
    qtbot.keyClicks(win.sidebar.search, "penguins")
    qtbot.keyClick(win.sidebar.search, Qt.Key.Key_Down)
    assert win.sidebar.list.hasFocus() and win.sidebar.list.currentRow() == 0
    qtbot.keyClick(win.sidebar.list, Qt.Key.Key_Return)
    assert win.session.conversation_id == first


def test_every_widget_tab_reaches_shows_its_focus(window, qtbot):
    from fara_desktop.ui.theme import apply_appearance

    win = window()
    _active(qtbot, win)
    app = QApplication.instance()
    before = app.styleSheet(), app.palette(), app.font()
    try:
        for theme in ("light", "dark"):
            apply_appearance(app, theme, app.font().pointSize())
            sheet = app.styleSheet()
            focus_rules = set(re.findall(r"([#\w]+):focus", sheet))
            win.activateWindow()
            win.composer.setFocus()
            reached = []
            for _ in range(25):
                qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
                widget = QApplication.focusWidget()
                names = {f"#{widget.objectName()}"} | {cls.__name__ for cls in type(widget).__mro__}
                reached.append(widget.objectName() or type(widget).__name__)
                assert names & focus_rules, f"{theme}: no focus ring for {reached[-1]} ({type(widget).__name__})"
    finally:  # what this test changed is put back, even when it fails
        app.setStyleSheet(before[0])
        app.setPalette(before[1])
        app.setFont(before[2])


def test_after_stop_or_a_regenerate_stopped_by_esc_the_next_words_go_to_the_message_box(window, qtbot):
    """Issue 53, item 9: after Stop (the button took the focus) or Regenerate then Esc (the reply's button went
    with its reply), the words typed next were lost."""
    import threading

    gate = threading.Semaphore(0)
    win = window(FakeBackend(words=["one", " two", " three", " four"], gate=gate))
    _active(qtbot, win)
    win.composer.setPlainText("First question")
    win.send_button.click()
    qtbot.waitUntil(win.stop_button.isVisible, timeout=5000)
    with qtbot.waitSignal(win.replyCancelled, timeout=5000):
        qtbot.mouseClick(win.stop_button, Qt.MouseButton.LeftButton)
        gate.release(10)
    qtbot.waitUntil(win.composer.hasFocus, timeout=2000)
    reply = win.chat_view.messages()[-1]
    qtbot.mouseClick(reply.action_buttons["regenerate"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(win.stop_button.isVisible, timeout=5000)
    with qtbot.waitSignal(win.replyCancelled, timeout=5000):
        qtbot.keyClick(win.focusWidget() or win, Qt.Key.Key_Escape)
        gate.release(10)
    qtbot.waitUntil(win.composer.hasFocus, timeout=2000)
    qtbot.keyClicks(win.focusWidget(), "next words")
    assert win.composer.toPlainText() == "next words"
