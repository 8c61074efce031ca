"""The real window on the real model: type, send, read a streamed reply; stop mid-reply."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from fara_desktop.engine.types import SamplingParams, TokenText
from fara_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.real_model


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
    qtbot.waitUntil(lambda: len(win.chat_view.streaming_message.text) > 40, timeout=60000)
    with qtbot.waitSignal(win.replyCancelled, timeout=10000) as cancelled:
        qtbot.mouseClick(win.stop_button, Qt.MouseButton.LeftButton)
    event = cancelled.args[0]
    assert 0 < event.stats.completion_tokens < 4000
    assert win.chat_view.messages()[-1].text == event.text
    assert win.chat_view.messages()[-1].footer.text().startswith("Stopped")
    assert win.send_button.isEnabled()
