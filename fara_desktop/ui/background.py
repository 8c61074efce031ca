"""Run a blocking call off the GUI thread and get its result back as a signal."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal


class BackgroundCall(QObject):
    """Calls ``fn`` on a daemon thread; emits ``done(result)`` or ``failed(exception)`` on the GUI thread."""

    done = Signal(object)
    failed = Signal(object)

    def __init__(self, fn: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._fn = fn

    def start(self) -> BackgroundCall:
        threading.Thread(target=self._run, name="fara-background", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            result = self._fn()
        except Exception as exc:
            self.failed.emit(exc)
        else:
            self.done.emit(result)
