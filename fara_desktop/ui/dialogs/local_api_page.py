"""Settings ▸ Local API: serve the loaded model to other apps on this computer (OpenAI-compatible).

Its own page, so that it is never below the fold of the server list. The keys go to the key store, never to the
settings file; a stored key is never shown again. The page also says, per client (an API key, or the apps on this
computer together), what the API has read and what each client's kept conversations spared it
(``serving.principals``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QCheckBox, QFormLayout, QLineEdit, QVBoxLayout, QWidget

from fara_desktop.serving.local_api import LOCAL_HOSTS
from fara_desktop.serving.principals import ClientUse
from fara_desktop.settings import LocalApiSettings
from fara_desktop.system.api_keys import LOCAL_API, ApiKeyStore
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.widgets.setting_fields import whole_spin


class LocalApiPage(QWidget):
    """Edits a copy of the local API settings. ``server_names`` gives the servers as edited on the Servers page
    (a relay may only name one of them); ``clients``, what each client of the running API has used (None: it is
    not running)."""

    def __init__(
        self, api: LocalApiSettings, keys: ApiKeyStore, server_names: Callable[[], set[str]],
        parent: QWidget | None = None, clients: Callable[[], Sequence[ClientUse] | None] = lambda: None,
    ) -> None:  # fmt: skip
        super().__init__(parent)
        self._server_names = server_names
        self._clients = clients
        layout = QVBoxLayout(self)
        intro = plain_label(
            "Other apps on this computer (editors, scripts, chat front-ends) can use the loaded model through an "
            "OpenAI-compatible API. It runs only while this is switched on."
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
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("keys stored" if keys.get(LOCAL_API) else "needed beyond this computer")
        self.api_key.setToolTip(
            "One key per app, separated by spaces. Each key's requests reuse only what that key sent before (a "
            "follow-up reads only its new words); with no key, the apps on this computer share one prompt cache. "
            "Your own chats never share theirs with any app."
        )
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
        form.addRow("API keys", self.api_key)
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
            self.api_enabled.isChecked(), host[:255], self.api_port.value(),
            allowed_origins=tuple(dict.fromkeys(o for o in origins if o.startswith(("http://", "https://")))),
            relay_servers=tuple(dict.fromkeys(n for n in relay if n in names)),
        )  # fmt: skip

    def api_key_change(self) -> str | None:
        """A new key for the local API typed here, or None when the field was left empty (keep the stored one)."""
        return self.api_key.text().strip() or None


def client_line(use: ClientUse) -> str:
    """"Key 1 (…9f3a): 3 requests · 2,540 tokens read · 4,890 reused (66 %)"."""
    total = use.read + use.reused
    share = f" ({round(100 * use.reused / total)} %)" if total else ""
    requests = f"{use.requests:,} request{'s' if use.requests != 1 else ''}"
    return f"{use.label}: {requests} · {use.read:,} tokens read · {use.reused:,} reused{share}"
