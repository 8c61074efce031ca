"""Which of an API principal's conversations a request continues (``engine.api_slots``), and that a principal's
search for a kept state never looks at another's (``KVStateCache.closest``)."""

from __future__ import annotations

from fara_desktop.engine.api_slots import SLOTS_PER_PRINCIPAL, ApiSlots
from fara_desktop.engine.kv_states import KVSnapshot, KVStateCache
from fara_desktop.engine.types import WINDOW, ApiSlot


def test_a_follow_up_or_a_regenerate_continues_its_slot_and_another_conversation_gets_its_own():
    slots = ApiSlots()
    first, dropped = slots.slot_for("key-a", [1, 2, 3])
    assert dropped == []
    assert slots.slot_for("key-a", [1, 2, 3, 9, 4])[0] == first  # the reply and a question added
    assert slots.slot_for("key-a", [1, 2, 3, 9, 4])[0] == first  # the same prompt again (a Regenerate)
    second = slots.slot_for("key-a", [1, 8, 7, 6, 5])[0]  # less than half of what any slot holds: its own
    assert second != first
    assert slots.slot_for("key-a", [1, 2, 3, 9, 4, 5])[0] == first  # and back: both were kept
    assert slots.slot_for("key-a", [1, 8, 7, 6, 5, 8])[0] == second
    other = slots.slot_for("key-b", [1, 2, 3, 9, 4, 5])[0]  # the same words from another principal
    assert other.principal == "key-b" and other not in (first, second)


def test_each_principal_keeps_its_latest_slots_and_names_those_dropped():
    slots = ApiSlots()
    kept = [slots.slot_for("key-a", [n])[0] for n in range(SLOTS_PER_PRINCIPAL)]
    slots.slot_for("key-a", [0, 1])  # the oldest is used again: it is the newest now
    newest, dropped = slots.slot_for("key-a", [99])
    assert dropped == [kept[1]] and newest not in kept
    assert slots.slot_for("key-b", [5])[1] == []  # another principal's slots are counted apart


def test_the_closest_state_is_searched_among_the_principals_own_only():
    cache = KVStateCache()
    cache.put(7, KVSnapshot((1, 2, 3, 4, 5, 6), bytearray(8)))  # a chat of the user's
    cache.put_checkpoint(ApiSlot("key-b", 1), KVSnapshot((1, 2, 3, 4, 5), bytearray(8)))
    mine = KVSnapshot((1, 2), bytearray(8))
    cache.put(ApiSlot("key-a", 2), mine)
    assert cache.closest([1, 2, 3, 4, 5, 6, 7], principal="key-a") is mine
    assert cache.closest([1, 2, 3, 4, 5, 6, 7], principal="key-c") is None
    assert cache.closest([1, 2, 3, 4, 5, 6, 7], principal="key-b").tokens == (1, 2, 3, 4, 5)
    assert cache.closest([1, 2, 3, 4, 5, 6, 7], principal=WINDOW).tokens == (1, 2, 3, 4, 5, 6)


def test_edits_of_one_conversation_continue_its_slot_and_keep_the_clients_others():
    """Issue 61, item 9: four edits of one API conversation evicted the same client's other conversation — a slot
    was continued only when its whole last prompt was a prefix, so each edit took a new one. As llama.cpp's server
    chooses: the slot sharing the longest prefix, when that is at least half of what it holds, else a new one."""
    slots = ApiSlots()
    other = slots.slot_for("key-a", [50, 51, 52])[0]
    chat = [1, 2, 3, 4, 5, 6, 7, 8]
    mine = slots.slot_for("key-a", chat)[0]
    for edit in range(4):  # the last message edited four times
        slot, dropped = slots.slot_for("key-a", [*chat[:-1], 100 + edit])
        assert slot == mine and dropped == []
    assert slots.slot_for("key-a", [50, 51, 52, 53])[0] == other  # the other conversation is still kept
