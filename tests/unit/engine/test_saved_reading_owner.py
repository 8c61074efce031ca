"""A chat's saved reading has one owner, the inference thread with its writer (issue 50, items 3, 9 and 10): a
write held in progress is never taken for idle, a chat deleted meanwhile has no file afterwards, *Delete saved
reading* goes through the same queue, and a write the app was killed in is swept at start and counted."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from pathlib import Path

import pytest

from fara_desktop.engine.context_states import ContextStates
from fara_desktop.engine.kv_disk import SUFFIX, KVDiskStore, StateIdentity
from fara_desktop.engine.kv_states import KVSnapshot

IDENTITY = StateIdentity("/models/a.gguf", 1000, "1", 4096, "f16", False, "0.3.36")


def snapshot(count: int = 200) -> KVSnapshot:
    return KVSnapshot(tuple(range(count)), bytearray([7]) * 10_000)


class HeldStore(KVDiskStore):
    """A store whose writes wait, once started, until the test lets them go (a write held in progress)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.started = threading.Event()
        self.go = threading.Event()

    def save(
        self, conversation: Hashable, identity: StateIdentity, snapshot: KVSnapshot, slot: str = ""
    ) -> Path | None:
        self.started.set()
        assert self.go.wait(30), "the test never let the write go"
        return super().save(conversation, identity, snapshot, slot)


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "state.key") if folder.exists() else []


@pytest.mark.parametrize("repeat", range(20))
def test_a_chat_deleted_while_its_state_is_being_written_has_no_state_after(tmp_path: Path, repeat: int):
    """Item 3: the deletion waits for the write under way (idle means nothing pending *and* nothing in flight), and
    the file it wrote is deleted: none in RAM or on disk afterwards."""
    store = HeldStore(tmp_path / "states")
    states = ContextStates(store)
    states.attach(IDENTITY, rewindable=True)
    states.cache.put(5, snapshot())
    writer = states._writer
    assert writer is not None
    writer.put(5, IDENTITY, snapshot())
    assert store.started.wait(10)  # the write is in progress, held
    discarded = threading.Event()
    real_discard = writer.discard

    def discard(conversation: Hashable | None = None) -> None:
        real_discard(conversation)
        discarded.set()

    writer.discard = discard  # type: ignore[method-assign]
    deletion = threading.Thread(target=states.forget, args=(None, 5))
    deletion.start()
    assert discarded.wait(10)
    assert not writer.wait_idle(0), "a write in progress was taken for idle: the deletion would come before it"
    store.go.set()
    deletion.join(30)
    assert not deletion.is_alive()
    assert writer.wait_idle(10)
    assert files(store.folder) == [], "the deleted chat's state landed after its deletion"
    assert states.cache.get(5) is None


def test_a_write_under_way_when_the_chat_goes_is_deleted_even_after_the_wait_gave_up(tmp_path: Path):
    """The writer itself deletes the file of a chat discarded while it wrote it (a deletion that waited its
    longest and went on still leaves nothing)."""
    store = HeldStore(tmp_path / "states")
    states = ContextStates(store)
    writer = states._writer
    assert writer is not None
    writer.put(9, IDENTITY, snapshot())
    assert store.started.wait(10)
    writer.discard(9)
    store.go.set()
    assert writer.wait_idle(10)
    assert files(store.folder) == []


def test_delete_saved_reading_goes_through_the_owner(tmp_path: Path):
    """Item 9: every chat's reading goes, RAM snapshots and checkpoints too, and a write held in progress does not
    come back."""
    store = HeldStore(tmp_path / "states")
    states = ContextStates(store)
    states.attach(IDENTITY, rewindable=False)
    states.cache.put(1, snapshot())
    states.cache.put_checkpoint(2, snapshot(100))
    store.go.set()
    KVDiskStore.save(store, 3, IDENTITY, snapshot())  # on disk from an earlier session
    store.go.clear()
    store.started.clear()
    writer = states._writer
    assert writer is not None
    writer.put(4, IDENTITY, snapshot())
    assert store.started.wait(10)
    deletion = threading.Thread(target=states.forget, args=(None, None))
    deletion.start()
    store.go.set()
    deletion.join(30)
    assert writer.wait_idle(10)
    assert files(store.folder) == []
    assert states.cache.get(1) is None and states.cache.latest_checkpoint(2) is None


def test_a_write_the_app_was_killed_in_is_swept_at_start_and_counted(tmp_path: Path):
    """Item 10: the temporary file of a write that never ended is counted while it is there and gone at start."""
    folder = tmp_path / "states"
    store = KVDiskStore(folder)
    store.save(1, IDENTITY, snapshot())
    left = folder / ".abc123.tmp"
    left.write_bytes(b"x" * 50_000)  # what a kill in the middle of a write leaves
    assert store.bytes_used() >= 50_000 + 10_000
    again = KVDiskStore(folder)  # the next start
    assert not left.exists()
    assert [p.name.endswith(SUFFIX) for p in folder.iterdir() if p.name != "state.key"] == [True]
    assert again.bytes_used() < 50_000
