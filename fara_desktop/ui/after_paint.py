"""Run something once a widget has been painted: work that would compete with a paint for the CPU waits for it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget


class AfterPaint(QObject):
    """Calls ``then`` once, on the turn of the event loop after ``widget``'s next paint — or after ``fallback_ms``
    when no paint comes (the window is minimised or covered), and on the next turn when the widget is not shown
    at all. With ``fallback_ms=None`` it waits for a paint however long that takes.

    Qt paints a changed widget a few milliseconds after the change (Qt 6 coalesces update requests on a timer), so
    a zero-time timer started with the change fires *before* the paint; this waits for the paint itself."""

    def __init__(self, widget: QObject, then: Callable[[], None], fallback_ms: int | None = 100) -> None:
        super().__init__(widget)
        self._then: Callable[[], None] | None = then
        self._widget = widget
        widget.installEventFilter(self)
        if fallback_ms is None:  # only a paint will do (a window about to be shown for the first time)
            return
        if isinstance(widget, QWidget) and not widget.isVisible():
            QTimer.singleShot(0, self, self._run)
        else:
            QTimer.singleShot(fallback_ms, self, self._run)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if self._then is not None and event.type() == QEvent.Type.Paint:
            QTimer.singleShot(0, self, self._run)
        return False

    def _run(self) -> None:
        then, self._then = self._then, None
        if then is None:
            return
        self._widget.removeEventFilter(self)
        self.deleteLater()
        then()
