"""Light, dark or the system's choice, and the font size, applied to the whole application."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from fara_desktop.files.resources import asset_path

# Colours set on items in code (not reachable by the style sheet), per theme: a verdict's text, and the row of the
# recommended model (background, text). Dark-theme ones keep a contrast of at least 4.5 on the dark background.
VERDICT_COLORS = {
    "light": {"fits": "#1f7a3a", "slow": "#9a6700", "tight": "#9a6700", "too_big": "#b42318"},
    "dark": {"fits": "#6fd39a", "slow": "#e8b95a", "tight": "#e8b95a", "too_big": "#ff8a80"},
}
RECOMMENDED_ROW = {"light": ("#e3f2e6", "#14301d"), "dark": ("#1d3a28", "#e3f2e6")}
_in_use = ["light"]


def theme_in_use() -> str:
    """The theme the last ``apply_appearance`` applied ("light" until one did)."""
    return _in_use[0]


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
    sheet = sheet.replace("@theme@", asset_path("theme").as_posix())  # the sheets' images, wherever the app is
    palette = dark_palette() if used == "dark" else app.style().standardPalette()
    palette.setColor(QPalette.ColorRole.Link, QColor("#8ab4ff" if used == "dark" else "#2f5fd8"))
    app.setPalette(palette)
    font = app.font()
    font.setPointSize(font_size)
    app.setFont(font)
    app.setStyleSheet(sheet)
    _in_use[0] = used
    return used


# The dark theme's colours for what the style sheet does not name: every text box, read-only or not (the arguments a
# person approves, a cited passage, a download's status, the MCP servers' JSON), list and combo-box popups, tool
# tips. With the light palette under the dark sheet they were white with pale-grey text.
DARK_PALETTE = {
    QPalette.ColorRole.Window: "#17191d",
    QPalette.ColorRole.WindowText: "#e3e6eb",
    QPalette.ColorRole.Base: "#22252b",
    QPalette.ColorRole.AlternateBase: "#1c1f24",
    QPalette.ColorRole.Text: "#e3e6eb",
    QPalette.ColorRole.PlaceholderText: "#8a93a1",
    QPalette.ColorRole.Button: "#2a2e35",
    QPalette.ColorRole.ButtonText: "#e3e6eb",
    QPalette.ColorRole.BrightText: "#ffffff",
    QPalette.ColorRole.ToolTipBase: "#2a2e35",
    QPalette.ColorRole.ToolTipText: "#e3e6eb",
    QPalette.ColorRole.Highlight: "#2b3c66",
    QPalette.ColorRole.HighlightedText: "#ffffff",
}
DARK_DISABLED_TEXT = "#7d8594"  # 4.6:1 on the dark base


def dark_palette() -> QPalette:
    palette = QPalette()
    for role, colour in DARK_PALETTE.items():
        palette.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(DARK_DISABLED_TEXT))
    return palette
