"""Settings ▸ Servers: OpenAI-compatible servers to chat with, their models, and the local API for other apps.

A server is contacted only when the user asks for its model list or chooses one of its models. API keys go to the
key store (the system keychain, or a 0600 file), never to the settings file; a stored key is never shown again.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.api_keys import LOCAL_API, ApiKeyStore
from fara_desktop.engine.remote_backend import NOT_SENT_TO_SERVERS, is_local_host, list_models
from fara_desktop.serving.local_api import LOCAL_HOSTS
from fara_desktop.settings import LocalApiSettings, RemoteChoice, ServerEntry, Settings
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.widgets.plain_text import plain_label


class ServersPage(QWidget):
    """Edits copies of the server list, the chosen server model, the keys and the local API settings."""

    def __init__(self, settings: Settings, keys: ApiKeyStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.keys = keys
        self.servers = list(settings.servers)
        self.choice: RemoteChoice | None = None  # a server model picked in this dialog
        self.key_changes: dict[str, str | None] = {}  # name → new key (None: forget it)
        self._listing: BackgroundCall | None = None
        layout = QVBoxLayout(self)
        intro = plain_label(
            "Chat with a model on another machine: llama.cpp's server, vLLM, Ollama, LM Studio or a hosted service "
            "with an OpenAI-compatible API. A server is contacted only when you list its models or choose one. "
            f"Not sent to servers (the API has no field for them): {', '.join(NOT_SENT_TO_SERVERS)}."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)

        self.server_list = QListWidget()
        self.server_list.setObjectName("serverList")
        self.server_list.setAccessibleName("Servers")
        self.server_list.currentRowChanged.connect(lambda _row: self._list_cleared())
        add_row = QHBoxLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("Name (e.g. gpu-box)")
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("Address, e.g. http://gpu-box:8000/v1")
        self.key_edit = QLineEdit()
        self.key_edit.setPlaceholderText("API key (optional)")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add_server)
        for widget in (self.name_edit, self.url_edit, self.key_edit, self.add_button):
            add_row.addWidget(widget, 1 if widget is self.url_edit else 0)
        buttons = QHBoxLayout()
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_server)
        self.list_button = QPushButton("List its models")
        self.list_button.clicked.connect(self.list_models)
        buttons.addWidget(self.list_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        self.model_list = QListWidget()
        self.model_list.setObjectName("serverModelList")
        self.model_list.setAccessibleName("The server's models")
        self.model_list.itemDoubleClicked.connect(lambda _item: self.use_model())
        self.use_button = QPushButton("Chat with this model")
        self.use_button.clicked.connect(self.use_model)
        self.status = plain_label()
        self.status.setObjectName("serversStatus")
        self.status.setWordWrap(True)
        layout.addWidget(self.server_list, 1)
        layout.addLayout(add_row)
        layout.addLayout(buttons)
        layout.addWidget(plain_label("Models of the chosen server (double-click one to chat with it):"))
        layout.addWidget(self.model_list, 1)
        layout.addWidget(self.use_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.status)
        layout.addWidget(self._api_group(settings.local_api))
        self._fill_servers()
        if settings.remote_model:
            self.status.setText(f"In use: {settings.remote_model.model} on {settings.remote_model.server}")

    # ------------------------------------------------------------------ servers

    def _fill_servers(self) -> None:
        self.server_list.clear()
        for server in self.servers:
            text = f"{server.name} — {server.base_url}" + (" · key stored" if self._key_of(server.name) else "")
            if server.base_url.startswith("http://") and not is_local_host(server.base_url):
                text += " · unencrypted (http)"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, server.name)
            self.server_list.addItem(item)

    def add_server(self) -> None:
        name, url, key = self.name_edit.text().strip(), self.url_edit.text().strip(), self.key_edit.text().strip()
        if not name or len(name) > 80 or any(s.name == name for s in self.servers):
            self.status.setText("Give the server a name (at most 80 characters) that no other server has.")
            return
        if not ServerEntry.valid_url(url):
            self.status.setText("The address must start with http:// or https://, e.g. http://gpu-box:8000/v1")
            return
        self.servers.append(ServerEntry(name, url))
        if key:
            self.key_changes[name] = key
        self.name_edit.clear()
        self.url_edit.clear()
        self.key_edit.clear()
        self._fill_servers()
        self.server_list.setCurrentRow(len(self.servers) - 1)
        warning = "" if url.startswith("https://") or is_local_host(url) else (
            " Its address is plain http to another computer: chats with it travel unencrypted."
        )  # fmt: skip
        self.status.setText(f"Added {name}.{warning} List its models to choose one.")

    def remove_server(self) -> None:
        server = self._current()
        if server is None:
            return
        self.servers.remove(server)
        self.key_changes[server.name] = None
        if self.choice and self.choice.server == server.name:
            self.choice = None
        self._fill_servers()
        self._list_cleared()
        self.status.setText(f"Removed {server.name} (and its stored key).")

    def _current(self) -> ServerEntry | None:
        item = self.server_list.currentItem()
        name = item.data(Qt.ItemDataRole.UserRole) if item else None
        return next((s for s in self.servers if s.name == name), None)

    def _key_of(self, name: str) -> str | None:
        return self.key_changes[name] if name in self.key_changes else self.keys.get(name)

    # ------------------------------------------------------------------ models

    def _list_cleared(self) -> None:
        self.model_list.clear()

    def list_models(self) -> None:
        server = self._current()
        if server is None:
            self.status.setText("Choose a server first.")
            return
        key = self._key_of(server.name)
        self.status.setText(f"Asking {server.name} for its models…")
        self.list_button.setEnabled(False)
        call = BackgroundCall(lambda: list_models(server.base_url, key, server.name), self)
        call.done.connect(lambda ids: self._show_models(server, ids))
        call.failed.connect(lambda error: self._listing_failed(error))
        self._listing = call.start()

    def _show_models(self, server: ServerEntry, ids: list[str]) -> None:
        self.list_button.setEnabled(True)
        self.model_list.clear()
        for model in ids:
            item = QListWidgetItem(f"{model} — on {server.name}")
            item.setData(Qt.ItemDataRole.UserRole, (server.name, model))
            self.model_list.addItem(item)
        self.status.setText(f"{server.name} offers {len(ids)} model{'s' if len(ids) != 1 else ''}.")

    def _listing_failed(self, error: object) -> None:
        self.list_button.setEnabled(True)
        self.status.setText(str(error))

    def use_model(self) -> None:
        selected = self.model_list.selectedItems()
        if not selected:
            self.status.setText("List a server's models and choose one.")
            return
        server, model = selected[0].data(Qt.ItemDataRole.UserRole)
        self.choice = RemoteChoice(server, model)
        self.status.setText(f"Will chat with {model} on {server} (click OK).")

    # ------------------------------------------------------------------ local API

    def _api_group(self, api: LocalApiSettings) -> QGroupBox:
        group = QGroupBox("Local API for other apps")
        form = QFormLayout(group)
        self.api_enabled = QCheckBox("Serve the loaded model to other apps (OpenAI-compatible)")
        self.api_enabled.setChecked(api.enabled)
        self.api_host = QLineEdit(api.host)
        self.api_port = QSpinBox()
        self.api_port.setRange(1, 65535)
        self.api_port.setValue(api.port)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("key stored" if self.keys.get(LOCAL_API) else "needed beyond this computer")
        self.api_origins = QLineEdit(", ".join(api.allowed_origins))
        self.api_origins.setPlaceholderText("none (web pages cannot use it)")
        self.api_origins.setToolTip(
            "Web pages allowed to use the local API, e.g. http://localhost:3000 (comma-separated). Any other page "
            "open in your browser is refused."
        )
        self.api_relay = QLineEdit(", ".join(api.relay_servers))
        self.api_relay.setPlaceholderText("none")
        self.api_relay.setToolTip(
            "Servers (by the names above) whose models the local API may use when the chat uses one; their API "
            "keys are then spent by the apps that call the local API (comma-separated)."
        )
        self.api_note = plain_label()
        self.api_note.setWordWrap(True)
        self.api_host.textChanged.connect(lambda _t: self._api_note())
        self.api_enabled.toggled.connect(lambda _on: self._api_note())
        form.addRow(self.api_enabled)
        form.addRow("Address", self.api_host)
        form.addRow("Port", self.api_port)
        form.addRow("API key", self.api_key)
        form.addRow("Web pages allowed", self.api_origins)
        form.addRow("May relay to servers", self.api_relay)
        form.addRow(self.api_note)
        self._api_note()
        return group

    def _api_note(self) -> None:
        host = self.api_host.text().strip() or "127.0.0.1"
        if host in LOCAL_HOSTS:
            self.api_note.setText(f"Only apps on this computer can use it: http://{host}:{self.api_port.value()}/v1")
        else:
            self.api_note.setText(
                f"The model will be reachable from the network at {host}. An API key is required; anyone with it "
                "can use the model."
            )

    def api_settings(self) -> LocalApiSettings:
        host = self.api_host.text().strip() or "127.0.0.1"
        origins = [o.strip().rstrip("/") for o in self.api_origins.text().split(",")]
        names = {s.name for s in self.servers}
        relay = [n.strip() for n in self.api_relay.text().split(",")]
        return LocalApiSettings(
            self.api_enabled.isChecked(), host[:255], self.api_port.value(),
            allowed_origins=tuple(dict.fromkeys(o for o in origins if o.startswith(("http://", "https://")))),
            relay_servers=tuple(dict.fromkeys(n for n in relay if n in names)),
        )  # fmt: skip

    def api_key_change(self) -> str | None:
        """A new key for the local API typed here, or None when the field was left empty (keep the stored one)."""
        return self.api_key.text().strip() or None
