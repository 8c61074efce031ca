"""The model's loading on screen: the progress bar and its Stop button, the status line while it loads, and what the
chat says when a load ends (ready, stopped, failed with the model in use kept, or no model at all)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from PySide6.QtWidgets import QProgressBar, QPushButton

from fara_desktop.app.chat_turns import ChatTurns
from fara_desktop.chats.prompt_wait import PromptSpeed
from fara_desktop.chats.session import ChatSession
from fara_desktop.engine.types import (
    LoadProgress,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoading,
    ModelUnloaded,
)
from fara_desktop.text.format import format_duration
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.widgets.chat_view import ChatView
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel


class LoadingScreen(Protocol):
    """The widgets a load shows itself in (the main window provides them)."""

    load_progress: QProgressBar
    stop_loading_button: QPushButton
    hardware_panel: HardwarePanel
    chat_view: ChatView

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...


class LoadingChat(Protocol):
    """What a load's end changes in the chat controller."""

    def model_sees(self) -> None: ...
    def sync_thinking_switch(self) -> None: ...
    def no_model_because(self, reason: str) -> None: ...


class ModelLoadingView:
    """Shows a model's load and its end for the chat controller, whose turns learn which model is in use."""

    def __init__(
        self,
        screen: LoadingScreen,
        bridge: EngineBridge,
        turns: ChatTurns,
        speed: PromptSpeed,
        session: ChatSession,
        chat: LoadingChat,
        loaded: Callable[[ModelInfo], None],
        failed: Callable[[str], None],
    ) -> None:
        self.screen, self.bridge, self.turns, self.speed, self.session = screen, bridge, turns, speed, session
        self.chat, self.loaded, self.failed = chat, loaded, failed
        self._since = 0.0
        self._name = ""

    def stop(self) -> None:
        self.bridge.cancel_load()
        self.screen.stop_loading_button.setEnabled(False)
        self.screen.set_status("Stopping the load…")

    def _show_progress(self, visible: bool) -> None:
        self.screen.load_progress.setVisible(visible)
        self.screen.stop_loading_button.setVisible(visible)
        self.screen.stop_loading_button.setEnabled(visible)

    def on_loading(self, event: ModelLoading) -> None:
        self._name = event.name or event.path.name
        self.screen.hardware_panel.show_model_loading(self._name)
        self.screen.load_progress.setRange(0, 0)
        self._show_progress(True)
        self._since = time.monotonic()
        self.screen.set_status(f"Loading {self._name}…")

    def on_progress(self, event: LoadProgress) -> None:
        bar = self.screen.load_progress
        if bar.maximum() == 0:
            bar.setRange(0, 100)
        bar.setValue(int(event.fraction * 100))
        if not self.screen.stop_loading_button.isEnabled():
            return  # "Stopping the load…" stays until llama.cpp has stopped
        elapsed = time.monotonic() - self._since
        left = ""
        if 0.05 <= event.fraction < 1.0 and elapsed >= 1.0:
            left = f" · about {format_duration(elapsed * (1 - event.fraction) / event.fraction)}"
        self.screen.set_status(f"Loading {self._name}: {event.fraction:.0%}{left}")

    def on_loaded(self, event: ModelLoaded) -> None:
        chat, info = self.chat, event.info
        self.turns.model_loaded(info)
        self.speed.reset(info.expected_prompt_tok_per_s, info.prompt_span_tokens)
        self._show_progress(False)
        self.screen.hardware_panel.show_model(info)
        chat.model_sees()
        self.screen.chat_view.empty_state.set_privacy(info.server)
        self.session.start_thinking_at(info.thinking_default)
        chat.sync_thinking_switch()
        self.screen.set_status(f"Ready · {info.name} loaded in {info.load_seconds:.1f} s")
        self.loaded(info)

    def on_load_failed(self, event: ModelLoadFailed) -> None:
        chat, kept = self.chat, event.still_loaded
        self.turns.model_loaded(kept)
        self._show_progress(False)
        self.screen.hardware_panel.show_model(kept)
        stopped = event.error_type == "LoadCancelledError"
        if kept is not None:  # a switch that failed: the model in use stays (or was loaded again)
            what = "Loading stopped" if stopped else "Could not load the model"
            self.screen.show_notice(
                f"{what}. {event.message} Still chatting with {kept.name}.", "notice" if stopped else "error"
            )
            self.screen.set_status(f"Ready · {kept.name} (the switch {'was stopped' if stopped else 'failed'})")
            chat.sync_thinking_switch()
        elif stopped:
            chat.no_model_because(f"loading {self._name or event.path.name} was stopped")
            self.screen.show_notice(f"{event.message} No model is loaded: choose one in Settings ▸ Model to chat.")
            self.screen.set_status("Loading stopped · no model loaded")
        else:
            chat.no_model_because(f"{self._name or event.path.name} could not be loaded ({event.message.rstrip('.')})")
            self.screen.show_notice(f"Could not load the model. {event.message}", "error")
            self.screen.set_status("No model loaded")
        self.failed(event.message)

    def on_unloaded(self, _event: ModelUnloaded) -> None:
        self.turns.model_loaded(None)
        self.screen.hardware_panel.show_model(None)
        self.chat.sync_thinking_switch()
