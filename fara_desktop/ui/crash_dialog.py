"""Uncaught exceptions become a short dialog that points at the log file, never a silent exit."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path
from types import TracebackType

from PySide6.QtWidgets import QApplication, QMessageBox

from fara_desktop.ui.widgets.plain_text import plain_message_box

log = logging.getLogger("fara_desktop.crash")


def install_exception_dialog(log_file: Path) -> None:
    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        log.error("Uncaught exception:\n%s", "".join(traceback.format_exception(kind, value, tb)))
        if QApplication.instance() is None:
            sys.__excepthook__(kind, value, tb)
            return
        box = plain_message_box(
            QMessageBox.Icon.Critical,
            "Fara Desktop — unexpected error",
            f"{kind.__name__}: {value}",
            detail=f"Your conversations are safe. Details were written to:\n{log_file}",
        )
        box.addButton(QMessageBox.StandardButton.Ok)
        box.exec()

    sys.excepthook = hook
