"""SIGTERM, SIGHUP and SIGINT — a logout, a shutdown, `kill`, Ctrl+C in the terminal that started the app — reach the
window's quit path (Ctrl+Q's) through Qt's event loop.

A Python signal handler alone does not run while Qt waits in C++ for events: the interpreter gets control only when
an event comes. ``signal.set_wakeup_fd`` makes the C-level handler write the signal's number to a socket; a
``QSocketNotifier`` on the other end wakes the loop, and the quit starts there, on the GUI thread, as a user's would.
A second signal while the quit runs (the session will not wait, or the user pressed Ctrl+C twice) ends the process
at once, its children first.
"""

from __future__ import annotations

import logging
import signal
import socket
from types import FrameType
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, Signal

from fara_desktop.system.process_end import end_child_processes, exit_now

log = logging.getLogger(__name__)

QUIT_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name)
)


class QuitSignals(QObject):
    """Turns the session's quit signals into ``received(name)`` on the GUI thread, once; ``close`` gives the
    signals back to what handled them before."""

    received = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._quitting = False
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._previous: dict[signal.Signals, Any] = {sig: signal.signal(sig, self._on_signal) for sig in QUIT_SIGNALS}
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Python runs this on the main thread between two bytecodes, before the notifier's slot (the wakeup byte is
        # written by the C handler). Only a second signal acts here: the first is the loop's to handle.
        if self._quitting:
            log.warning("%s while quitting: ending now", signal.Signals(signum).name)
            end_child_processes(grace_s=0.2)
            exit_now(0)

    def _drain(self) -> None:
        try:
            numbers = self._reader.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        if self._quitting or not numbers:
            return
        self._quitting = True
        name = signal.Signals(numbers[0]).name if numbers[0] in {int(s) for s in signal.Signals} else "a signal"
        log.info("%s received: quitting as Ctrl+Q does", name)
        self.received.emit(name)

    def close(self) -> None:
        self._notifier.setEnabled(False)
        signal.set_wakeup_fd(self._previous_fd)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._reader.close()
        self._writer.close()
