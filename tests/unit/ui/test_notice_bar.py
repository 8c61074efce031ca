"""Notices live in the notice bar, not in the transcript (issue 29, item 7): a new empty chat stays empty, the same
notice after every Settings OK is shown once, earlier notices are under History, and × dismisses."""

from __future__ import annotations


def test_notices_go_to_the_bar_with_a_history_and_never_into_a_chat(window):
    win = window()
    win.new_chat()
    for _ in range(3):  # e.g. "The local API did not start" after each Settings OK
        win.show_notice("The local API did not start: address already in use", "error")
    assert win.chat_view.messages() == [] and win.chat_view.empty_state.isVisibleTo(win)
    bar = win.notice_bar
    assert bar.isVisibleTo(win) and bar.label.text().startswith("The local API did not start")
    assert bar.texts() == ["The local API did not start: address already in use"]
    win.show_notice("Imported 2 chats")
    assert bar.label.text() == "Imported 2 chats" and bar.property("role") == "notice"
    bar.history_menu.aboutToShow.emit()
    entries = [a.text() for a in bar.history_menu.actions()]
    assert len(entries) == 2 and "Imported 2 chats" in entries[0] and "⚠ The local API" in entries[1]
    bar.close_button.click()
    assert not bar.isVisibleTo(win)
    bar.history_menu.actions()[1].trigger()  # shown again from History
    assert bar.isVisibleTo(win) and bar.property("role") == "error"
