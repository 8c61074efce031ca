"""Documents in the window (scripted model): a folder indexed in the background, a chat that uses the collection,
the passages in the prompt, numbered citations that open their passage, unreadable files listed with the reason."""

from __future__ import annotations

import os
from pathlib import Path

from fara_desktop.ui.dialogs.passage_dialog import PassageDialog
from tests.helpers.chatting import ask
from tests.helpers.documents import write_encrypted_pdf, write_mixed_folder
from tests.helpers.fakes import FakeBackend

SHOTS = Path(os.environ["FARA_SCREENSHOTS"]) if os.environ.get("FARA_SCREENSHOTS") else None


def index_folder(qtbot, win, name: str, folder: Path) -> None:
    with qtbot.waitSignal(win.documents.finished, timeout=30000):
        win.documents.index_paths(name, [folder])


def test_a_chat_answers_from_a_collection_with_citations(window, qtbot, tmp_path):
    files = write_mixed_folder(tmp_path / "manuals")
    write_encrypted_pdf(tmp_path / "manuals" / "locked.pdf", files["pdf"])
    backend = FakeBackend(words=["The", " aquamarine", " valve", " [1]", "."])
    win = window(backend)
    index_folder(qtbot, win, "manuals", tmp_path / "manuals")
    panel = win.documents_panel
    assert (
        panel.list.count() == 1
        and "7 files · " in panel.list.item(0).text()
        and "1 unreadable" in panel.list.item(0).text()
    )
    assert "locked.pdf: is encrypted" in panel.list.item(0).toolTip()
    assert win.documents_button.text() == "Documents: off"
    win.documents.use_collection("manuals", True)
    assert win.documents_button.text() == "Documents: manuals"

    ask(qtbot, win, "Which valve controls the pressure?")
    sent = backend.prompts[-1][-1].content
    assert sent.startswith("Passages from my documents") and "[1] manual.pdf, page 2" in sent
    assert "aquamarine valve controls the pressure" in sent and sent.endswith("Which valve controls the pressure?")
    shown_question = win.chat_view.messages()[0]
    assert shown_question.text == "Which valve controls the pressure?"  # what the user typed, not the prompt
    reply = win.chat_view.messages()[-1]
    assert reply.source_buttons and reply.source_buttons[0].text() == "[1] manual.pdf, page 2"
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        win.grab().save(str(SHOTS / "documents-citations.png"))
    reply.source_buttons[0].click()
    dialog = win.findChild(PassageDialog)
    assert dialog is not None and "aquamarine valve" in dialog.text.toPlainText()
    assert dialog.location.text().startswith("[1] manual.pdf, page 2") and dialog.open_button.isEnabled()
    dialog.reject()

    # the citations are kept with the reply, and the chat keeps its collection
    conversation = win.session.conversation_id
    win.new_chat()
    assert win.documents_button.text() == "Documents: off"
    win.open_conversation(conversation)
    assert win.documents_button.text() == "Documents: manuals"
    assert win.chat_view.messages()[-1].source_buttons[0].text() == "[1] manual.pdf, page 2"


def test_a_chat_without_collections_sends_the_question_as_typed(window, qtbot, tmp_path):
    write_mixed_folder(tmp_path / "manuals")
    backend = FakeBackend()
    win = window(backend)
    index_folder(qtbot, win, "manuals", tmp_path / "manuals")
    ask(qtbot, win, "Which valve controls the pressure?")
    assert backend.prompts[-1][-1].content == "Which valve controls the pressure?"
    assert win.chat_view.messages()[-1].source_buttons == []
