"""Run a blocking call off the GUI thread and get its result back as a signal."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from PySide6.QtCore import QObject, Signal

from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)


class BackgroundCall(QObject):
    """Calls ``fn`` on a daemon thread; emits ``done(result)`` or ``failed(exception)`` on the GUI thread.

    The call is never a child of the widget that asked for it: a window closed (and deleted) while its scan still
    runs would delete the call with it, and the thread would then emit from a deleted object ("Signal source has
    been deleted"). Instead the class keeps every running call alive until its result has reached the GUI thread,
    and a call whose ``owner`` was destroyed delivers nothing. A plain daemon thread rather than QThreadPool: a scan
    stuck on a dead network mount must not hold up quitting, and the global pool waits for its tasks at exit.
    """

    done = Signal(object)
    failed = Signal(object)
    _settled = Signal(bool, object)  # from the thread, received on the GUI thread: (succeeded, result or error)

    _running: ClassVar[set[BackgroundCall]] = set()

    def __init__(self, fn: Callable[[], Any], owner: QObject | None = None) -> None:
        super().__init__()
        self._fn = fn
        self._owner_gone = False
        if owner is not None:
            owner.destroyed.connect(self._forget_owner)
        self._settled.connect(self._deliver)

    def _forget_owner(self) -> None:
        self._owner_gone = True

    def start(self) -> BackgroundCall:
        BackgroundCall._running.add(self)
        threading.Thread(target=self._run, name="fara-background", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            result = self._fn()
        except FaraError as exc:  # a refusal the caller turns into a sentence: its message is the cause
            log.info("A background task ended: %s: %s", type(exc).__name__, exc)
            self._settle(False, exc)
        except Exception as exc:  # a bug: the caller shows a sentence, the log keeps where it happened
            log.warning("A background task failed", exc_info=True)
            self._settle(False, exc)
        else:
            self._settle(True, result)

    def _settle(self, succeeded: bool, value: object) -> None:
        try:
            self._settled.emit(succeeded, value)
        except RuntimeError:  # Qt itself is gone (the app quit while this ran): nobody is left to tell
            log.debug("A background task ended after the application", exc_info=True)

    def _deliver(self, succeeded: bool, value: object) -> None:
        """On the GUI thread, where the owner's destruction is also handled: no race between the two."""
        BackgroundCall._running.discard(self)
        if not self._owner_gone:
            (self.done if succeeded else self.failed).emit(value)
