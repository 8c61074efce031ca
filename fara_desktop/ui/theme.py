"""Light, dark or the system's choice, and the font size, applied to the whole application."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from fara_desktop.resources import asset_path


def resolve_theme(theme: str) -> str:
    if theme in ("light", "dark"):
        return theme
    scheme = QGuiApplication.styleHints().colorScheme()
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def apply_appearance(app: QApplication, theme: str, font_size: int) -> str:
    """Apply and return the theme actually used ("light" or "dark")."""
    used = resolve_theme(theme)
    light = asset_path("style.qss").read_text(encoding="utf-8")
    sheet = light if used == "light" else light + "\n" + asset_path("style-dark.qss").read_text(encoding="utf-8")
    palette = app.palette()
    palette.setColor(QPalette.ColorRole.Link, QColor("#8ab4ff" if used == "dark" else "#2f5fd8"))
    app.setPalette(palette)
    font = app.font()
    font.setPointSize(font_size)
    app.setFont(font)
    app.setStyleSheet(sheet)
    return used
