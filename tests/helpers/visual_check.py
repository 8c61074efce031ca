"""One window, one size, one theme: the real window (xcb) with a long reply streaming from a model with a long
name, a server model's reply, then Tab through it; prints the geometry problems found as JSON and saves a
screenshot. Run by tests/integration/ui/test_visual_sizes.py in its own Xvfb screen of the size asked.

    python -m tests.helpers.visual_check WIDTH HEIGHT THEME SCREENSHOT.png
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QWidget

PARAGRAPH = "The pump must be primed before use, and the aquamarine valve controls the pressure of the line. " * 5
LONG_MODEL = (
    "/home/someone/.cache/lm-studio/models/some-publisher/" + "a-very-long-folder-name/" * 4 + "Qwen2.5-7B.gguf"
)


def rect_in(widget: QWidget, ancestor: QWidget) -> QRect:
    return QRect(widget.mapTo(ancestor, QPoint(0, 0)), widget.size())


def newest_text_in_view(win) -> bool:
    view = win.chat_view
    reply = view.messages()[-1]
    last = reply._block_widgets[-1]
    bottom = last.mapTo(view.widget(), QPoint(0, last.height())).y()
    top = view.verticalScrollBar().value()
    return top < bottom <= top + view.viewport().height()


def problems_in_messages(win) -> list[str]:
    found = []
    view = win.chat_view
    column = view.viewport().width()
    for message in view.messages():
        box = message.geometry()
        if box.right() > column:
            found.append(f"{message.objectName()} ends at {box.right()} past the column ({column})")
        for key, button in message.action_buttons.items():
            if not button.isVisibleTo(message):
                continue
            where = rect_in(button, message)
            if where.right() > message.width() or button.width() < button.sizeHint().width():
                found.append(f"{message.objectName()}'s {key} button is cut ({button.width()} px)")
    return found


def squeezed_buttons(win) -> list[str]:
    """Buttons narrower than their text needs, anywhere in the window that is shown."""
    found = []
    for button in win.findChildren(QAbstractButton):
        if not button.isVisibleTo(win) or not button.text():
            continue
        if button.width() < button.minimumSizeHint().width() - 1:
            found.append(
                f"{button.objectName() or button.text()} is {button.width()} px of {button.minimumSizeHint().width()}"
            )
        if win.chat_view.isAncestorOf(button):
            continue  # scrolled content: the messages' own check covers it
        inside = rect_in(button, win)
        if not win.rect().contains(inside.center()):
            found.append(f"{button.objectName() or button.text()} lies outside the window")
    return found


def main() -> int:
    width, height, theme, shot = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    app = QApplication(sys.argv[:1])
    from fara_desktop.ui.main_window import MainWindow
    from fara_desktop.ui.theme import apply_appearance
    from tests.helpers.fakes import FakeBackend

    sheet = apply_appearance(app, theme, app.font().pointSize())
    import threading

    gate = threading.Semaphore(0)
    words = [w + " " for w in (PARAGRAPH + "\n\n").split(" ")] * 12
    backend = FakeBackend(words=words, gate=gate)
    win = MainWindow(backend=backend)
    win.show()
    win.resize(width, height)
    problems: list[str] = []

    def wait(predicate, what: str, seconds: float = 20) -> None:
        from PySide6.QtCore import QDeadlineTimer

        deadline = QDeadlineTimer(int(seconds * 1000))
        while not predicate():
            if deadline.hasExpired():
                problems.append(f"timed out: {what}")
                return
            app.processEvents()

    loaded = []
    win.modelLoaded.connect(loaded.append)
    from pathlib import Path as P

    win.load_model(P(LONG_MODEL))
    wait(lambda: bool(loaded), "the model loads")
    finished = []
    win.replyFinished.connect(finished.append)
    win.composer.setPlainText("Tell me everything about the pump. " * 3)
    win.send_button.click()
    streaming_checks = 0
    flushed = []
    win.chat_view.streamFlushed.connect(lambda: flushed.append(1))
    while not finished:
        before = len(flushed)
        gate.release(40)  # 40 more tokens, then look while the reply is still being written
        wait(lambda before=before: len(flushed) > before or bool(finished), "the reply grows")
        if not finished and win.chat_view.streaming_message is not None:
            streaming_checks += 1
            wait(lambda: newest_text_in_view(win), f"the streaming text is in view (check {streaming_checks})", 2)
    wait(lambda: newest_text_in_view(win), "the end of the reply is in view")
    for _ in range(20):
        app.processEvents()
    problems += problems_in_messages(win)
    problems += squeezed_buttons(win)
    focus_rules = set(re.findall(r"([#\w]+):focus", sheet))
    win.activateWindow()
    win.composer.setFocus()
    for _ in range(20):
        widget = QApplication.focusWidget()
        if widget is None:
            break
        from PySide6.QtTest import QTest

        QTest.keyClick(widget, Qt.Key.Key_Tab)
        app.processEvents()
        now = QApplication.focusWidget()
        if now is None:
            continue
        names = {f"#{now.objectName()}"} | {cls.__name__ for cls in type(now).__mro__}
        if not names & focus_rules:
            problems.append(f"no visible focus on {now.objectName() or type(now).__name__}")
    shot.parent.mkdir(parents=True, exist_ok=True)
    win.grab().save(str(shot))
    print(json.dumps({"problems": problems, "window": [win.width(), win.height()],
                      "chat_width": win.chat_view.width(), "streaming_checks": streaming_checks}))  # fmt: skip
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
