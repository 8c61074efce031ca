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
        if not hasattr(win, "chat_view"):  # a dialog: only the squeeze matters
            if button.width() < button.minimumSizeHint().width() - 1:
                found.append(f"{button.objectName() or button.text()} is {button.width()} px")
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


def luminance(red: int, green: int, blue: int) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)


def faint_texts(root: QWidget, minimum: float = 3.0, within: QWidget | None = None) -> list[str]:
    """Every text a widget draws that is too close to its own background — labels, text boxes (read-only ones too:
    the arguments a person approves), line edits and list rows: the contrast ratio between the widget's commonest
    pixel (its background) and its pixel farthest from it (its text), as rendered on ``root`` (a window: its
    ancestors paint a label's background); ``within``: only the widgets of this part of it."""
    from collections import Counter

    from PySide6.QtWidgets import QAbstractItemView, QLabel, QLineEdit, QPlainTextEdit, QTextEdit

    def shows_text(widget: QWidget) -> bool:
        if isinstance(widget, QLabel):
            return bool(widget.text().strip())
        if isinstance(widget, (QPlainTextEdit, QTextEdit)):
            return bool(widget.toPlainText().strip())
        if isinstance(widget, QLineEdit):
            return bool(widget.text().strip())
        return isinstance(widget, QAbstractItemView) and widget.model() is not None and widget.model().rowCount() > 0

    found = []
    part = within or root
    kinds = (QLabel, QPlainTextEdit, QTextEdit, QLineEdit, QAbstractItemView)
    for widget in [w for kind in kinds for w in part.findChildren(kind)]:
        if not widget.isVisibleTo(root) or widget.width() < 8 or widget.height() < 8 or not shows_text(widget):
            continue
        # as drawn on its window (ancestors paint a label's background); a text box's text area only, without its
        # frame or scroll bars (the farthest pixel from the background would be theirs)
        drawn = widget.viewport() if isinstance(widget, (QPlainTextEdit, QTextEdit, QAbstractItemView)) else widget
        # only the part a scroll area shows (a tall page's rows below the fold are not drawn: checking there would
        # read the window's background as their text)
        shown = drawn.visibleRegion().boundingRect()
        if shown.width() < 8 or shown.height() < 8:
            continue
        image = root.grab(QRect(drawn.mapTo(root, shown.topLeft()), shown.size())).toImage()
        step = max(1, image.width() * image.height() // 4000)
        pixels = [image.pixelColor(x, y) for y in range(0, image.height(), 2) for x in range(0, image.width(), step)]
        lum = [luminance(c.red(), c.green(), c.blue()) for c in pixels]
        background = Counter(round(v, 3) for v in lum).most_common(1)[0][0]
        text = max(lum, key=lambda v: abs(v - background))
        light, dark = max(background, text), min(background, text)
        ratio = (light + 0.05) / (dark + 0.05)
        if ratio < minimum:
            name = widget.objectName() or type(widget).__name__
            found.append(f"{name!r} contrast {ratio:.1f}")
    return found


def dialog_problems(app, win, shot: Path) -> list[str]:
    """Every dialog and settings page, in this theme and size: on screen, no squeezed button, readable text."""
    found: list[str] = []
    screen = win.screen().availableGeometry()

    def look(widget: QWidget, name: str) -> None:
        for _ in range(20):
            app.processEvents()
        frame = widget.frameGeometry()
        if frame.width() > screen.width() + 2 or frame.height() > screen.height() + 2:
            found.append(f"{name} is {frame.width()}x{frame.height()} on a {screen.width()}x{screen.height()} screen")
        found.extend(f"{name}: {p}" for p in squeezed_buttons(widget) if "outside" not in p)
        found.extend(f"{name}: {p}" for p in faint_texts(widget))
        widget.grab().save(str(shot.with_name(f"{shot.stem}-{name}.png")))

    settings = win.open_settings()
    for row in range(settings.nav.count()):
        settings.nav.setCurrentRow(row)
        look(settings, "settings-" + settings.nav.item(row).text().lower().replace(" ", "-"))
    settings.reject()
    models = win.open_models_dialog()
    from PySide6.QtCore import QDeadlineTimer

    judged = QDeadlineTimer(30_000)  # the catalog is judged off the window's thread: its rows are what to look at
    while models.tree.topLevelItemCount() == 0 and not judged.hasExpired():
        app.processEvents()
    if models.tree.topLevelItemCount() == 0:
        found.append("get-models: the catalog was not shown within 30 s")
    look(models, "get-models")
    models.hide()
    shortcuts = win.show_shortcuts()
    look(shortcuts, "shortcuts")
    shortcuts.close()
    return found


def pictures_shown(app, win, shot: Path) -> list[str]:
    """Two pictures in the tray above the message box (their cost line in contrast) and in a sent message, and
    the viewer showing one whole (it fits the screen)."""
    from PIL import Image

    folder = shot.parent / f"{shot.stem}-pictures"
    folder.mkdir(parents=True, exist_ok=True)
    attached = []
    for number, (size, colour) in enumerate((((1600, 900), (40, 110, 200)), ((600, 900), (200, 120, 40)))):
        path = folder / f"photo-{number}.png"
        Image.new("RGB", size, colour).save(path)
        attached.append(win.core.pictures.intake.take_file(path))
    for picture in attached:
        win.picture_tray.add(picture.digest, picture.path)
    win.pictures.show_cost()
    win.chat_view.add_message("user", "What is in these two pictures? " * 4, pictures=tuple(p.path for p in attached))
    for _ in range(20):
        app.processEvents()
    found = [f"picture tray: {p}" for p in faint_texts(win, within=win.picture_tray)]
    if not win.picture_tray.cost.text():
        found.append("picture tray: no cost line")
    viewer = win.pictures.show_picture(attached[0].path)
    for _ in range(20):
        app.processEvents()
    screen = win.screen().availableGeometry()
    frame = viewer.frameGeometry()
    if frame.width() > screen.width() + 2 or frame.height() > screen.height() + 2:
        found.append(f"picture viewer is {frame.width()}x{frame.height()} on {screen.width()}x{screen.height()}")
    viewer.grab().save(str(shot.with_name(f"{shot.stem}-picture-viewer.png")))
    viewer.close()
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
    problems += pictures_shown(app, win, shot)
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
    problems += dialog_problems(app, win, shot)
    print(json.dumps({"problems": problems, "window": [win.width(), win.height()],
                      "chat_width": win.chat_view.width(), "streaming_checks": streaming_checks}))  # fmt: skip
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
