"""The application without a window: who owns the engine, the chats, the saved readings, the embedder and the tool
servers, the intents that change them, and the order they are shut down in.

The window (``ui/``) and ``fara-desktop serve`` are adapters over this: the window turns clicks into these intents
and the engine's events into widgets; ``serve`` turns HTTP requests into the engine's commands. Nothing here
imports Qt (the import contracts forbid it), so every intent is tested without a window.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

from fara_desktop.app.chat_turns import ChatTurns, TurnView
from fara_desktop.app.embedding import EmbedderService
from fara_desktop.app.jobs import Jobs, Stage
from fara_desktop.app.kernel_speeds import KernelSpeeds
from fara_desktop.app.picture_intake import ApiPictureFiles, sweep_left_temp_files
from fara_desktop.app.picture_ledger import PictureLedger
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore, open_store
from fara_desktop.documents.grounding import MAX_BUDGET_TOKENS
from fara_desktop.engine.backend import Backend
from fara_desktop.engine.kv_disk import KVDiskStore, budget_within, chat_state_store
from fara_desktop.engine.worker import EventSink, InferenceWorker
from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.hardware import on_battery_now
from fara_desktop.machine.kernels import configure_kernels
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.pictures.store import PictureStore
from fara_desktop.settings import Settings, ToolSettings, save_settings
from fara_desktop.system.api_keys import ApiKeyStore
from fara_desktop.tools.mcp_config import McpConfigError, bind_to_definitions, parse_mcp_servers
from fara_desktop.tools.mcp_hub import McpHub
from fara_desktop.tools.tool_box import ToolBox
from fara_desktop.vocabulary.sampling import SamplingParams

log = logging.getLogger(__name__)
QUIET_BEFORE_MEASURING_S = 20.0


class EngineCore:
    """The part every front end needs: the settings, the inference thread (started once, with the front end's event
    sink), the embedding model and the API keys; ``fara-desktop serve`` uses this part alone (it never opens the
    chats: a window running beside it owns them)."""

    def __init__(
        self,
        paths: AppPaths,
        settings: Settings,
        backend: Backend | None = None,
        state_store: KVDiskStore | None = None,
        embedding: EmbedderService | None = None,
    ) -> None:
        self.paths = paths
        self.settings = settings
        configure_kernels(pinned=settings.inference.kernel_path)  # before the first load: a path pinned in Settings
        self.api_keys = ApiKeyStore(paths.config)
        # every background job, and the order they are stopped in at quitting (``app.jobs``)
        self.jobs = Jobs()
        # measured on a loaded model, in child processes, giving way to the user's replies
        self.kernel_speeds = KernelSpeeds(self.jobs, engine_busy=self._engine_busy)
        self.embedding = embedding or EmbedderService()
        self.jobs.service("the embedding model", Stage.EMBEDDER, self.embedding.close)
        # the local API's pictures, kept while their request runs (created on first use: a folder of the cache)
        self.api_picture_files = ApiPictureFiles(paths.cache / "api-pictures")
        sweep_left_temp_files()  # a pasted picture's bytes, left by a process that was killed while reading it
        self._backend = backend
        self._state_store = state_store
        self._worker: InferenceWorker | None = None

    def start_engine(self, on_event: EventSink) -> InferenceWorker:
        """Start the inference thread; its events go to ``on_event`` (called on that thread). Once only."""
        if self._worker is not None:
            raise RuntimeError("the engine is already running")
        worker = self._worker = InferenceWorker(on_event, self._backend, LoadRecord(self.paths.data), self._state_store)
        self.jobs.service("the inference thread", Stage.ENGINE, lambda: self._end_engine(worker))
        return worker.start()

    def _engine_busy(self) -> bool:
        """Kernel speeds are measured once the engine has been quiet a while: never beside a reply, a read-ahead
        or the user's next question typed right after one."""
        return self._worker is not None and self._worker.quiet_seconds() < QUIET_BEFORE_MEASURING_S

    def _end_engine(self, worker: InferenceWorker, timeout: float = 30.0) -> bool:
        """Replies and loads cancelled, the engine's thread ended (a chat's reading kept on disk first, the model
        freed); False when the thread still runs (inside llama.cpp: the quit names it late)."""
        worker.cancel()
        worker.cancel_load()  # a model half loaded is not waited for
        return worker.shutdown(timeout)

    @property
    def worker(self) -> InferenceWorker:
        if self._worker is None:
            raise RuntimeError("the engine has not been started")
        return self._worker

    def close(self, timeout: float = 30.0) -> list[str]:
        """Every job stopped, stage after stage (``app.jobs``): what takes work in, what feeds the engine, the tool
        servers, the engine, the embedder; within ``timeout`` in all. Returns the jobs that had not ended."""
        return self.jobs.stop_all(timeout)


@dataclass(frozen=True)
class SettingsApplied:
    """What applying new settings changed, for the screen to follow."""

    save_problem: str | None  # the file could not be written: they apply until the app quits
    tools_problem: str | None  # the MCP servers' JSON does not parse: none runs
    tools_changed: bool
    appearance_changed: bool
    reload: bool  # the model is to be chosen and loaded again (its folders or tuning changed; the local API went
    # on or off while its parallel conversations are tuned: they are made at load)


class AppCore(EngineCore):
    """The desktop application's state and its intents, without a window: the chats (store and open session), the
    chats' saved readings (KV states on disk), the MCP servers and the user's permissions for their tools, on top of
    ``EngineCore``. ``on_tools_change`` is called on the tool servers' thread when one starts, stops or fails;
    ``on_problem`` with a sentence for the user when something the user did not wait for fails (a permission that
    could not be saved)."""

    def __init__(
        self,
        paths: AppPaths,
        settings: Settings,
        backend: Backend | None = None,
        on_tools_change: Callable[[], None] | None = None,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        settings = tools_bound_to_definitions(settings)
        chat_states = chat_state_store(paths.data, settings.prompts.chat_states_gb)
        super().__init__(paths, settings, backend, chat_states)
        self.chat_states = chat_states
        opened = open_store(paths.data)
        self.store: ConversationStore = opened.store
        self.store_problem = opened.problem
        self.interrupted_chat = opened.interrupted_chat  # shown first: its reply ended with the app last time
        # the user's pictures: deleted by the ledger alone, never against a stand-in database (it knows no message)
        self.pictures = PictureLedger(
            PictureStore(paths.data / "pictures"), self.store.pictures_in_use if self.store_problem is None else None
        )
        self.session = ChatSession(self.store, picture_file=self.pictures.path)
        self.pictures.sweep()  # a picture attached and never sent goes
        self.tools_hub = McpHub(on_tools_change)
        self.jobs.service("the tool servers", Stage.TOOLS, self.tools_hub.close)
        self._on_problem = on_problem or (lambda _text: None)
        self.tool_box = ToolBox(self.tools_hub, settings.tools.always_allowed, self._permissions_changed)
        self.tools_problem = self.configure_tools(settings.tools)
        self.turns: ChatTurns | None = None

    def open_turns(self, view: TurnView, sampling: SamplingParams) -> ChatTurns:
        """The open chat's turns (one for the app), shown by ``view``; once the engine has started."""
        if self.turns is not None:
            raise RuntimeError("the chat's turns are already open")
        self.turns = ChatTurns(self.session, self.worker, view, sampling)
        return self.turns

    # ------------------------------------------------------------------ intents

    def delete_chat(self, conversation_id: int) -> None:
        """The chat and every copy of its reading go: the rows now, its KV states through the inference thread's
        queue (after a reply of it still ending or a state about to be written, which cannot bring them back). The
        open chat, deleted, is replaced by a new one."""
        if conversation_id == self.session.conversation_id:
            self.session.new()
        its_pictures = self.store.pictures_of(conversation_id)
        self.store.delete(conversation_id)
        self.pictures.delete_unheld(its_pictures)  # unless another chat shows them or the tray or an import holds them
        if self._worker is not None:
            self._worker.forget_conversation(conversation_id)
        else:
            self.chat_states.forget(conversation_id)

    def forget_saved_readings(self) -> None:
        """Every chat's saved reading goes (the user's *Delete saved reading*), through the inference thread's queue:
        the one owner of the states, so a write waiting or under way cannot bring a file back, and the RAM copies go
        too."""
        if self._worker is not None:
            self._worker.forget_conversation(None)
        else:
            self.chat_states.forget()

    def apply_settings(self, settings: Settings) -> SettingsApplied:
        """Keep ``settings`` (saved to disk) and apply what belongs to the core: the saved readings' budget, the
        tool servers. What the screen shows (sampling, appearance, the local API) follows the answer."""
        old, self.settings = self.settings, settings
        configure_kernels(pinned=settings.inference.kernel_path)  # taken at the reload a changed value makes
        save_problem = self._save()
        if old.prompts.chat_states_gb != settings.prompts.chat_states_gb:
            wanted = int(max(0.0, settings.prompts.chat_states_gb) * (1 << 30))
            self.chat_states.budget_bytes = budget_within(self.chat_states.folder, wanted)
            self.chat_states.enforce_budget()
        tools_changed = old.tools != settings.tools
        tools_problem = self.configure_tools(settings.tools) if tools_changed else None
        return SettingsApplied(
            save_problem,
            tools_problem,
            tools_changed,
            (old.theme, old.font_size) != (settings.theme, settings.font_size),
            old.inference != settings.inference
            or old.extra_model_folders != settings.extra_model_folders
            or old.projectors != settings.projectors
            or (old.local_api.enabled != settings.local_api.enabled and settings.inference.parallel is None),
        )

    def configure_tools(self, tools: ToolSettings) -> str | None:
        """Run exactly the MCP servers switched on; text that does not parse runs none, and the answer says why."""
        problem = None
        try:
            servers = parse_mcp_servers(tools.servers_json)
        except McpConfigError as exc:
            problem = f"The MCP servers in Settings ▸ Tools cannot be read: {exc}"
            servers = []
        self.tools_hub.configure(servers, tools.enabled)
        self.tool_box.always = set(tools.always_allowed)
        return problem

    def _permissions_changed(self) -> None:
        """The user chose *Always for this tool*: kept in the settings file."""
        tools = dataclasses.replace(self.settings.tools, always_allowed=tuple(sorted(self.tool_box.always)))
        self.settings = dataclasses.replace(self.settings, tools=tools)
        problem = self._save()
        if problem:
            self._on_problem(problem)

    def _save(self) -> str | None:
        try:
            save_settings(self.paths.config, self.settings)
        except OSError as exc:
            log.warning("Settings could not be saved", exc_info=True)
            return f"Settings could not be saved ({exc}); they apply until you quit."
        return None

    # ------------------------------------------------------------------ policies the settings set

    def read_ahead_allowed(self) -> bool:
        """Reading ahead spends energy on text that may still change: on battery only if the user said so."""
        prompts = self.settings.prompts
        return prompts.read_ahead and (prompts.read_ahead_on_battery or not on_battery_now())

    def readable_passage_tokens(self, prompt_tok_per_s: float) -> int:
        """What the model reads of a question's document passages in the wait the user accepts (Settings ▸
        Prompts) at its prompt speed measured here; a server's model (no speed known) is not limited by it."""
        speed = prompt_tok_per_s
        return int(speed * self.settings.prompts.document_wait_s) if speed > 0 else MAX_BUDGET_TOKENS

    # ------------------------------------------------------------------ shutting down

    def close(self, timeout: float = 30.0, save_pending_reply: Callable[[], None] = lambda: None) -> list[str]:
        """Every job stopped in its stage's order (a reply waiting on a tool call is stopped before the tool servers,
        the engine keeps a chat's reading on disk and frees the model), then ``save_pending_reply`` (the screen
        saves a reply that was still being drawn), and the chats last. Returns the jobs that had not ended."""
        late = super().close(timeout)
        save_pending_reply()
        self.session.close()
        self.store.close()
        return late


def tools_bound_to_definitions(settings: Settings) -> Settings:
    """Servers switched on and *Always* permissions named by a server's name alone (settings of an earlier version)
    bound to the definitions saved with them (``tools.mcp_config.bind_to_definitions``)."""
    tools = settings.tools
    enabled, always = bind_to_definitions(tools.servers_json, tools.enabled, tools.always_allowed)
    if (enabled, always) == (tools.enabled, tools.always_allowed):
        return settings
    return dataclasses.replace(settings, tools=dataclasses.replace(tools, enabled=enabled, always_allowed=always))
