"""The Qt-free core with the real llama.cpp and the embedded model: a chat sent, stopped and deleted with no
window (the same turns the window drives)."""

from __future__ import annotations

import pytest

from fara_desktop.engine.types import Cancelled, Finished, TokenText
from fara_desktop.files.paths import app_paths
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.headless import HeadlessApp

pytestmark = pytest.mark.real_model
LONG_SYSTEM_PROMPT = "You are a helpful assistant. " + "Answer briefly and precisely. " * 40


def test_send_then_stop_with_the_real_model(fara_home, smollm2_path):
    app = HeadlessApp(app_paths(), sampling=SamplingParams(temperature=0.0, max_tokens=12))
    try:
        app.load(smollm2_path)
        app.turns.send("Name a colour.")
        finished = app.pump_until(lambda e: isinstance(e, Finished))
        assert finished.text.strip() and finished.stats.completion_tokens > 0
        app.turns.sampling = SamplingParams(temperature=0.0, max_tokens=400)
        app.turns.send("Now write a long story about the sea.")
        app.pump_until(lambda e: isinstance(e, TokenText))
        app.turns.stop()
        cancelled = app.pump_until(lambda e: isinstance(e, Cancelled))
        stored = app.core.store.messages(app.core.session.conversation_id)
        assert [m.status for m in stored] == ["complete", "complete", "complete", "stopped"]
        assert stored[-1].content == cancelled.text
        assert cancelled.stats is None or cancelled.stats.completion_tokens < 400
    finally:
        app.close()


def test_a_chat_deleted_while_it_replies_leaves_no_saved_reading(fara_home, smollm2_path):
    """Deleted as its first words arrive: the engine ends the reply, would keep the chat's reading a moment later
    and at shutdown — the deletion, queued behind the reply, leaves nothing on disk."""
    app = HeadlessApp(app_paths(), sampling=SamplingParams(temperature=0.0, max_tokens=24))
    try:
        app.load(smollm2_path)
        app.core.session.set_system_prompt(LONG_SYSTEM_PROMPT)
        app.turns.send("Hello!")
        app.pump_until(lambda e: isinstance(e, TokenText))
        deleted = app.core.session.conversation_id
        assert deleted is not None
        app.core.delete_chat(deleted)
        app.pump_until(lambda e: isinstance(e, (Finished, Cancelled)))
        assert app.core.session.conversation_id != deleted  # the open chat went: a new one is open
        app.core.session.set_system_prompt(LONG_SYSTEM_PROMPT)  # the next chat's reading is kept as usual
        app.turns.send("Hello again!")
        app.pump_until(lambda e: isinstance(e, Finished))
        other = app.core.session.conversation_id
    finally:
        app.close()
    folder = app_paths().data / "chat-states"
    names = [p.name for p in folder.iterdir()] if folder.exists() else []
    assert [n for n in names if n.startswith(f"c{deleted}-")] == []
    assert any(n.startswith(f"c{other}-") for n in names)
