"""Settings ▸ Local API: serve the loaded model to other apps on this computer (OpenAI-compatible).

Its own page, so that it is never below the fold of the server list. The keys go to the key store, never to the
settings file; a stored key is never shown again. The page also says, per client (an API key, or the apps on this
computer together), what the API has read and what each client's kept conversations spared it
(``serving.principals``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.serving.local_api import LOCAL_HOSTS
from fara_desktop.serving.principals import ClientUse, key_label, key_problem, split_keys
from fara_desktop.settings import LocalApiSettings
from fara_desktop.system.api_keys import LOCAL_API, ApiKeyStore
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.widgets.setting_fields import whole_spin


class LocalApiPage(QWidget):
    """Edits a copy of the local API settings. ``server_names`` gives the servers as edited on the Servers page
    (a relay may only name one of them); ``clients``, what each client of the running API has used (None: it is
    not running)."""

    def __init__(
        self,
        api: LocalApiSettings,
        keys: ApiKeyStore,
        server_names: Callable[[], set[str]],
        parent: QWidget | None = None,
        clients: Callable[[], Sequence[ClientUse] | None] = lambda: None,
    ) -> None:
        super().__init__(parent)
        self._server_names = server_names
        self._clients = clients
        layout = QVBoxLayout(self)
        intro = plain_label(
            "Other apps on this computer (editors, scripts, chat front-ends) can use the loaded model through an "
            "OpenAI-compatible API. It runs only while this is switched on. Without keys, your apps share one "
            "prompt cache (another user's programs never share it); give each app a key of its own (Make a key) "
            "to keep your apps apart too."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.api_enabled = QCheckBox("Serve the loaded model to other apps")
        self.api_enabled.setChecked(api.enabled)
        self.api_host = QLineEdit(api.host)
        self.api_port = whole_spin("local_api.port", "apiPort")
        self.api_port.setValue(api.port)
        self._stored = split_keys(keys.get(LOCAL_API))  # each kept whole: a key is never split at a space
        self._keys = list(self._stored)
        self.keys_list = QListWidget()
        self.keys_list.setObjectName("apiKeys")
        self.keys_list.setMaximumHeight(self.fontMetrics().height() * 5)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("a key for one app")
        self.api_key.setToolTip(
            "One key per app. Each key's requests reuse only what that key sent before (a follow-up reads only its "
            "new words); with no key, the apps on this computer share one prompt cache. Your own chats never share "
            "theirs with any app."
        )
        self.api_key.returnPressed.connect(self.add_typed_key)
        self.add_key_button = QPushButton("Add")
        self.add_key_button.clicked.connect(self.add_typed_key)
        self.make_key_button = QPushButton("Make a key")
        self.make_key_button.setToolTip("A new random key, copied to the clipboard for the app you give it to")
        self.make_key_button.clicked.connect(self.make_key)
        self.remove_key_button = QPushButton("Remove")
        self.remove_key_button.clicked.connect(self.remove_selected_key)
        self.key_note = plain_label()
        self.key_note.setObjectName("apiKeyNote")
        self.key_note.setWordWrap(True)
        self.key_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        key_row = QHBoxLayout()
        for widget in (self.api_key, self.add_key_button, self.make_key_button, self.remove_key_button):
            key_row.addWidget(widget)
        self._show_keys()
        self.api_origins = QLineEdit(", ".join(api.allowed_origins))
        self.api_origins.setPlaceholderText("none (web pages cannot use it)")
        self.api_origins.setToolTip(
            "Web pages allowed to use the local API, e.g. http://localhost:3000 (comma-separated). Any other page "
            "open in your browser is refused."
        )
        self.api_relay = QLineEdit(", ".join(api.relay_servers))
        self.api_relay.setPlaceholderText("none")
        self.api_relay.setToolTip(
            "Servers (by their names on the Servers page) whose models the local API may use when the chat uses "
            "one; their API keys are then spent by the apps that call the local API (comma-separated)."
        )
        self.api_note = plain_label()
        self.api_note.setObjectName("localApiNote")
        self.api_note.setWordWrap(True)
        self.api_host.textChanged.connect(lambda _t: self._api_note())
        self.api_port.valueChanged.connect(lambda _v: self._api_note())
        form.addRow(self.api_enabled)
        form.addRow("Address", self.api_host)
        form.addRow("Port", self.api_port)
        form.addRow("API keys", self.keys_list)
        form.addRow("", key_row)
        form.addRow("", self.key_note)
        form.addRow("Web pages allowed", self.api_origins)
        form.addRow("May relay to servers", self.api_relay)
        layout.addLayout(form)
        layout.addWidget(self.api_note)
        self.clients_note = plain_label()
        self.clients_note.setObjectName("localApiClients")
        self.clients_note.setWordWrap(True)
        layout.addWidget(self.clients_note)
        layout.addStretch(1)
        self._api_note()
        self.show_clients()

    def showEvent(self, event: QShowEvent) -> None:
        self.show_clients()
        super().showEvent(event)

    def show_clients(self) -> None:
        """Each client's requests and the prompt tokens read and reused since the API started."""
        clients = self._clients()
        if clients is None:
            self.clients_note.setText("Clients: the API is not running.")
        elif not clients:
            self.clients_note.setText("Clients: no app has used the API since it started.")
        else:
            self.clients_note.setText("Clients since the API started:\n" + "\n".join(map(client_line, clients)))

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
        names = self._server_names()
        relay = [n.strip() for n in self.api_relay.text().split(",")]
        return LocalApiSettings(
            self.api_enabled.isChecked(),
            host[:255],
            self.api_port.value(),
            allowed_origins=tuple(dict.fromkeys(o for o in origins if o.startswith(("http://", "https://")))),
            relay_servers=tuple(dict.fromkeys(n for n in relay if n in names)),
        )

    def _show_keys(self) -> None:
        self.keys_list.clear()
        self.keys_list.addItems([key_label(n, key) for n, key in enumerate(self._keys, 1)])
        if not self._keys:  # said in the list's own colours (a disabled list is too faint to read)
            self.keys_list.addItem("No key: your apps on this computer use the API without one")
            self.keys_list.item(0).setFlags(Qt.ItemFlag.ItemIsEnabled)
        self.remove_key_button.setEnabled(bool(self._keys))

    def add_typed_key(self) -> bool:
        """The key in the field joins the list (whole, spaces and all); a key that cannot be one is refused with
        the reason, and stays in the field to be corrected."""
        key = self.api_key.text().strip()
        if not key:
            return True
        problem = key_problem(key)
        if problem:
            self.key_note.setText(f"Not added: this key {problem}.")
            return False
        if key not in self._keys:
            self._keys.append(key)
        self.api_key.clear()
        self.key_note.setText("")
        self._show_keys()
        return True

    def make_key(self) -> str:
        """A new random key for one app: added, copied to the clipboard and shown this once."""
        key = "fara-" + secrets.token_urlsafe(24)
        self._keys.append(key)
        QGuiApplication.clipboard().setText(key)
        self.key_note.setText(f"New key, copied to the clipboard (give it to one app; it is not shown again): {key}")
        self._show_keys()
        return key

    def remove_selected_key(self) -> None:
        row = self.keys_list.currentRow()
        if self._keys and 0 <= row < len(self._keys):
            del self._keys[row]
            self.key_note.setText("")
            self._show_keys()

    def pending_key_problem(self) -> str | None:
        """Why the key still in the field was not added (the dialog is being accepted with it)."""
        key = self.api_key.text().strip()
        problem = key_problem(key) if key else None
        return f"The API key typed in Settings ▸ Local API was not added: it {problem}." if problem else None

    def api_key_change(self) -> str | None:
        """The local API's keys as edited here, one per line ("" for none), or None when they did not change; a
        key still in the field is added when it can be one."""
        self.add_typed_key()
        return "\n".join(self._keys) if tuple(self._keys) != self._stored else None


def client_line(use: ClientUse) -> str:
    """ "Key 1 (…9f3a): 3 requests · 2 under way now · 2,540 tokens read · 4,890 reused (66 %)"."""
    total = use.read + use.reused
    share = f" ({round(100 * use.reused / total)} %)" if total else ""
    requests = f"{use.requests:,} request{'s' if use.requests != 1 else ''}"
    now = f" · {use.running:,} under way now" if use.running else ""
    return f"{use.label}: {requests}{now} · {use.read:,} tokens read · {use.reused:,} reused{share}"
