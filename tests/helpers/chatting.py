"""Talking to a main window the way a person does: type, press Send, wait for the reply."""

from __future__ import annotations

from typing import Any

from fara_desktop.ui.main_window import MainWindow


def ask(qtbot: Any, win: MainWindow, text: str, timeout_ms: int = 5000) -> None:
    """Type ``text`` into the composer, click Send, and wait until the reply has finished."""
    win.composer.setPlainText(text)
    with qtbot.waitSignal(win.replyFinished, timeout=timeout_ms):
        win.send_button.click()
