"""The tool calls a reply made and what came of them, stored with the reply and sent back to the model.

A reply that uses tools is written in rounds: the text before its calls, the calls (with the user's decision and
the result), and so on; the reply's own content is the answer after the last round. The model gets the rounds back
in its template's own format (assistant turn with calls, then one tool turn per result); a denied call's result
says it was denied, so the model is not left waiting for it.

What the database holds is read as a stranger's text: bounded, typed, and anything malformed is dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.tools import ToolCall

Outcome = Literal["ran", "error", "denied", "stopped"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
MAX_ROUNDS = 32
MAX_STORED_CHARS = 64 * 1024  # per text field read back from the database
DENIED = "The user denied this call; it did not run."
STOPPED = "The call was stopped before it finished."


@dataclass(frozen=True)
class ToolUse:
    """One call: what the model asked (``call``), the server that has the tool, the outcome and its text."""

    call: ToolCall
    server: str = ""
    outcome: Outcome = "ran"
    result: str = ""

    @property
    def result_for_model(self) -> str:
        if self.outcome == "denied":
            return DENIED
        if self.outcome == "stopped":
            return STOPPED
        return self.result


@dataclass(frozen=True)
class ToolRound:
    """The reply's text before its calls, its reasoning, and the calls."""

    text: str
    reasoning: str
    uses: tuple[ToolUse, ...]


def rounds_json(rounds: Sequence[ToolRound]) -> str:
    return json.dumps(
        [
            {
                "text": r.text,
                "reasoning": r.reasoning,
                "uses": [
                    {
                        "id": u.call.id,
                        "name": u.call.name,
                        "arguments": u.call.arguments,
                        "server": u.server,
                        "outcome": u.outcome,
                        "result": u.result,
                    }
                    for u in r.uses
                ],
            }
            for r in rounds
        ],
        ensure_ascii=False,
    )


def _text(value: Any) -> str:
    return value[:MAX_STORED_CHARS] if isinstance(value, str) else ""


def rounds_from_json(raw: Any) -> tuple[ToolRound, ...]:
    """The rounds as stored; anything malformed is dropped."""
    try:
        data = json.loads(raw) if isinstance(raw, str) and raw else []
    except (ValueError, RecursionError):
        return ()
    rounds = []
    for entry in data[:MAX_ROUNDS] if isinstance(data, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("uses"), list):
            continue
        uses = []
        for use in entry["uses"][:64]:
            if not isinstance(use, dict) or not _text(use.get("name")):
                continue
            outcome: Outcome = next((o for o in OUTCOMES if o == use.get("outcome")), "error")
            call = ToolCall(_text(use.get("id"))[:64], _text(use.get("name"))[:200], _text(use.get("arguments")))
            uses.append(ToolUse(call, _text(use.get("server"))[:200], outcome, _text(use.get("result"))))
        if uses:
            rounds.append(ToolRound(_text(entry.get("text")), _text(entry.get("reasoning")), tuple(uses)))
    return tuple(rounds)


def round_messages(rounds: Sequence[ToolRound]) -> list[ChatMessage]:
    """The rounds as the model reads them: each an assistant turn with its calls, then one tool turn per call."""
    messages: list[ChatMessage] = []
    for r in rounds:
        messages.append(ChatMessage("assistant", r.text, r.reasoning, tool_calls=tuple(u.call for u in r.uses)))
        messages += [ChatMessage("tool", u.result_for_model, tool_call_id=u.call.id, name=u.call.name) for u in r.uses]
    return messages
