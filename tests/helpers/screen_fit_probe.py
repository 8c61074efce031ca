"""Run in a child process (so that QT_SCALE_FACTOR applies): open the main window and each dialog on a scripted
engine, print one JSON line with each one's frame and the screen's free area, in logical pixels."""

from __future__ import annotations

import json

from PySide6.QtCore import QRect
from PySide6.QtTest import QTest

from fara_desktop.ui.application import create_application
from fara_desktop.ui.main_window import MainWindow
from tests.helpers.fakes import FakeBackend


def rect(r: QRect) -> list[int]:
    return [r.x(), r.y(), r.width(), r.height()]


def main() -> None:
    app = create_application()
    win = MainWindow(backend=FakeBackend())
    win.show()
    QTest.qWaitForWindowExposed(win)
    report = {"screen": rect(win.screen().availableGeometry()), "main": rect(win.frameGeometry())}
    for name, dialog in (("settings", win.open_settings()), ("models", win.open_models_dialog())):
        QTest.qWaitForWindowExposed(dialog)
        report[name] = rect(dialog.frameGeometry())
        dialog.reject()
    print(json.dumps(report), flush=True)
    win.close()
    app.processEvents()


if __name__ == "__main__":
    main()
