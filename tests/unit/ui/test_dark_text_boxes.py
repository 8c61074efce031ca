"""Every text box reads in the dark theme as in the light one (issue 53, item 1): read-only ones were white with
pale-grey text — the arguments a person approves, a cited passage, Settings ▸ Tools' servers."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from fara_desktop.ui.theme import apply_appearance
from tests.helpers.screenshots import keep_screenshot
from tests.helpers.visual_check import faint_texts


@pytest.fixture
def themed():
    """Applies a theme; what it changed is put back as it was (the same sheet, palette and font), before the test's
    windows go. Applying another sheet there instead crashed Qt inside ``setStyleSheet`` one run in two, under
    pytest-qt only (not reproduced in the app, toggled 20 times with its window open)."""
    app = QApplication.instance()
    before = app.styleSheet(), app.palette(), app.font()
    yield lambda theme: apply_appearance(app, theme, 10)
    app.setStyleSheet(before[0])
    app.setPalette(before[1])
    app.setFont(before[2])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_arguments_a_person_approves_and_the_tools_json_read_in_both_themes(window, qtbot, themed, theme):
    themed(theme)
    win = window()
    win.resize(1100, 700)
    win.tool_approval.ask("write_file", "files", '{\n  "path": "/home/me/notes.txt",\n  "text": "hello"\n}', 1, 1)
    qtbot.waitUntil(win.tool_approval.isVisible, timeout=2000)
    assert faint_texts(win, 4.5, within=win.tool_approval) == []
    keep_screenshot(win, f"fixed-approval-arguments-{theme}")
    dialog = win.open_settings("Tools")
    page = dialog.tools_page
    dialog.show()
    qtbot.waitUntil(page.isVisible, timeout=2000)
    assert faint_texts(dialog, 4.5, within=page) == []
    dialog.reject()
