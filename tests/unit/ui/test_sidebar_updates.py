"""A Send updates the chat's own row in the list, not the whole list (issue 28: each Send listed every
conversation twice, and looking one up walked the full list: ~58 ms of GUI work per Send at 2,000 chats)."""

from __future__ import annotations

from fara_desktop.chats.storage import ConversationStore
from tests.helpers.screenshots import keep_screenshot


def test_a_send_reads_no_conversation_list_and_moves_its_chat_to_the_top(window, qtbot, monkeypatch):
    win = window()
    store = win.store
    with store.transaction() as db:
        db.executemany(
            "INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)",
            [(f"Old chat {n}", 1_600_000_000 + n, 1_600_000_000 + n) for n in range(2000)],
        )
    win.refresh_sidebar()
    assert win.sidebar.list.count() == 2000
    listings: list[object] = []
    original = ConversationStore.conversations
    monkeypatch.setattr(
        ConversationStore, "conversations", lambda self, *a, **k: listings.append(a) or original(self, *a, **k)
    )
    win.composer.setPlainText("A brand new question")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    assert listings == []  # no Send step read the whole list
    ids = win.sidebar.ids()
    assert len(ids) == 2001 and ids[0] == win.session.conversation_id
    top = win.sidebar.list.item(0)
    assert top.text().startswith("A brand new question") and "2 messages" in top.text()
    assert win.sidebar.list.currentItem() is top
    monkeypatch.setattr(ConversationStore, "conversations", original)
    win.sidebar.search.setText("Old chat 1999")  # while a search filters the list, the filter is kept
    qtbot.waitUntil(lambda: win.sidebar.list.count() == 1)
    win.composer.setPlainText("Another question")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    assert [win.sidebar.list.item(i).text().split("\n")[0] for i in range(win.sidebar.list.count())] == [
        "Old chat 1999"
    ]


def test_a_search_with_no_hits_says_so_and_escape_clears_it(window, qtbot):
    """A search that found nothing showed an empty list (as if there were no chats), and Esc did not clear it
    (issue 43, item 13; issue 53, item 8: in an active window the window's Esc shortcut took it first)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    win = window()
    win.composer.setPlainText("Lisbon trams")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    win.activateWindow()  # as on a desktop: the window's own Esc (stop, cancel an edit) is live, and took the key
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win, timeout=5000)
    sidebar = win.sidebar
    sidebar.search.setFocus()
    qtbot.keyClicks(sidebar.search, "zeppelin")
    qtbot.waitUntil(lambda: sidebar.list.count() == 0 and sidebar.no_matches.isVisibleTo(sidebar), timeout=5000)
    assert "zeppelin" in sidebar.no_matches.text()
    qtbot.keyClick(sidebar.search, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: sidebar.list.count() == 1 and not sidebar.no_matches.isVisibleTo(sidebar), timeout=5000)
    assert sidebar.search.text() == ""


def test_a_search_shows_where_it_matched_and_a_branchs_title_keeps_its_end(window, qtbot):
    """Issue 43, item 13: no hint of where a search matched; "(branch)" cut off so two titles looked the same; the
    system prompt field had no label."""
    from PySide6.QtCore import Qt

    win = window()
    win.composer.setPlainText("Tell me about the trams of Lisbon and their yellow wooden cars, please")
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    sidebar = win.sidebar
    qtbot.keyClicks(sidebar.search, "yellow")
    qtbot.waitUntil(lambda: sidebar.list.count() == 1 and "yellow wooden" in sidebar.list.item(0).text(), timeout=5000)
    assert sidebar.list.textElideMode() == Qt.TextElideMode.ElideMiddle  # "… (branch)" stays visible
    label = win.findChild(type(win.status_label), "systemPromptLabel")
    assert label is not None and label.buddy() is win.system_prompt and label.isVisible()


def test_a_searchs_match_line_keeps_the_word_that_matched_at_the_lists_narrowest(window, qtbot):
    """Issue 53, item 8: the list cuts lines in their middle (for titles), and cut out the matched word:
    "…heritage an…ng the reig…" for "Eiffel"."""
    win = window()
    text = ("The tour guide spoke at length about French heritage and the long reign of kings before she finally "
            "turned to the Eiffel tower, its iron lattice and the engineers who raised it for the fair of 1889.")
    win.composer.setPlainText(text)
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        win.send_button.click()
    sidebar = win.sidebar
    win.splitter.setSizes([sidebar.minimumWidth(), 900, 300])
    qtbot.keyClicks(sidebar.search, "Eiffel")
    qtbot.waitUntil(lambda: sidebar.list.count() == 1 and "Eiffel" in sidebar.list.item(0).text(), timeout=5000)
    line = sidebar.list.item(0).text().split("\n")[-1]
    metrics = sidebar.list.fontMetrics()
    assert metrics.horizontalAdvance(line) <= sidebar.list.viewport().width()  # the list has nothing to cut
    assert "Eiffel" in line and line.startswith("“…")
    keep_screenshot(win, "fixed-search-match-line")
    win.resize(win.width() + 400, win.height())  # wider: the line shows more
    qtbot.waitUntil(lambda: len(sidebar.list.item(0).text().split("\n")[-1]) >= len(line), timeout=5000)
