"""Safety and bad input: sandboxed templates, no network, odd text, a window closed mid-reply."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from jinja2.exceptions import SecurityError

from fara_desktop.engine.chat_format import JinjaChatFormatter
from fara_desktop.engine.types import ChatMessage, SamplingParams
from fara_desktop.ui.main_window import MainWindow
from tests.fakes import FakeBackend

HOSTILE_TEMPLATES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ messages.__class__.__init__.__globals__['sys'].modules['os'].system('touch /tmp/pwned') }}",
    "{% for m in messages %}{{ m.update({'role': 'system'}) }}{% endfor %}",
]


@pytest.mark.parametrize("template", HOSTILE_TEMPLATES)
def test_a_hostile_chat_template_can_neither_read_files_nor_run_code(template):
    formatter = JinjaChatFormatter(template, "<s>", "</s>")
    with pytest.raises((SecurityError, Exception)) as caught:
        formatter.render([ChatMessage("user", "hi")])
    assert not isinstance(caught.value, (SystemExit, KeyboardInterrupt))
    assert not Path("/tmp/pwned").exists()


def test_templates_get_the_immutable_sandbox():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    formatter = JinjaChatFormatter("{{ messages[0].content }}", "", "")
    assert isinstance(formatter._template.environment, ImmutableSandboxedEnvironment)


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
    import psutil

    open_sockets = psutil.Process().net_connections(kind="inet")  # catches C++ (Qt, llama.cpp) sockets too
    win.close()
    assert no_network == []
    assert open_sockets == []


@pytest.fixture
def window(qtbot):
    win = MainWindow(backend=FakeBackend(words=["Fine", "."]))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(Path("fake.gguf"))
    return win


@pytest.mark.parametrize(
    "text",
    [
        "مرحبا بالعالم — שלום עולם",
        "emoji 👩‍💻🚀🇵🇹 and combining é",
        "control \x00 \x07 \x1b[31m characters \u202e reversed",
        "x" * 1_000_000,
    ],
    ids=["rtl", "emoji", "control", "1MB"],
)
def test_odd_text_is_sent_stored_and_shown_intact(window, qtbot, text):
    window.composer.setPlainText(text)
    with qtbot.waitSignal(window.replyFinished, timeout=20000):
        window.send_button.click()
    stored = window.store.messages(window.session.conversation_id)
    assert stored[0].content == text.strip()
    shown = window.chat_view.messages()[0]
    assert shown.text == text.strip()  # the widget keeps (and copies) the whole text
    if len(text) > 100_000:
        assert "1,000,000 characters in all" in shown._block_widgets[-1].text()


def test_send_twice_sends_once(window, qtbot):
    window.composer.setPlainText("once")
    with qtbot.waitSignal(window.replyFinished, timeout=5000):
        window.send_button.click()
        window.send()  # a second press while the first is in flight
    assert [m.role for m in window.store.messages(window.session.conversation_id)] == ["user", "assistant"]


def test_closing_the_window_mid_reply_saves_the_reply(qtbot):
    import threading

    gate = threading.Semaphore(0)
    win = MainWindow(backend=FakeBackend(words=["partial ", "reply ", "never ", "finished"], gate=gate))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model(Path("fake.gguf"))
    win.composer.setPlainText("Tell me")
    win.send_button.click()
    gate.release(2)
    qtbot.waitUntil(lambda: win.session._reply_parts != [], timeout=5000)
    store_path = win.store.path
    conversation = win.session.conversation_id
    gate.release(10)
    win.close()
    assert not win.bridge.worker.thread.is_alive()
    from fara_desktop.chats.storage import ConversationStore

    store = ConversationStore(store_path)
    reply = store.messages(conversation)[1]
    assert reply.status in ("stopped", "complete") and reply.content.startswith("partial ")
    store.close()


def test_an_uncaught_exception_shows_a_short_dialog_with_the_log_path(qtbot, monkeypatch, tmp_path):
    import sys

    from PySide6.QtWidgets import QMessageBox

    from fara_desktop.ui.crash_dialog import install_exception_dialog

    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append((self.text(), self.informativeText())) or 0)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    log_file = tmp_path / "fara-desktop.log"
    install_exception_dialog(log_file)
    try:
        raise RuntimeError("something broke")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    assert shown == [
        ("RuntimeError: something broke", f"Your conversations are safe. Details were written to:\n{log_file}")
    ]


@pytest.mark.real_model
def test_a_model_file_deleted_while_loaded_or_listed(qtbot, tmp_path):
    from fara_desktop.engine.llama_backend import LlamaBackend
    from fara_desktop.models.discovery import scan_models
    from fara_desktop.planning.params import LoadParams
    from tests.gguf_factory import write_tiny_model

    folder = tmp_path / "models"
    folder.mkdir()
    model = write_tiny_model(folder / "tiny.gguf", "llama")
    backend = LlamaBackend()
    backend.load(model, LoadParams(n_ctx=256, prefault=False))
    model.unlink()  # deleted while loaded: the mapping keeps the weights readable
    prompt = backend.prepare([ChatMessage("user", "hello")], 8)
    result = backend.reply(
        prompt, SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True), lambda: False, lambda _t: None
    )
    assert result.stats.completion_tokens == 4
    backend.unload()
    assert scan_models(folder, tmp_path / "cache", env={}, home=tmp_path, include_packages=False).models == []

    win = MainWindow(backend=None)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoadFailed, timeout=30000) as failed:
        win.start_auto(model)  # e.g. the model remembered in settings was deleted since
    assert "not found" in failed.args[0]
    win.close()
