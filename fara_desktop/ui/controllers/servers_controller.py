"""Servers and the local API: which server model the chat uses, its API key, the warning for a chat that
travels unencrypted, and the local API that serves the loaded model to other apps.

Nothing is contacted unless the user added the server and chose one of its models; the local API runs only when
turned on in Settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel

from fara_desktop.app.jobs import Job, Jobs, Stage
from fara_desktop.engine.remote_backend import is_local_host
from fara_desktop.engine.types import ModelInfo, RemoteModel
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi, TextEmbedder
from fara_desktop.serving.principals import ClientUse
from fara_desktop.serving.request_pictures import KeepsApiPictures
from fara_desktop.settings import LocalApiSettings, RemoteChoice, Settings
from fara_desktop.system.api_keys import LOCAL_API, ApiKeyStore
from fara_desktop.ui.dialogs.local_api_page import LocalApiPage
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.sampling import SamplingParams

log = logging.getLogger(__name__)


class ServersScreen(Protocol):
    """What the servers controller shows things in (the main window)."""

    @property
    def settings(self) -> Settings: ...

    api_label: QLabel

    def show_notice(self, text: str, role: str = "notice") -> None: ...


def unencrypted_warning(server: str, base_url: str) -> str | None:
    """The warning for plain http to another computer (None for https, or a server on this computer)."""
    if base_url.startswith("http://") and not is_local_host(base_url):
        return (
            f"The server {server} is reached over plain http: what you type and its replies travel unencrypted "
            "over the network. Use https if the server offers it."
        )
    return None


class ServersController(QObject):
    """Resolves the chosen server model and runs the local API."""

    apiActivity = Signal(int)  # API requests waiting or running (emitted from the API's thread; queued to the GUI)
    apiRequestsChanged = Signal(int)  # the same count, on the GUI thread, for the chat's status line

    def __init__(
        self,
        screen: ServersScreen,
        worker: InferenceWorker,
        keys: ApiKeyStore,
        sampling: SamplingParams,
        jobs: Jobs | None = None,
    ) -> None:
        super().__init__()
        self.screen = screen
        self.worker = worker
        # What the local API samples with by default: replaced whole (never changed in place) by the window, so the
        # API's thread always reads one consistent value.
        self.sampling = sampling
        self.keys = keys
        self.api: ApiServer | None = None
        self.jobs = jobs or Jobs()  # the app's: the running API is stopped first at quitting
        self._api_job: Job | None = None
        self._api_settings: LocalApiSettings | None = None
        # the documents' embedding model, for /v1/embeddings (the window sets it; it locks and loads on first use)
        self.embedder_source: Callable[[], TextEmbedder | None] = lambda: None
        self.pictures: KeepsApiPictures | None = None  # takes the API requests' pictures in (the core's)
        self._warned: set[str] = set()
        self.apiActivity.connect(self._show_activity)
        self._api_requests = 0

    # ------------------------------------------------------------------ server models

    def remote_model(self, choice: RemoteChoice | None) -> RemoteModel | None:
        server = self.screen.settings.server(choice.server) if choice else None
        if choice is None or server is None:
            return None
        return RemoteModel(server.name, server.base_url, choice.model, self.keys.get(server.name))

    def chosen_remote(self) -> RemoteModel | None:
        return self.remote_model(self.screen.settings.remote_model)

    def warn_if_unencrypted(self, info: ModelInfo) -> None:
        """A model just loaded: say once per server when chats with it travel unencrypted."""
        source = info.path
        if isinstance(source, RemoteModel) and source.server not in self._warned:
            warning = unencrypted_warning(source.server, source.base_url)
            if warning:
                self._warned.add(source.server)
                self.screen.show_notice(warning, "error")

    # ------------------------------------------------------------------ local API

    def store_keys(self, server_keys: Mapping[str, str | None], local_api: LocalApiPage) -> None:
        """The keys edited in Settings go to the key store, never to the settings file: the servers' and the local
        API's (one per line; a key still typed that cannot be one is said, not stored)."""
        try:
            for name, key in server_keys.items():
                self.keys.set(name, key)
            problem = local_api.pending_key_problem()
            if problem:
                self.screen.show_notice(problem, "error")
            api_keys = local_api.api_key_change()
            if api_keys is not None:
                self.keys.set(LOCAL_API, api_keys or None)
        except Exception as exc:  # a keychain that refuses: say so, the rest of the settings still apply
            log.warning("An API key could not be stored", exc_info=True)
            self.screen.show_notice(f"An API key could not be stored ({type(exc).__name__}: {exc}).", "error")

    def apply_api_settings(self, settings: LocalApiSettings) -> None:
        """Start, stop or move the local API as the settings say (nothing happens when they did not change)."""
        keys = self.keys.get(LOCAL_API)
        if settings == self._api_settings and (self.api is not None) == settings.enabled:
            if self.api is not None and keys != self.api.api.api_key:  # a key added, replaced or removed
                try:
                    self.api.set_keys(keys)
                except FaraError as exc:
                    self.stop_api()
                    self.screen.show_notice(f"The local API was stopped: {exc}", "error")
            return
        self.stop_api()
        self._api_settings = settings
        if not settings.enabled:
            self._show_activity(0)
            return
        try:
            api = LocalApi(
                self.worker,
                lambda: self.worker.loaded_model,
                lambda: self.sampling,
                keys,
                on_activity=self.apiActivity.emit,
                allowed_origins=settings.allowed_origins,
                relay_servers=settings.relay_servers,
                embedder=lambda: self.embedder_source(),
                pictures=self.pictures,
            )
            self.api = ApiServer(api, settings.host, settings.port)
        except FaraError as exc:
            self.screen.show_notice(f"The local API did not start: {exc}", "error")
            self._show_activity(0)
            return
        self.api.start()
        self._api_job = self.jobs.begin("the local API", Stage.INTAKE, self.stop_api)
        self._show_activity(0)

    def api_clients(self) -> list[ClientUse] | None:
        """What each client of the running local API used (None: it is not running)."""
        return self.api.api.principals.uses() if self.api is not None else None

    def stop_api(self) -> None:
        if self.api is not None:
            self.api.stop()
            self.api = None
        if self._api_job is not None:
            self._api_job.end()
            self._api_job = None

    def _show_activity(self, active: int) -> None:
        if active != self._api_requests:
            self._api_requests = active
            self.apiRequestsChanged.emit(active)
        label = self.screen.api_label
        if self.api is None:
            label.hide()
            return
        text = f"Local API: {self.api.address}"
        if self.api.reachable_from_network:
            text += " · reachable from the network"
        if active:
            text += f" · {active} request{'s' if active != 1 else ''} from other apps"
            info = self.worker.loaded_model
            if info is not None and info.parallel > 1 and active > 1:  # Settings ▸ Inference ▸ Parallel API...
                text += f", {min(active, info.parallel)} decoding together"
        label.setText(text)
        label.setToolTip("Other apps can use the loaded model at this address (OpenAI-compatible).")
        label.show()
