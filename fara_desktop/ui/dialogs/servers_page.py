"""Settings ▸ Servers: OpenAI-compatible servers to chat with, and their models.

A server is contacted only when the user asks for its model list or chooses one of its models. API keys go to the
key store (the system keychain, or a 0600 file), never to the settings file; a stored key is never shown again.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.engine.remote_backend import NOT_SENT_TO_SERVERS, is_local_host, list_models
from fara_desktop.settings import RemoteChoice, ServerEntry, Settings
from fara_desktop.system.api_keys import ApiKeyStore
from fara_desktop.text.format import format_count
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.widgets.short_list import ShortList


class ServersPage(QWidget):
    """Edits copies of the server list, the chosen server model and the keys. ``modelActivated``: a model was
    double-clicked or Enter was pressed on it, meaning "chat with this one now"."""

    modelActivated = Signal()

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

        self.server_list = ShortList(3)
        self.server_list.setObjectName("serverList")
        self.server_list.setAccessibleName("Servers")
        self.server_list.currentRowChanged.connect(lambda _row: self._list_cleared())
        # One field per row, each as wide as the page: the address and its example are never clipped.
        add_form = QFormLayout()
        add_form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. gpu-box")
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("e.g. http://gpu-box:8000/v1")
        self.key_edit = QLineEdit()
        self.key_edit.setPlaceholderText("optional")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.add_button = QPushButton("Add server")
        self.add_button.clicked.connect(self.add_server)
        add_form.addRow("Name", self.name_edit)
        add_form.addRow("Address", self.url_edit)
        add_form.addRow("API key", self.key_edit)
        add_form.addRow("", self.add_button)
        buttons = QHBoxLayout()
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_server)
        self.list_button = QPushButton("List its models")
        self.list_button.clicked.connect(self.list_models)
        buttons.addWidget(self.list_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        self.model_list = ShortList(4)
        self.model_list.setObjectName("serverModelList")
        self.model_list.setAccessibleName("The server's models")
        self.model_list.itemActivated.connect(lambda _item: self._activated())  # double-click, or Enter
        self.use_button = QPushButton("Chat with this model")
        self.use_button.clicked.connect(self.use_model)
        for button in (self.add_button, self.remove_button, self.list_button, self.use_button):
            # Enter in a field must not press whichever button had focus last (it was Remove): it goes to OK.
            button.setAutoDefault(False)
        self.status = plain_label()
        self.status.setObjectName("serversStatus")
        self.status.setWordWrap(True)
        layout.addWidget(self.server_list, 1)
        layout.addLayout(buttons)
        layout.addLayout(add_form)
        layout.addWidget(plain_label("Models of the chosen server (double-click one, or Enter, to chat with it):"))
        layout.addWidget(self.model_list, 1)
        use_row = QHBoxLayout()
        use_row.addWidget(self.use_button, 0)
        use_row.addWidget(self.status, 1)  # beside the button: what was chosen is seen without scrolling
        layout.addLayout(use_row)
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
        warning = (
            ""
            if url.startswith("https://") or is_local_host(url)
            else (" Its address is plain http to another computer: chats with it travel unencrypted.")
        )
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
        self.status.setText(f"{server.name} offers {format_count(len(ids), 'model')}.")
        if ids:  # the next key press chooses among them
            self.model_list.setCurrentRow(0)
            self.model_list.setFocus()

    def _listing_failed(self, error: object) -> None:
        self.list_button.setEnabled(True)
        self.status.setText(str(error))

    def _activated(self) -> None:
        if self.use_model():
            self.modelActivated.emit()

    def use_model(self) -> bool:
        selected = self.model_list.selectedItems()
        if not selected:
            self.status.setText("List a server's models and choose one.")
            return False
        server, model = selected[0].data(Qt.ItemDataRole.UserRole)
        self.choice = RemoteChoice(server, model)
        self.status.setText(f"Will chat with {model} on {server} (click OK).")
        return True
