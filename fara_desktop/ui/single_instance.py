"""One running Fara Desktop per user and data folder: a second launch brings the first window forward and exits.

Two processes on the same SQLite database and settings file would fight over them. A ``QLockFile`` in the data
folder decides who is first (a lock left by a crashed process is taken over: its PID is gone); the first process
also listens on a per-user local socket, and a later launch connects to it to say "show yourself".
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import stat
import sys
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from fara_desktop.files.paths import private_temp_dir

log = logging.getLogger(__name__)

ACTIVATE = b"activate\n"
ACKNOWLEDGED = b"ok\n"


def server_name(data_dir: Path) -> str:
    """Per user and per data folder (so ``FARA_HOME`` sandboxes, such as the tests', do not see each other).

    On Unix a bare name becomes a socket at a predictable path in /tmp, which another user can create first and
    then answer our launches (or make us think we are already running). The socket lives in the user's private
    runtime folder instead ($XDG_RUNTIME_DIR, or a checked private folder in the temporary directory). On Windows
    the name is a named pipe in the user's session."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    digest = hashlib.sha256(f"{user}\0{data_dir.resolve()}".encode()).hexdigest()[:16]
    name = f"fara-desktop-{digest}"
    if sys.platform.startswith("win"):
        return name
    return str(private_runtime_dir() / f"{name}.sock")


def private_runtime_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        try:
            info = os.stat(runtime)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
                return Path(runtime)
        except OSError:
            pass
    return private_temp_dir("fara-desktop-run")


class SingleInstance(QObject):
    """Holds the instance lock and answers later launches; emits ``activationRequested`` when one arrives."""

    activationRequested = Signal()

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = server_name(data_dir)
        self._lock = QLockFile(str(data_dir / "instance.lock"))
        self._lock.setStaleLockTime(0)  # stale only when the owning process is gone, however long it ran
        self._server: QLocalServer | None = None

    def acquire(self) -> bool:
        """True when this process is the first one (and now listens); False when another one holds the lock.
        A lock that cannot even be written (read-only data folder) does not keep the app from starting."""
        if not self._lock.tryLock(0):
            if self._lock.error() == QLockFile.LockError.LockFailedError:
                return False
            log.warning("single-instance lock unavailable (%s); starting anyway", self._lock.error())
        QLocalServer.removeServer(self.name)  # a socket file left behind by a crash would block listen()
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        server.newConnection.connect(self._answer)
        if not server.listen(self.name):
            log.warning("single-instance socket %s: %s", self.name, server.errorString())
        self._server = server
        return True

    def ask_running_instance_to_show(self, timeout_ms: int = 3000) -> bool:
        """Called by a later launch: True when the running instance answered."""
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(timeout_ms):
            return False
        socket.write(ACTIVATE)
        socket.waitForBytesWritten(timeout_ms)
        answered = socket.waitForReadyRead(timeout_ms) and bytes(socket.readAll().data()) == ACKNOWLEDGED
        socket.disconnectFromServer()
        return answered

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._lock.unlock()

    def _answer(self) -> None:
        assert self._server is not None
        while (socket := self._server.nextPendingConnection()) is not None:
            socket.setParent(self)
            socket.readyRead.connect(lambda s=socket: self._read(s))
            socket.disconnected.connect(socket.deleteLater)
            if socket.bytesAvailable():
                self._read(socket)

    def _read(self, socket: QLocalSocket) -> None:
        if socket.canReadLine() and bytes(socket.readLine().data()) == ACTIVATE:
            socket.write(ACKNOWLEDGED)
            socket.flush()
            self.activationRequested.emit()
