"""Settings ▸ Local API: serve the loaded model to other apps on this computer (OpenAI-compatible).

Its own page, so that it is never below the fold of the server list. The key goes to the key store, never to the
settings file; a stored key is never shown again.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QFormLayout, QLineEdit, QVBoxLayout, QWidget

from fara_desktop.serving.local_api import LOCAL_HOSTS
from fara_desktop.settings import LocalApiSettings
from fara_desktop.system.api_keys import LOCAL_API, ApiKeyStore
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.widgets.setting_fields import whole_spin


class LocalApiPage(QWidget):
    """Edits a copy of the local API settings. ``server_names`` gives the servers as edited on the Servers page
    (a relay may only name one of them)."""

    def __init__(
        self, api: LocalApiSettings, keys: ApiKeyStore, server_names: Callable[[], set[str]],
        parent: QWidget | None = None,
    ) -> None:  # fmt: skip
        super().__init__(parent)
        self._server_names = server_names
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
        self.api_key.setPlaceholderText("key stored" if keys.get(LOCAL_API) else "needed beyond this computer")
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
        form.addRow("API key", self.api_key)
        form.addRow("Web pages allowed", self.api_origins)
        form.addRow("May relay to servers", self.api_relay)
        layout.addLayout(form)
        layout.addWidget(self.api_note)
        layout.addStretch(1)
        self._api_note()

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
