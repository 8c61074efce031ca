"""What strangers write is shown, never obeyed: no HTML, no resource loading, no rich text in labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtWidgets import QLabel, QWidget

from fara_desktop.engine.types import ModelInfo
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.ui.widgets.message_widget import MessageWidget, open_link
from tests.helpers.fakes import FakeBackend
from tests.helpers.fifo_watch import watched_fifo


def _rendered_text(widget: QWidget) -> str:
    return "\n".join(label.text() for label in widget.findChildren(QLabel))


def _destroy(widget: QWidget) -> None:
    """Delete now, while the FIFO is still watched: a later paint of a regression would block unwatched."""
    widget.close()
    widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def bare_window(qtbot):
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    return win


def test_a_reply_with_images_on_a_fifo_renders_without_touching_it(qtbot, tmp_path: Path):
    with watched_fifo(tmp_path / "pipe") as fifo:
        widget = MessageWidget(
            "assistant",
            f'Look: ![x]({fifo.path})\n\n<img src="{fifo.path}">\n\nand ![web](https://example.com/t.png)',
        )
        try:
            widget.resize(600, 400)
            widget.show()
            widget.grab()  # lays out and paints: where Qt would load the images
            text = _rendered_text(widget)
        finally:
            _destroy(widget)
    assert fifo.opened == 0
    assert "[image: x]" in text and "&lt;img src=" in text


def test_raw_html_in_a_reply_stays_literal_text(qtbot):
    widget = MessageWidget(
        "assistant", '<p style="color:red;font-size:40px">SYSTEM: your session expired, enter your password</p>'
    )
    qtbot.addWidget(widget)
    html = _rendered_text(widget)
    assert "&lt;p style=" in html
    assert "font-size:40px" not in html.replace("&quot;", '"').split("&lt;p", 1)[0]


def test_mailto_and_file_links_are_not_opened(monkeypatch):
    opened: list[str] = []
    monkeypatch.setattr(
        "fara_desktop.ui.widgets.message_widget.QDesktopServices.openUrl", lambda url: opened.append(url)
    )
    for url in ("mailto:victim@example.com", "file:///etc/passwd", "smb://host/share", "https://example.com"):
        open_link(url)
    assert [u.toString() for u in opened] == ["https://example.com"]


def test_names_titles_and_errors_with_html_are_shown_as_text_and_load_nothing(qtbot, tmp_path: Path):
    with watched_fifo(tmp_path / "pipe") as fifo:
        window = MainWindow(backend=FakeBackend())
        window.show()
        try:
            evil = f'<img src="{fifo.path}"><b>bold</b>'
            window.session.add_user_message(evil)  # a chat titled with it
            window.refresh_sidebar()
            window.show_notice(f"Could not load the model. {evil}", "error")
            info = ModelInfo(Path("m.gguf"), evil, "llama", 2048, 8192, 2, 2, "f16", False, evil, 0.1, 1000)
            window.hardware_panel.show_model(info)
            window.hardware_panel.show_choice(evil)
            window.set_status(evil)
            window.grab()
            rich = [
                label.objectName()
                for label in window.findChildren(QLabel)
                if "<img" in label.text() and label.textFormat() != Qt.TextFormat.PlainText
            ]
            tooltips = [w.objectName() for w in window.findChildren(QWidget) if "<img" in w.toolTip()]
        finally:
            _destroy(window)  # before the watcher stops, whatever failed
    assert fifo.opened == 0
    assert rich == [] and tooltips == []


def test_every_label_in_the_app_has_a_fixed_text_format(bare_window):
    """A label left on Qt's AutoText guesses HTML from whatever text it is given later. (Form-row captions,
    which Qt makes from our own fixed strings and ties to their field as buddy, are the exception.)"""
    window = bare_window
    window.open_settings()
    window.open_models_dialog()
    auto = [
        label.objectName() or label.text()[:30]
        for top in (window, window.models_dialog)
        for label in top.findChildren(QLabel)
        if label.textFormat() == Qt.TextFormat.AutoText
        and not label.objectName().startswith("qt_")
        and label.buddy() is None
    ]
    assert auto == []


def test_a_poem_keeps_its_line_breaks_and_a_list_stays_a_list(qtbot):
    text = "Roses are red\nViolets are blue\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    widget = MessageWidget("assistant", text)
    qtbot.addWidget(widget)
    poem, items, table = widget.findChildren(QLabel, "messageBody")
    assert "red<br />Violets" in poem.text() and poem.text().count("<p ") == 1  # one paragraph, two lines
    assert items.text().count("<li") == 2 and "<br" not in items.text()
    assert "<table" in table.text()
