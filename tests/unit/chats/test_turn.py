"""The turn's phases and transitions without a window (issue 28): every path a reply takes, and the wrong moves
refused."""

from __future__ import annotations

import threading

import pytest

from fara_desktop.chats.turn import PendingReply, Turn, TurnPhase, TurnStateError
from fara_desktop.vocabulary.messages import ChatMessage

PROMPT = [ChatMessage("user", "Hi")]
REPLY = PendingReply("a model", 7, ())


def test_a_reply_with_documents_goes_through_every_phase():
    turn = Turn()
    assert not turn.busy and not turn.busy_event.is_set()
    ticket = turn.start_retrieving()
    assert turn.busy and turn.busy_event.is_set() and turn.retrieved(ticket)
    assert not turn.retrieved(object())  # another search's answer is dropped
    turn.wait_for_paint(REPLY, PROMPT)
    assert not turn.retrieved(ticket)
    assert turn.take_pending() == REPLY and turn.take_pending() is None
    assert turn.take_prompt() == PROMPT and turn.take_prompt() is None
    turn.generating(42)
    assert turn.owns(42) and not turn.owns(41)
    turn.stopping()
    assert turn.phase is TurnPhase.STOPPING and turn.owns(42)  # the engine's Cancelled still lands
    turn.end()
    assert not turn.busy and not turn.busy_event.is_set() and not turn.owns(42)


def test_a_reply_that_waits_for_a_model_and_one_stopped_before_the_paint():
    turn = Turn()
    turn.wait_for_paint(REPLY, PROMPT)
    turn.take_pending()
    turn.defer()
    assert turn.phase is TurnPhase.DEFERRED and turn.busy and not turn.owns(0)
    turn.generating(1)
    turn.end()
    turn.wait_for_paint(REPLY, PROMPT)
    turn.end()  # stopped before the paint: the pending step finds nothing to do
    assert turn.take_pending() is None


@pytest.mark.parametrize(
    "wrong",
    [
        lambda t: t.generating(1),  # the engine before the reply's row exists
        lambda t: t.stopping(),  # nothing to stop
        lambda t: t.defer(),
    ],
)
def test_wrong_moves_are_refused(wrong):
    with pytest.raises(TurnStateError):
        wrong(Turn())
    busy = Turn()
    busy.start_retrieving()
    with pytest.raises(TurnStateError, match="from retrieving to retrieving"):
        busy.start_retrieving()  # a second send while the first waits


def test_the_busy_flag_is_read_from_another_thread():
    turn = Turn()
    seen: list[bool] = []
    turn.start_retrieving()
    reader = threading.Thread(target=lambda: seen.append(turn.busy_event.wait(5)))
    reader.start()
    reader.join(10)
    assert seen == [True]
