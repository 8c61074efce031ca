"""The real window with the real model: streaming, start-up choice and calibration, edit and regenerate, no
network during a chat."""

from __future__ import annotations

import socket

import pytest
from PySide6.QtCore import Qt

from fara_desktop.chats.storage import ConversationStore, database_path
from fara_desktop.engine.types import TokenText
from fara_desktop.files.paths import app_paths
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import wait_until
from tests.helpers.fakes import FakeBackend
from tests.helpers.streaming_child import StreamingChild


@pytest.fixture
def real_window(qtbot, smollm2_path):
    def make(sampling: SamplingParams) -> MainWindow:
        win = MainWindow(sampling=sampling)
        qtbot.addWidget(win)
        win.show()
        with qtbot.waitSignal(win.modelLoaded, timeout=60000):
            win.load_model(smollm2_path)
        return win

    return make


def test_type_send_and_get_a_streamed_reply(real_window, qtbot):
    win = real_window(SamplingParams(temperature=0.0, max_tokens=48))
    tokens: list[str] = []
    win.bridge.engine_event.connect(lambda e: tokens.append(e.text) if isinstance(e, TokenText) else None)
    qtbot.keyClicks(win.composer, "Name the largest ocean on Earth.")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as finished:
        qtbot.mouseClick(win.send_button, Qt.MouseButton.LeftButton)
    reply = finished.args[0].text
    assert "Pacific" in reply
    assert len(tokens) >= 2 and "".join(tokens) == reply  # streamed in pieces (one event per 50 ms), not at once
    assert win.chat_view.messages()[-1].text == reply
    assert "tok/s" in win.hardware_panel.value("Speed")


def test_stop_mid_reply(real_window, qtbot):
    win = real_window(SamplingParams(temperature=0.8, seed=3, max_tokens=4000, ignore_eos=True))
    win.composer.setPlainText("Tell me a long story about a lighthouse.")
    win.send_button.click()
    qtbot.waitUntil(lambda: len(getattr(win.chat_view.streaming_message, "text", "")) > 40, timeout=60000)
    with qtbot.waitSignal(win.replyCancelled, timeout=10000) as cancelled:
        qtbot.mouseClick(win.stop_button, Qt.MouseButton.LeftButton)
    event = cancelled.args[0]
    assert 0 < event.stats.completion_tokens < 4000
    assert win.chat_view.messages()[-1].text == event.text
    assert win.chat_view.messages()[-1].footer.text().startswith("Stopped")
    assert win.send_button.isEnabled()


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
    qtbot.waitUntil(lambda: len(getattr(win.chat_view.streaming_message, "text", "")) > 30, timeout=60000)
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


def test_start_up_probes_the_machine_picks_a_model_and_calibrates(qtbot, smollm2_path):
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=30000):
        win.start_auto()
    panel = win.hardware_panel
    assert panel.value("CPU") != "detecting…"
    assert "physical" in panel.value("Cores")
    assert "free of" in panel.value("RAM")
    assert panel.value("Instructions")
    assert win.plan is not None and win.plan.model is not None
    assert win.plan.model.path == str(smollm2_path)  # the instruction-tuned model wins over the base Gemma
    assert panel.value("Context").startswith("auto (= ")
    qtbot.waitUntil(lambda: "measured: " in panel.value("Threads"), timeout=10000)
    assert panel.value("Threads").startswith("auto (= ")


@pytest.fixture
def no_network(monkeypatch):
    attempts: list[object] = []
    original = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError("network access attempted during a chat session")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: attempts.append(a) or guarded(None, a))
    return attempts


@pytest.mark.real_model
def test_a_whole_chat_session_opens_no_network_connection(qtbot, no_network, smollm2_path):
    import gc

    import psutil

    gc.collect()  # sockets an earlier test's clients left for the garbage collector are not this session's
    before = {(c.laddr, c.raddr) for c in psutil.Process().net_connections(kind="inet")}
    win = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=16))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.start_auto()
    for text in ("Hello! Visit https://example.com and tell me about it.", "![img](https://example.com/x.png)"):
        win.composer.setPlainText(text)
        with qtbot.waitSignal(win.replyFinished, timeout=60000):
            win.send_button.click()
    win.chat_view.add_message(
        "assistant", "An image: ![remote](https://example.com/tracker.png) and a [link](https://example.com)"
    )
    qtbot.waitUntil(lambda: len(win.chat_view.messages()) == 5)
    win.grab()
    now = psutil.Process().net_connections(kind="inet")  # catches C++ (Qt, llama.cpp) sockets too
    open_sockets = [c for c in now if (c.laddr, c.raddr) not in before]
    win.close()
    assert no_network == []
    assert open_sockets == []


def test_a_long_chat_resumes_after_a_restart_and_a_typed_question_is_read_before_enter(real_window, qtbot):
    """The user's path with the real model: a long chat, the app closed and opened again, the chat reopened, a
    question typed (read ahead on the typing pause), Enter: only the question's last token is left to read."""
    sampling = SamplingParams(temperature=0.0, max_tokens=8)
    win = real_window(sampling)
    win.session.set_system_prompt("You are a helpful assistant. " + "Answer briefly and precisely. " * 250)
    win.composer.setPlainText("Hello!")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as first:
        win.send_button.click()
    assert first.args[0].stats.prompt_tokens > 1200
    conversation = win.session.conversation_id
    win.close()  # the state goes to disk as the engine stops
    states = list((app_paths().data / "chat-states").glob("*.kvstate"))
    assert len(states) == 1

    again = real_window(sampling)
    again.conversations.open_conversation(conversation)
    qtbot.keyClicks(again.composer, "What is the capital of France?")
    progress = []
    again.bridge.engine_event.connect(lambda e: progress.append(e) if type(e).__name__ == "ReadAheadProgress" else None)
    qtbot.waitUntil(lambda: any(e.finished and e.cached == e.tokens - 1 for e in progress), timeout=60000)
    assert progress[0].cached > 1200  # the chat came back from disk: only the question was read ahead
    with qtbot.waitSignal(again.replyFinished, timeout=120000) as second:
        qtbot.keyClick(again.composer, Qt.Key.Key_Return)
    assert second.args[0].stats.prompt_tokens_evaluated <= 1


def test_a_chat_deleted_right_after_its_reply_leaves_no_saved_reading(real_window, qtbot):
    """The window deleted the chat's state files on its own thread, but the engine had marked the chat to be kept
    after its reply and wrote its state a moment later (and at quit): the deleted chat's reading was back on
    disk. The deletion now goes through the engine's queue, after whatever it does for that chat."""
    win = real_window(SamplingParams(temperature=0.0, max_tokens=8))
    win.session.set_system_prompt("You are a helpful assistant. " + "Answer briefly and precisely. " * 40)
    win.composer.setPlainText("Hello!")
    with qtbot.waitSignal(win.replyFinished, timeout=120000):
        win.send_button.click()
    deleted = win.session.conversation_id
    assert deleted is not None
    win.conversations.delete_conversation(deleted, confirm=False)
    win.close()  # the engine stops: a state still to be kept is written now
    folder = app_paths().data / "chat-states"
    left = [p.name for p in folder.iterdir() if p.name.startswith(f"c{deleted}-")] if folder.exists() else []
    assert left == []
