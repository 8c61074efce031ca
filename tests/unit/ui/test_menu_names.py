"""Every "Menu ▸ Item" the app or the README tells a user names a menu item or a Settings page that exists
(issue 28: "File ▸ Open model" and "Settings ▸ Models" named places that were never there)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.paths import REPO_ROOT
from tests.helpers.screenshots import keep_screenshot

PLACE = re.compile(r"\b(Chat|Message|View|Model|Help|File|Edit|Settings) ▸ ([A-Za-z][A-Za-z …'()-]*)")


def told_places() -> list[tuple[str, str, str]]:
    """(where, menu, item) for each place named in the source's strings and the README."""
    files = [*sorted((REPO_ROOT / "fara_desktop").rglob("*.py")), REPO_ROOT / "README.md",
             *sorted((REPO_ROOT / "docs").glob("*.md"))]  # fmt: skip
    found = []
    for file in files:
        for menu, item in PLACE.findall(file.read_text(encoding="utf-8")):
            found.append((str(Path(file).relative_to(REPO_ROOT)), menu, item.strip()))
    return found


def test_every_menu_and_settings_page_a_text_names_exists(window):
    win = window()
    menus = {
        action.text().replace("&", ""): [a.text().replace("&", "") for a in action.menu().actions() if a.text()]
        for action in win.menuBar().actions()
    }
    dialog = win.open_settings()
    pages = [dialog.nav.item(row).text() for row in range(dialog.nav.count())]
    dialog.reject()
    places = told_places()
    assert len(places) >= 5
    wrong = []
    for where, menu, item in places:
        choices = pages if menu == "Settings" else menus.get(menu, [])
        if not any(item == choice or item.startswith(f"{choice} ") or choice.startswith(item) for choice in choices):
            wrong.append(f"{where}: {menu} ▸ {item}")
    assert wrong == []


def test_settings_are_where_desktop_users_look(window, qtbot):
    """Issue 64, item 12: Settings sat under the Model menu only. Edit ▸ Preferences… (Ctrl+,) and a button in the
    window's header open it; the Model menu keeps its link."""
    from PySide6.QtCore import Qt

    win = window()
    menus = {a.text().replace("&", ""): a.menu() for a in win.menuBar().actions()}
    edit = {a.text().replace("&", ""): a for a in menus["Edit"].actions()}
    assert edit["Preferences…"].shortcut().toString() == "Ctrl+,"
    assert "Settings…" in [a.text().replace("&", "") for a in menus["Model"].actions()]
    opened = []
    win.open_settings = lambda page=None: opened.append(page)  # type: ignore[method-assign]
    qtbot.mouseClick(win.settings_button, Qt.MouseButton.LeftButton)
    assert opened == [None] and win.settings_button.isVisible()
    keep_screenshot(win, "issue64-12-settings-button-in-the-header")
