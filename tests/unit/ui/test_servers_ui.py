"""Settings ▸ Servers and the local API in the window (scripted model, real HTTP on 127.0.0.1)."""

from __future__ import annotations

import dataclasses
import json
import stat
import threading

import httpx
import pytest

from fara_desktop.engine.remote_backend import RemoteBackend
from fara_desktop.engine.routed_backend import RoutedBackend
from fara_desktop.files.paths import app_paths
from fara_desktop.settings import LocalApiSettings
from fara_desktop.system.api_keys import FILE_NAME
from fara_desktop.ui.controllers.servers_controller import unencrypted_warning
from fara_desktop.ui.main_window import MainWindow
from tests.helpers.fakes import FakeBackend
from tests.helpers.openai_servers import ScriptedServer


def servers_page_of(qtbot, server: ScriptedServer):
    """A window that can chat with local and server models, its Settings open on the Servers page."""
    server.script.models = ["llama-3.1-8b", "qwen2.5-7b"]
    win = MainWindow(backend=RoutedBackend(FakeBackend(), RemoteBackend()))
    qtbot.addWidget(win)
    win.show()
    dialog = win.open_settings("Servers")
    return win, dialog, dialog.servers_page


def test_add_a_server_list_its_models_and_chat_with_one(qtbot):
    with ScriptedServer() as server:
        win, dialog, page = servers_page_of(qtbot, server)
        page.name_edit.setText("gpu-box")
        page.url_edit.setText(server.base_url)
        page.key_edit.setText("sk-secret-123")
        page.add_button.click()
        assert page.server_list.count() == 1 and "key stored" in page.server_list.item(0).text()
        page.server_list.setCurrentRow(0)
        page.list_button.click()
        qtbot.waitUntil(lambda: page.model_list.count() == 2, timeout=5000)
        assert page.model_list.item(1).text() == "qwen2.5-7b — on gpu-box"
        page.model_list.setCurrentRow(1)
        page.use_button.click()
        with qtbot.waitSignal(win.modelLoaded, timeout=5000) as loaded:
            dialog.accept()
        info = loaded.args[0]
        assert (info.name, info.server) == ("qwen2.5-7b", "gpu-box")
        assert win.hardware_panel.value("Name") == "qwen2.5-7b (on gpu-box)"
        assert "go to the server gpu-box" in win.chat_view.empty_state.body.text()  # not "nothing leaves"
        win.composer.setPlainText("Hello?")
        with qtbot.waitSignal(win.replyFinished, timeout=5000):
            win.send_button.click()
        reply = win.chat_view.messages()[-1]
        assert reply.text == "Hello from the server." and "qwen2.5-7b" in reply.title.text()
        # a server does not say its context size: a count and a sentence, not "22 / the server's limit tokens"
        assert win.hardware_panel.value("Context used").endswith("tokens (the limit is set by the server)")
        assert server.seen.headers[-1]["authorization"] == "Bearer sk-secret-123"
        # the key is kept apart from the settings, readable by the user only, and never logged
        config = app_paths().config
        assert "sk-secret-123" not in (config / "settings.json").read_text()
        key_file = config / FILE_NAME
        assert json.loads(key_file.read_text()) == {"gpu-box": "sk-secret-123"}
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        settings = json.loads((config / "settings.json").read_text())
        assert settings["remote_model"] == {"server": "gpu-box", "model": "qwen2.5-7b"}
        win.close()


def test_plain_http_to_another_computer_is_called_unencrypted():
    assert unencrypted_warning("box", "http://gpu-box:8000/v1")
    assert unencrypted_warning("box", "https://gpu-box:8000/v1") is None
    assert unencrypted_warning("box", "http://127.0.0.1:8000/v1") is None
    assert unencrypted_warning("box", "http://localhost:8000/v1") is None


def test_the_window_shows_the_local_api_and_a_request_that_waits_its_turn(qtbot):
    gate = threading.Semaphore(0)
    backend = FakeBackend(words=["one", " two", " three"], gate=gate)
    win = MainWindow(backend=backend)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model("fake.gguf")
    win.servers.apply_api_settings(LocalApiSettings(enabled=True, port=0))
    address = win.servers.api.address
    assert win.api_label.isVisibleTo(win) and address in win.api_label.text()
    answers: list[str] = []
    other_app = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{address}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                       timeout=30).json()["choices"][0]["message"]["content"]
        )
    )  # fmt: skip
    other_app.start()
    qtbot.waitUntil(lambda: "1 request from other apps" in win.api_label.text(), timeout=5000)
    win.composer.setPlainText("Me too")
    win.send_button.click()
    assert win.status_label.text() == "Waiting for another app's request (local API) to finish…"
    with qtbot.waitSignal(win.replyFinished, timeout=5000):
        gate.release(6)
    other_app.join(10)
    assert answers == ["one two three"] and win.chat_view.messages()[-1].text == "one two three"
    qtbot.waitUntil(lambda: "request" not in win.api_label.text(), timeout=5000)
    win.servers.apply_api_settings(LocalApiSettings(enabled=False))
    assert not win.api_label.isVisibleTo(win)
    win.close()


def test_the_local_api_page_edits_which_pages_and_servers_the_local_api_admits(qtbot):
    """The local API's allowed web pages and relay servers are set on the page, kept when the dialog saves, and
    anything that is not an http(s) origin or a known server is dropped."""
    from fara_desktop.settings import ServerEntry, Settings
    from fara_desktop.system.api_keys import ApiKeyStore
    from fara_desktop.ui.dialogs.local_api_page import LocalApiPage

    settings = Settings(servers=[ServerEntry("cloud", "https://api.example/v1")],
                        local_api=LocalApiSettings(allowed_origins=("http://localhost:3000",)))  # fmt: skip
    page = LocalApiPage(settings.local_api, ApiKeyStore(app_paths().ensure().config), lambda: {"cloud"})
    qtbot.addWidget(page)
    assert page.api_settings().allowed_origins == ("http://localhost:3000",)  # nothing is lost on OK
    page.api_origins.setText("http://localhost:3000/, javascript:alert(1), https://notes.example")
    page.api_relay.setText("cloud, nowhere")
    edited = page.api_settings()
    assert edited.allowed_origins == ("http://localhost:3000", "https://notes.example")
    assert edited.relay_servers == ("cloud",)
    saved = json.loads(json.dumps({**settings.to_json(), "local_api": edited.__dict__}))  # as settings.json holds it
    assert Settings.from_json(saved).local_api == edited


def inside_viewport(widget, area) -> bool:
    """The widget is shown whole in the scroll area's visible part (no scrolling needed to see it)."""
    top_left = widget.mapTo(area.viewport(), widget.rect().topLeft())
    return widget.isVisible() and top_left.y() >= 0 and top_left.y() + widget.height() <= area.viewport().height()


def test_the_servers_page_at_its_default_size_keyboard_and_double_click(qtbot):
    """Issue 29, item 11: the local API and "Will chat with … (click OK)" were below the fold; double-clicking a
    model did nothing you could see; after List its models the default button was Remove; the address's
    placeholder was clipped."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QPushButton, QScrollArea

    with ScriptedServer() as server:
        win, dialog, page = servers_page_of(qtbot, server)
        qtbot.waitExposed(dialog)
        area = page.parentWidget().parentWidget()
        assert isinstance(area, QScrollArea)
        url = page.url_edit
        needed = url.fontMetrics().horizontalAdvance(url.placeholderText()) + 16
        assert url.width() >= needed, (url.width(), needed)
        page.name_edit.setText("gpu-box")
        page.url_edit.setText(server.base_url)
        page.add_button.click()
        page.server_list.setCurrentRow(0)
        page.list_button.setFocus()
        QTest.keyClick(page.list_button, Qt.Key.Key_Space)
        qtbot.waitUntil(lambda: page.model_list.count() == 2, timeout=5000)
        assert not any(b.autoDefault() or b.isDefault() for b in page.findChildren(QPushButton))
        assert page.model_list.hasFocus() and page.model_list.currentRow() == 0
        QTest.keyClick(page.model_list, Qt.Key.Key_Down)
        page.use_button.click()
        assert inside_viewport(page.status, area) and "Will chat with qwen2.5-7b" in page.status.text()
        assert inside_viewport(page.use_button, area)
        dialog.show_page("Local API")
        api_area = dialog.local_api_page.parentWidget().parentWidget()
        assert inside_viewport(dialog.local_api_page.api_enabled, api_area)
        assert inside_viewport(dialog.local_api_page.api_note, api_area)
        dialog.show_page("Servers")
        with qtbot.waitSignal(win.modelLoaded, timeout=5000) as loaded:
            where = page.model_list.visualItemRect(page.model_list.item(0)).center()
            # a real double click: press and release, then the double-click press and its release
            QTest.mouseClick(page.model_list.viewport(), Qt.MouseButton.LeftButton, pos=where)
            QTest.mouseDClick(page.model_list.viewport(), Qt.MouseButton.LeftButton, pos=where)
        from shiboken6 import Shiboken

        assert not (Shiboken.isValid(dialog) and dialog.isVisible())  # closed (and deleted once its answer is read)
        assert loaded.args[0].name == "llama-3.1-8b"
        win.close()


def window_with(backend: FakeBackend, qtbot) -> MainWindow:
    """The window shown, with ``backend``'s model loaded."""
    win = MainWindow(backend=backend)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model("fake.gguf")
    return win


def test_sampling_changed_in_settings_reaches_the_local_api(qtbot):
    """Issue 50, item 7: the next API request uses the new defaults, not the start-up ones."""
    backend = FakeBackend(words=["one"])
    win = window_with(backend, qtbot)
    settings = dataclasses.replace(win.settings, local_api=LocalApiSettings(enabled=True, port=0))
    win.apply_settings(settings, None)
    changed = dataclasses.replace(settings, sampling=dataclasses.replace(settings.sampling, temperature=1.37))
    win.apply_settings(changed, None)
    address = win.servers.api.address
    reply = httpx.post(f"{address}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                       timeout=30)  # fmt: skip
    assert reply.status_code == 200
    assert backend.samplings[-1].temperature == pytest.approx(1.37)
    win.servers.apply_api_settings(LocalApiSettings(enabled=False))
    win.close()


def test_the_local_api_page_shows_what_each_key_read_and_reused(qtbot):
    """Issue 52, item 5: a key per app, each a client of its own, with its requests and the tokens read and reused
    since the API started; the key's end only, never the key."""
    from fara_desktop.system.api_keys import LOCAL_API

    win = window_with(FakeBackend(words=["one"]), qtbot)
    win.api_keys.set(LOCAL_API, "sk-editor-0123456789ab\nsk-notes")
    win.servers.apply_api_settings(LocalApiSettings(enabled=True, port=0))
    address = win.servers.api.address
    for key in ("sk-editor-0123456789ab", "sk-editor-0123456789ab", "sk-notes", "wrong"):
        httpx.post(f"{address}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                   headers={"authorization": f"Bearer {key}"}, timeout=30)  # fmt: skip
    dialog = win.open_settings("Local API")
    text = dialog.local_api_page.clients_note.text()
    assert "Key 1 (…89ab): 2 requests · " in text and "Key 2: 1 request · " in text and "reused" in text, text
    assert "sk-" not in text and dialog.local_api_page.api_key.text() == ""
    dialog.reject()
    win.servers.apply_api_settings(LocalApiSettings(enabled=False))
    dialog = win.open_settings("Local API")
    assert "not running" in dialog.local_api_page.clients_note.text()
    dialog.reject()
    win.close()


def test_keys_changed_in_settings_apply_to_the_running_api_at_once(qtbot):
    """Issue 61, item 2: a key added in Settings ▸ Local API got 401 and the one it replaced still 200 until a
    restart (a leaked key kept working). Issue 62, item 3: keys are a list, each whole; a key that cannot be one is
    refused with the reason and not stored."""
    from PySide6.QtGui import QGuiApplication

    from fara_desktop.system.api_keys import LOCAL_API

    win = window_with(FakeBackend(words=["one"]), qtbot)
    import socket

    with socket.socket() as probe:  # a port the Settings page can show (0 is below its range)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    win.api_keys.set(LOCAL_API, "sk-leaked-0123456789")
    win.apply_settings(dataclasses.replace(win.settings, local_api=LocalApiSettings(enabled=True, port=port)), None)
    address = win.servers.api.address

    def status(key: str) -> int:
        headers = {"authorization": f"Bearer {key}"}
        return httpx.get(f"{address}/models", headers=headers, timeout=30).status_code

    assert status("sk-leaked-0123456789") == 200
    dialog = win.open_settings("Local API")
    page = dialog.local_api_page
    assert [page.keys_list.item(i).text() for i in range(page.keys_list.count())] == ["Key 1 (…6789)"]
    page.keys_list.setCurrentRow(0)
    page.remove_key_button.click()
    page.api_key.setText("correct horse battery staple")
    page.add_key_button.click()
    page.make_key_button.click()
    made = QGuiApplication.clipboard().text()
    assert made.startswith("fara-") and len(made) >= 32 and made in page.key_note.text()
    dialog.accept()
    assert win.servers.api is not None and win.servers.api.address == address  # the same server, new keys
    assert status("sk-leaked-0123456789") == 401
    assert status("correct horse battery staple") == 200 and status(made) == 200
    assert status("horse") == 401

    dialog = win.open_settings("Local API")
    page = dialog.local_api_page
    page.api_key.setText("x7Qp2")
    page.add_key_button.click()
    assert "Not added: this key is 5 characters long" in page.key_note.text()
    dialog.accept()
    assert win.api_keys.get(LOCAL_API) == f"correct horse battery staple\n{made}"
    assert status("x7Qp2") == 401
    assert any("was not added" in text for text in win.notice_bar.texts()), win.notice_bar.texts()
    win.servers.apply_api_settings(LocalApiSettings(enabled=False))
    win.close()
