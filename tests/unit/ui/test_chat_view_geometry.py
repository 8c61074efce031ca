"""The chat follows a long reply at every width (issue 29, item 1): the newest text lies inside the viewport while
the reply streams and after it ends. Each prose label used to claim its size hint (Qt's guess at 80 characters
per line) as its minimum height, so a long reply of many paragraphs made the content hundreds of pixels taller
than its text and the view, scrolled to the bottom, showed empty space."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint

from fara_desktop.chats.draft import ReplyDraft
from fara_desktop.ui.widgets.chat_view import ChatView
from tests.helpers.screenshots import keep_screenshot

PARAGRAPH = "The quick brown fox jumps over the lazy dog near the riverbank while the sun sets slowly. " * 6


def _shown_view(qtbot, width: int, height: int) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    return view


def _newest_text_is_shown(view: ChatView) -> bool:
    reply = view.messages()[-1]
    last = reply._block_widgets[-1]
    bottom = last.mapTo(view.widget(), QPoint(0, last.height())).y()
    top = view.verticalScrollBar().value()
    return top < bottom <= top + view.viewport().height()


@pytest.mark.parametrize(("width", "height"), [(620, 420), (730, 600), (1370, 600), (1800, 900)])
def test_the_newest_text_of_a_long_reply_stays_in_view(qtbot, width, height):
    view = _shown_view(qtbot, width, height)
    view.add_message("user", "Tell me a long story")
    draft = ReplyDraft()
    view.begin_stream("model", draft=draft)
    text = ""
    for _ in range(30):  # about 16,000 characters in 30 paragraphs
        text += PARAGRAPH + "\n\n"
        draft.add(PARAGRAPH + "\n\n")
        view.stream_changed()
        view._flush()
        qtbot.waitUntil(lambda: _newest_text_is_shown(view), timeout=2000)
    view.end_stream(text)
    content, reply = view.widget(), view.messages()[-1]

    def settled() -> bool:  # laid out again, in view, and no empty space below the reply
        return (
            reply.height() > 100 and _newest_text_is_shown(view) and content.height() - reply.geometry().bottom() < 60
        )

    qtbot.waitUntil(settled, timeout=2000)


@pytest.mark.parametrize("width", [730, 1370])
def test_a_reopened_chat_shows_the_end_of_its_long_reply(qtbot, width):
    from fara_desktop.ui.widgets.chat_view import ShownMessage

    view = _shown_view(qtbot, width, 600)
    reply = (PARAGRAPH + "\n\n") * 30
    view.set_messages([ShownMessage("user", "Tell me a long story"), ShownMessage("assistant", reply, model="m")])
    content, widget = view.widget(), view.messages()[-1]
    qtbot.waitUntil(
        lambda: (
            widget.height() > 100 and _newest_text_is_shown(view) and content.height() - widget.geometry().bottom() < 60
        ),
        timeout=2000,
    )


@pytest.mark.parametrize("width", [520, 730])
def test_a_long_model_name_never_pushes_the_buttons_out_of_the_bubble(qtbot, width):
    from fara_desktop.ui.widgets.chat_view import ShownMessage

    view = _shown_view(qtbot, width, 500)
    path = "/home/someone/.cache/lm-studio/models/" + "very-long-folder-name/" * 6 + "Qwen2.5-7B-Instruct-Q4_K_M.gguf"
    view.set_messages([
        ShownMessage("user", "Question " * 200, message_id=1),
        ShownMessage("assistant", "Answer " * 300, model=path, message_id=2),
    ])  # fmt: skip
    user, reply = view.messages()
    reply.set_can_regenerate(True)

    def inside() -> bool:
        for message in (user, reply):
            right = message.rect().right()
            for button in message.action_buttons.values():
                if button.isVisibleTo(message):
                    box = button.geometry().translated(
                        button.parentWidget().mapTo(message, button.pos()) - button.pos()
                    )
                    if box.right() > right or button.width() < button.sizeHint().width():
                        return False
            if message.geometry().right() > view.viewport().width():
                return False
        return "Qwen2.5-7B-Instruct-Q4_K_M.gguf" in reply.title.text() and "very-long-folder" not in reply.title.text()

    qtbot.waitUntil(inside, timeout=2000)


@pytest.mark.parametrize("width", [520, 730])
def test_a_tool_call_with_the_longest_names_stays_inside_the_chat(qtbot, width):
    from fara_desktop.chats.tool_rounds import ToolRound, ToolUse
    from fara_desktop.ui.widgets.chat_view import ShownMessage
    from fara_desktop.vocabulary.tools import ToolCall

    view = _shown_view(qtbot, width, 500)
    use = ToolUse(ToolCall("abcDEF123", "t" * 64, "{}"), "s" * 64, "ran", "result")
    view.set_messages([ShownMessage("assistant", "Answer", message_id=1, tool_rounds=(ToolRound("", "", (use,)),))])
    (reply,) = view.messages()
    header = reply.tool_sections[0].header
    assert "t" * 64 in header.accessibleName()  # the full names are still there, for the tooltip and readers
    qtbot.waitUntil(lambda: reply.layout().geometry().width() > 0, timeout=2000)  # laid out
    assert reply.geometry().right() <= view.viewport().width()
    assert header.mapTo(reply, header.rect().topRight()).x() <= reply.rect().right()


@pytest.mark.parametrize("width", [520, 730, 1370])
def test_eight_citations_wrap_and_never_push_the_buttons_out(qtbot, width):
    """The citations row was one unwrapped line: eight of them widened the reply past the window and hid Copy,
    Branch, Edit and Regenerate (issue 43, item 1)."""
    from fara_desktop.ui.widgets.chat_view import ShownMessage
    from fara_desktop.vocabulary.sources import Source

    view = _shown_view(qtbot, width, 500)
    sources = tuple(Source(n, f"/docs/a-rather-long-manual-name-{n}.pdf", "text", n * 7) for n in range(1, 9))
    sources += (Source(9, "/docs/" + "x" * 200 + ".pdf", "text", 1),)  # a name longer than any chat
    question = ShownMessage("user", "Which valve?", message_id=1)
    view.set_messages([question, ShownMessage("assistant", "The blue one.", model="m", message_id=2, sources=sources)])
    reply = view.messages()[-1]
    reply.set_can_regenerate(True)

    def inside() -> bool:
        if reply.geometry().right() > view.viewport().width():
            return False
        for button in [*reply.source_buttons, *(b for b in reply.action_buttons.values() if b.isVisibleTo(reply))]:
            if button.mapTo(reply, button.rect().topRight()).x() > reply.rect().right():
                return False
        return True

    qtbot.waitUntil(inside, timeout=2000)
    assert reply.source_buttons[0].text() == f"[1] {sources[0].where}"
    long_one = reply.source_buttons[-1]  # shortened in the middle on screen, whole for screen readers
    assert long_one.accessibleName().endswith(sources[-1].where) and len(long_one.text()) < len(sources[-1].where)
    assert long_one.text().endswith(", page 1")


LONG_WORD = "https://example.org/" + "a1b2c3d4e5" * 9 + "/end"  # 114 characters, no space (URLs, hashes, code)


@pytest.mark.parametrize("width", [520, 730])
def test_a_long_unbroken_word_wraps_and_never_widens_the_chat(qtbot, width):
    """Issue 53, item 2: a 107-character word made the column wider than the window: every line of that reply was
    cut at the right edge and Edit/Regenerate were pushed off screen. It now wraps where it must, in prose and in a
    code block; selecting and copying it gives the word as it was written."""
    from PySide6.QtGui import QGuiApplication, QTextDocument

    from fara_desktop.ui.widgets.chat_view import ShownMessage

    view = _shown_view(qtbot, width, 500)
    code = f"```\nfetch('{LONG_WORD}')\n```"
    view.set_messages([
        ShownMessage("user", f"Open {LONG_WORD} please", message_id=1),
        ShownMessage("assistant", f"The link is {LONG_WORD} and here it is as code:\n\n{code}", message_id=2),
    ])  # fmt: skip
    user, reply = view.messages()
    reply.set_can_regenerate(True)

    def inside() -> bool:
        for message in (user, reply):
            if message.geometry().right() > view.viewport().width():
                return False
            for button in message.action_buttons.values():
                if button.isVisibleTo(message) and button.mapTo(view.viewport(), button.rect().topRight()).x() > (
                    view.viewport().width()
                ):
                    return False
        return view.horizontalScrollBar().maximum() == 0

    qtbot.waitUntil(inside, timeout=2000)
    keep_screenshot(view, f"fixed-long-word-{width}px")
    body = reply._block_widgets[0]
    shown = QTextDocument()
    shown.setHtml(body.text())
    body.setSelection(0, shown.characterCount() - 1)  # all of it, as a mouse drag selects
    assert LONG_WORD in body.selectedText().replace("\u2028", "\n").replace("\u200b", "")
    QGuiApplication.clipboard().setText(body.selectedText())
    qtbot.waitUntil(lambda: "\u200b" not in QGuiApplication.clipboard().text(), timeout=2000)
    assert LONG_WORD in QGuiApplication.clipboard().text()
