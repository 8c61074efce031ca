"""Which of an API principal's conversations a request continues, as llama-server's slots do for its clients.

A client sends its whole conversation every time; the request continues the slot that shares the longest prefix
with it, at least half of the slot's last prompt (a follow-up adds the reply and a question; a Regenerate sends the
same prompt again; an Edit changes its end), as llama.cpp's server chooses its slots, so the edits of one conversation
keep one slot and leave the client's other conversations theirs. Any other request is a conversation of its
own and gets a new slot — started, where the principal's kept states share its beginning, from the best of them —
so a client switching between two conversations keeps both. Each principal keeps its latest
``SLOTS_PER_PRINCIPAL``; the states themselves live in ``KVStateCache`` under the slot's key, inside the saved
readings' budget, and never on disk. Runs on the inference thread only, as ``ContextStates`` that owns it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from fara_desktop.engine.kv_states import common_prefix
from fara_desktop.engine.types import ApiSlot

SLOTS_PER_PRINCIPAL = 4
SIMILAR = 0.5  # a prompt sharing this part of a slot's last one continues it (an Edit, a Regenerate, a follow-up)


class ApiSlots:
    """Each principal's slots, most recently used last, with the prompt each was last sent."""

    def __init__(self) -> None:
        self._slots: dict[str, OrderedDict[int, tuple[int, ...]]] = {}
        self._numbers = 0

    def slot_for(self, principal: str, tokens: Sequence[int]) -> tuple[ApiSlot, list[ApiSlot]]:
        """The slot this prompt continues (or a new one), and the slots dropped to make room for a new one."""
        slots = self._slots.setdefault(principal, OrderedDict())
        shared = {number: common_prefix(sent, tokens) for number, sent in slots.items()}
        continued = [number for number, length in shared.items() if 0 < length >= SIMILAR * len(slots[number])]
        dropped: list[ApiSlot] = []
        if continued:
            number = max(continued, key=lambda n: shared[n])
        else:
            self._numbers += 1
            number = self._numbers
            while len(slots) >= SLOTS_PER_PRINCIPAL:
                dropped.append(ApiSlot(principal, slots.popitem(last=False)[0]))
        slots[number] = tuple(tokens)
        slots.move_to_end(number)
        return ApiSlot(principal, number), dropped

    def clear(self) -> None:
        """Every slot goes (the model was unloaded, or the saved readings were deleted)."""
        self._slots.clear()
