"""End to end on the real model: the whole chat loop, a restart, and a process killed mid-reply."""

from __future__ import annotations

import pytest

from fara_desktop.chats.storage import ConversationStore, database_path
from fara_desktop.engine.types import SamplingParams
from fara_desktop.paths import app_paths
from fara_desktop.ui.main_window import MainWindow
from tests.conftest import wait_until
from tests.streaming_child import StreamingChild

pytestmark = pytest.mark.real_model


def open_window(qtbot, sampling: SamplingParams) -> MainWindow:
    win = MainWindow(sampling=sampling)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.start_auto()
    return win


def test_ask_stop_regenerate_edit_restart(qtbot, smollm2_path):
    win = open_window(qtbot, SamplingParams(temperature=0.8, seed=7, max_tokens=400, ignore_eos=True))
    win.new_chat()
    win.composer.setPlainText("Tell me about lighthouses.")
    win.send_button.click()
    qtbot.waitUntil(lambda: len(win.chat_view.streaming_message.text) > 30, timeout=60000)
    with qtbot.waitSignal(win.replyCancelled, timeout=10000):
        win.stop_button.click()
    stopped = win.chat_view.messages()[-1]
    assert stopped.footer.text().startswith("Stopped")

    win.sampling = SamplingParams(temperature=0.0, max_tokens=24)
    with qtbot.waitSignal(win.replyFinished, timeout=60000) as regenerated:
        stopped.action_buttons["regenerate"].click()
    assert regenerated.args[0].text and win.chat_view.messages()[-1].text == regenerated.args[0].text

    user = win.chat_view.messages()[0]
    user.action_buttons["edit"].click()
    win.composer.setPlainText("Which planet do we live on?")
    with qtbot.waitSignal(win.replyFinished, timeout=60000) as answered:
        win.send_button.click()
    assert "Earth" in answered.args[0].text
    conversation = win.session.conversation_id
    win.close()

    again = open_window(qtbot, SamplingParams(temperature=0.0, max_tokens=24))
    assert again.sidebar.ids()[0] == conversation
    again.open_conversation(conversation)
    shown = [(m.role, m.text) for m in again.chat_view.messages()]
    assert shown[0] == ("user", "Which planet do we live on?")
    assert shown[1] == ("assistant", answered.args[0].text) and len(shown) == 2
    again.close()


def test_killed_mid_reply_loses_nothing(fara_home, smollm2_path):
    prompt = "Write a very long story about a dragon who learns to cook."
    db_path = database_path(app_paths().data)
    with StreamingChild(prompt, fara_home):
        reader = ConversationStore(db_path)

        def saved_reply() -> str:  # the reply is saved while it streams
            rows = reader.messages(1)
            text = rows[1].content if len(rows) > 1 else ""
            return text if len(text) >= 200 else ""

        partial = wait_until(saved_reply, 120, "the streaming reply to be saved")
        reader.close()
    store = ConversationStore(db_path)
    assert store.integrity_ok()
    messages = store.messages(1)
    assert messages[0].content == prompt and messages[0].role == "user"
    assert messages[1].role == "assistant" and messages[1].content.startswith(partial[:200])
    assert messages[1].status == "streaming"
    assert store.mark_interrupted() == 1  # what the app does at its next start
    assert store.messages(1)[1].status == "stopped"
    store.close()
