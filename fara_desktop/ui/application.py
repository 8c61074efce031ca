"""The Qt application: create it (logging, icon, theme), and run the main window until the user quits."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fara_desktop import APP_ID, APP_NAME, __version__
from fara_desktop.files.paths import app_paths
from fara_desktop.settings import Settings, load_settings
from fara_desktop.system.process_end import end_child_processes, exit_now
from fara_desktop.ui.xcb_help import install_advice, missing_xcb_libraries

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication

    from fara_desktop.ui.main_window import MainWindow


def has_display() -> bool:
    if os.environ.get("QT_QPA_PLATFORM"):
        return True
    # Only Linux needs a display server named in the environment; Windows and macOS always have their own.
    needs_display_server = sys.platform.startswith("linux")
    return not needs_display_server or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def qt_fatal_help(message: str) -> str:
    """What to tell a person when Qt gives up: for a display plugin that failed, the libraries this system lacks
    (from the xcb plugin's own dependencies) and the command that installs them."""
    first_line = message.strip().splitlines()[0] if message.strip() else "unknown Qt error"
    if "platform plugin" not in message:
        return f"fara-desktop: Qt stopped the program: {first_line}"
    opening = (
        f"fara-desktop: the window could not be opened because Qt's display plugin failed to start ({first_line}).\n"
    )
    closing = "  Without a display, `fara-desktop smoke` runs a headless check."
    missing = missing_xcb_libraries() if sys.platform.startswith("linux") else None
    if missing:
        return f"{opening}  Qt's X11 plugin needs system libraries this computer does not have.\n" + (
            f"{install_advice(missing)}\n{closing}"
        )
    return (
        f"{opening}  On Linux/X11 this usually means a missing system library (Debian/Ubuntu: sudo apt install "
        "libxcb-cursor0), or try QT_QPA_PLATFORM=wayland or xcb.\n" + closing
    )


def create_application(settings: Settings | None = None) -> QApplication:
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from fara_desktop.files.resources import asset_path
    from fara_desktop.ui.theme import apply_appearance

    qt_log = logging.getLogger("qt")
    levels = {
        QtMsgType.QtDebugMsg: logging.DEBUG,
        QtMsgType.QtInfoMsg: logging.INFO,
        QtMsgType.QtWarningMsg: logging.WARNING,
        QtMsgType.QtCriticalMsg: logging.ERROR,
        QtMsgType.QtFatalMsg: logging.CRITICAL,
    }

    def handle(kind: QtMsgType, _context: object, message: str) -> None:
        # Qt's own chatter ("This plugin does not support propagateSizeHints()") goes to the log file, not the
        # terminal. A fatal message is followed by abort(): say what happened in words first, then exit cleanly.
        qt_log.log(levels.get(kind, logging.INFO), "%s", message)
        if kind == QtMsgType.QtFatalMsg:
            print(qt_fatal_help(message), file=sys.stderr, flush=True)
            logging.shutdown()
            os._exit(2)

    qInstallMessageHandler(handle)
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0]])
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setDesktopFileName(APP_ID)
    app.setWindowIcon(QIcon(str(asset_path("fara-desktop.svg"))))
    settings = settings or Settings()
    apply_appearance(app, settings.theme, settings.font_size)
    return app


def run_gui(model: Path | None, log_file: Path, on_window: Callable[[MainWindow], None] | None = None) -> int:
    """Show the main window (one per user: a second launch brings the first to the front) and run the event loop;
    ``on_window`` sees the window before its model is chosen (the benchmark's start-up probe uses it)."""
    if not has_display():
        print(
            "fara-desktop: no display found (DISPLAY / WAYLAND_DISPLAY are not set). "
            "Run it from a desktop session, or try `fara-desktop smoke` for a headless check.",
            file=sys.stderr,
        )
        return 2
    paths = app_paths().ensure()
    loaded = load_settings(paths.config)
    app = create_application(loaded.settings)
    from fara_desktop.ui.crash_dialog import install_exception_dialog
    from fara_desktop.ui.main_window import MainWindow
    from fara_desktop.ui.quit_signals import QuitSignals
    from fara_desktop.ui.single_instance import SingleInstance

    instance = SingleInstance(paths.data)
    if not instance.acquire():
        if instance.ask_running_instance_to_show():
            print("Fara Desktop is already running: its window was brought to the front.")
            return 0
        print(
            f"fara-desktop: another Fara Desktop holds {paths.data / 'instance.lock'} but does not answer; "
            "close it (or end its process) and try again.",
            file=sys.stderr,
        )
        return 1
    install_exception_dialog(log_file)
    quit_signals = QuitSignals()  # from before the window: a logout while it opens still quits cleanly
    window = MainWindow(paths=paths, settings=loaded.settings)
    quit_signals.received.connect(lambda _name: end_session(app, window))
    instance.activationRequested.connect(window.bring_to_front)
    window.show()
    if loaded.notice:
        window.show_notice(loaded.notice)
    if on_window is not None:
        on_window(window)
    window.start_auto(model)
    try:
        code = app.exec()
    finally:
        instance.release()
        quit_signals.close()
    end_child_processes()  # none outlives the app (an owner that ran out of time could not end its own)
    if window.late_jobs:  # threads still inside llama.cpp or a server: not waited for at the interpreter's exit
        exit_now(code)
    return code


def end_session(app: QApplication, window: MainWindow) -> None:
    """The session ends (SIGTERM, SIGHUP, SIGINT): the quit Ctrl+Q starts. A dialog open in its own event loop is
    closed first, and the window once that loop has returned."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QDialog

    for widget in app.topLevelWidgets():
        if isinstance(widget, QDialog) and widget.isVisible():
            widget.reject()

    def close() -> None:
        window.close()
        app.quit()

    QTimer.singleShot(0, close)
