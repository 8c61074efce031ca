"""Sending, stopping, deleting and switching through the Qt-free core, with no window (the scripted backend; the
real model's run is in tests/integration/app)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from pathlib import Path

from fara_desktop.chats.turn import TurnPhase
from fara_desktop.engine.types import Cancelled, Finished, HistoryTrimmed, TokenText
from fara_desktop.files.paths import app_paths
from fara_desktop.settings import load_settings
from tests.helpers.fakes import FakeBackend
from tests.helpers.headless import HeadlessApp


def test_the_core_and_serve_load_without_qt():
    """Importing the core, the turns and serve brings no module of Qt into the process (the import contract
    forbids it statically; this is what Python really loads)."""
    code = (
        "import sys, fara_desktop.app.core, fara_desktop.app.chat_turns, fara_desktop.cli.serve; "
        "print([m for m in sys.modules if m.partition('.')[0] in ('PySide6', 'shiboken6')])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


def test_send_and_the_reply_is_kept(fara_home):
    app = HeadlessApp(app_paths(), FakeBackend(words=["Hello", " there", "!"]))
    try:
        app.load(Path("/models/fake.gguf"))
        app.turns.send("Hi")
        finished = app.pump_until(lambda e: isinstance(e, Finished))
        assert finished.text == "Hello there!"
        conversation = app.core.session.conversation_id
        stored = app.core.store.messages(conversation)
        assert [(m.role, m.content, m.status) for m in stored] == [
            ("user", "Hi", "complete"), ("assistant", "Hello there!", "complete")
        ]  # fmt: skip
        assert app.view.busy == [True, False] and app.view.texts and app.view.overs == [finished]
        assert app.turns.turn.phase is TurnPhase.IDLE
    finally:
        app.close()


def test_stop_while_replying_keeps_the_reply_as_stopped(fara_home):
    gate = threading.Semaphore(0)
    app = HeadlessApp(app_paths(), FakeBackend(words=["One", " two", " three", " four"], gate=gate))
    try:
        app.load(Path("/models/fake.gguf"))
        app.turns.send("Count")
        gate.release()
        app.pump_until(lambda e: isinstance(e, TokenText))
        app.turns.stop()
        assert app.turns.turn.phase is TurnPhase.STOPPING
        for _ in range(4):
            gate.release()
        cancelled = app.pump_until(lambda e: isinstance(e, Cancelled))
        stored = app.core.store.messages(app.core.session.conversation_id)
        assert stored[-1].status == "stopped" and stored[-1].content == cancelled.text
        assert app.turns.turn.phase is TurnPhase.IDLE and app.view.busy[-1] is False
    finally:
        app.close()


def test_events_of_another_request_change_nothing_of_the_open_chat(fara_home):
    """A late "history trimmed" (or any reply event) of a request that is not the turn's — a chat left since —
    moves nothing of the chat open now."""
    app = HeadlessApp(app_paths(), FakeBackend())
    try:
        app.load(Path("/models/fake.gguf"))
        app.turns.send("First")
        app.pump_until(lambda e: isinstance(e, Finished))
        session = app.core.session
        start, messages = session.context_start, list(session.messages)
        app.turns.on_event(HistoryTrimmed(999, 1, 1))
        app.turns.on_event(TokenText(999, "stray", 1))
        app.turns.on_event(Finished(999, "stray", app.view.overs[0].stats, "stop"))
        assert session.context_start == start and session.messages == messages
        assert len(app.view.ends) == 1  # only the turn's own reply ended
    finally:
        app.close()


def test_deleting_a_chat_goes_through_the_engine_and_the_store(fara_home):
    backend = FakeBackend()
    app = HeadlessApp(app_paths(), backend)
    try:
        app.load(Path("/models/fake.gguf"))
        app.turns.send("Hello")
        app.pump_until(lambda e: isinstance(e, Finished))
        conversation = app.core.session.conversation_id
        assert conversation is not None
        app.core.delete_chat(conversation)
        assert app.core.store.conversation(conversation) is None and app.core.session.conversation_id != conversation
        app.worker.unload()  # a command after the deletion: the engine has handled it once this one is seen
        app.pump_until(lambda e: type(e).__name__ == "ModelUnloaded")
        assert backend.forgotten == [conversation]
    finally:
        app.close()


def test_switching_models_the_next_reply_is_the_new_models(fara_home):
    app = HeadlessApp(app_paths(), FakeBackend())
    try:
        app.load(Path("/models/first.gguf"))
        app.turns.send("One")
        app.pump_until(lambda e: isinstance(e, Finished))
        loaded = app.load(Path("/models/second.gguf"))
        assert app.turns.model_info == loaded.info and loaded.info.path == Path("/models/second.gguf")
        app.turns.send("Two")
        app.pump_until(lambda e: isinstance(e, Finished))
        assert app.core.store.messages(app.core.session.conversation_id)[-1].model == loaded.info.name
    finally:
        app.close()


def test_settings_are_applied_saved_and_say_what_changed(fara_home):
    app = HeadlessApp(app_paths(), FakeBackend())
    try:
        settings = app.core.settings
        same = app.core.apply_settings(settings)
        assert not (same.reload or same.tools_changed or same.appearance_changed) and same.save_problem is None
        changed = app.core.apply_settings(dataclasses.replace(
            settings, theme="dark", extra_model_folders=["/elsewhere"],
            prompts=dataclasses.replace(settings.prompts, chat_states_gb=0.0),
            tools=dataclasses.replace(settings.tools, servers_json="{not json"),
        ))  # fmt: skip
        assert changed.reload and changed.appearance_changed and changed.tools_changed
        assert changed.tools_problem is not None and "cannot be read" in changed.tools_problem
        assert app.core.chat_states.budget_bytes == 0
        assert load_settings(app.core.paths.config).settings.theme == "dark"
        # the local API switched on: its parallel conversations (tuned, made at load) need the model loaded again,
        # unless their number is pinned (the model already has it)
        now = app.core.settings
        api_on = dataclasses.replace(now, local_api=dataclasses.replace(now.local_api, enabled=True))
        assert app.core.apply_settings(api_on).reload
        pinned = dataclasses.replace(api_on, inference=dataclasses.replace(api_on.inference, parallel=2))
        app.core.apply_settings(pinned)
        api_off = dataclasses.replace(pinned, local_api=dataclasses.replace(pinned.local_api, enabled=False))
        assert not app.core.apply_settings(api_off).reload
    finally:
        app.close()


def test_closing_stops_the_engine_before_the_chats_are_closed(fara_home):
    """The shutdown order: the engine ends, then the screen settles a reply it was drawing, then the chats close."""
    app = HeadlessApp(app_paths(), FakeBackend())
    order: list[str] = []

    def settle() -> None:
        order.append("engine ended" if not app.worker.thread.is_alive() else "engine still running")
        app.core.store.conversations("")  # the store is still open here
        order.append("chats open")

    app.core.close(save_pending_reply=settle)
    assert order == ["engine ended", "chats open"]


def test_the_wait_for_a_long_message_is_said_before_its_first_batch_is_read(fara_home):
    """Issue 43, item 8: "Reading your message: 0 of 947 tokens" stood for seconds with no time left; the speed
    expected of the model here (or measured before) says it from the start."""
    import dataclasses

    from fara_desktop.chats.turn import PendingReply
    from fara_desktop.engine.types import PromptProgress

    app = HeadlessApp(app_paths(), FakeBackend())
    try:
        loaded = app.load(Path("/models/fake.gguf"))
        app.turns.model_loaded(dataclasses.replace(loaded.info, expected_prompt_tok_per_s=100.0))
        app.turns.turn.wait_for_paint(PendingReply(None, 1, ()), [])
        app.turns.turn.generating(77)
        app.turns.on_event(PromptProgress(77, 0, 947))
        assert app.view.statuses[-1] == "Reading your message: 0 of 947 tokens · about 9 s left"
        app.turns.prompt_speed = lambda: 50.0  # measured here: it wins
        app.turns.on_event(PromptProgress(77, 0, 947))
        assert app.view.statuses[-1].endswith("about 19 s left")
    finally:
        app.turns.turn.end()
        app.close()
