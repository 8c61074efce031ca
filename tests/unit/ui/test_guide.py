"""Issue 64, item 9: Help had no link to the guide. Help ▸ User guide opens it offline (the guide ships with the app),
searchable, at the section for the screen the user is on."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from fara_desktop.files.resources import asset_path
from fara_desktop.ui.dialogs.guide_dialog import GuideDialog
from tests.helpers.screenshots import keep_screenshot

REPO_GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guide.md"


def at_top(guide: GuideDialog) -> str:
    """The text of the block at the top of the guide's view (what the reader sees first)."""
    return guide.browser.cursorForPosition(guide.browser.viewport().rect().topLeft()).block().text()


def test_the_guide_ships_with_the_app_as_the_repository_writes_it():
    assert asset_path("guide.md").read_text(encoding="utf-8") == REPO_GUIDE.read_text(encoding="utf-8")


def test_help_opens_the_guide_at_the_screens_section_and_searches_it(window, qtbot):
    win = window()
    menus = {a.text().replace("&", ""): a.menu() for a in win.menuBar().actions()}
    actions = {a.text().replace("&", ""): a for a in menus["Help"].actions()}
    actions["User guide"].trigger()
    guides = [d for d in win.findChildren(GuideDialog) if d.isVisible()]
    assert len(guides) == 1
    qtbot.waitUntil(lambda: at_top(guides[0]) == "What it does", timeout=5000)
    guide = guides[0]
    guide.search.setText("MCP server")
    qtbot.keyClick(guide.search, Qt.Key.Key_Return)
    assert guide.browser.textCursor().selectedText() == "MCP server" and guide.status.text() == ""
    keep_screenshot(guide, "issue64-9-user-guide-searched")
    guide.search.setText("no such words in any guide")
    assert not guide.find_next() and "not in the guide" in guide.status.text()
    guide.close()

    dialog = win.open_settings()
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Help).click()
    at_settings = [d for d in dialog.findChildren(GuideDialog) if d.isVisible()]
    assert len(at_settings) == 1
    qtbot.waitUntil(lambda: at_top(at_settings[0]) == "Settings", timeout=5000)
    at_settings[0].close()
    dialog.reject()
