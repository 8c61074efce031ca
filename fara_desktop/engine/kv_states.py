"""Per-conversation KV-cache snapshots, so switching back to an earlier chat does not re-read its history.

``Llama.save_state()`` copies the whole context twice plus the logits array (hundreds of MB for large
vocabularies); this keeps only sequence 0's KV data (``llama_state_seq_get_data``) and the tokens it covers, in a
least-recently-used map bounded by bytes.
"""

from __future__ import annotations

import mmap
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from fara_desktop.engine.types import WINDOW, SequenceSlot, principal_of

DEFAULT_BUDGET_BYTES = 512 * 1024 * 1024
CHECKPOINTS_PER_OWNER = 4  # prompts' ends a chat can go back to: its last four turns


@dataclass(frozen=True)
class _Checkpoint:
    owner: Hashable
    tokens: int


@dataclass(frozen=True)
class KVSnapshot:
    tokens: tuple[int, ...]
    data: memoryview | bytearray  # llama.cpp's sequence data; writable, so ctypes hands it over without a copy


def zeroed_buffer(size: int) -> memoryview:
    """``size`` writable zero bytes that the kernel maps in as they are first written. ``bytearray(size)`` fills
    them while it holds the GIL: 276 ms for a 600 MB state here, and the window stalled that long."""
    return memoryview(mmap.mmap(-1, size)) if size > 0 else memoryview(bytearray())


class KVStateCache:
    """LRU of snapshots by conversation; the oldest are dropped when the byte budget is exceeded."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.budget = budget_bytes
        self._items: OrderedDict[Hashable, KVSnapshot] = OrderedDict()

    @property
    def bytes_used(self) -> int:
        return sum(len(s.data) for s in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: Hashable, snapshot: KVSnapshot) -> None:
        if len(snapshot.data) > self.budget:
            return
        self._items.pop(key, None)
        self._items[key] = snapshot
        while self.bytes_used > self.budget:
            self._items.popitem(last=False)

    def get(self, key: Hashable) -> KVSnapshot | None:
        snapshot = self._items.get(key)
        if snapshot is not None:
            self._items.move_to_end(key)
        return snapshot

    def closest(
        self,
        tokens: Sequence[int],
        rewindable: bool = True,
        principal: str = WINDOW,
        window: int = 0,
        sequences: bool = False,
    ) -> KVSnapshot | None:
        """The snapshot of ``principal`` sharing the longest usable prefix with ``tokens`` (``usable_prefix``): a
        chat branched off another (or an edit of an early message) starts from its parent's state instead of
        re-reading the shared history. Another principal's snapshots are never looked at; ``sequences``: only those
        kept by the parallel replies' sequences (``SequenceSlot``), else only the others."""
        best, best_length = None, 0
        for key, snapshot in self._items.items():
            owner = key.owner if isinstance(key, _Checkpoint) else key
            if principal_of(owner) != principal or isinstance(owner, SequenceSlot) != sequences:
                continue
            length = usable_prefix(snapshot.tokens, tokens, rewindable, window)
            if length > best_length:
                best, best_length = snapshot, length
        return best

    def put_checkpoint(self, owner: Hashable, snapshot: KVSnapshot) -> None:
        """A state saved exactly at a prompt's end (a model whose state cannot be cut back needs one to go back
        to for a Regenerate, an Edit or a Branch); each owner keeps its latest ``CHECKPOINTS_PER_OWNER``."""
        self.put(_Checkpoint(owner, len(snapshot.tokens)), snapshot)
        mine = [key for key in self._items if isinstance(key, _Checkpoint) and key.owner == owner]
        for key in mine[:-CHECKPOINTS_PER_OWNER]:
            del self._items[key]

    def latest_checkpoint(self, owner: Hashable) -> KVSnapshot | None:
        mine = [key for key in self._items if isinstance(key, _Checkpoint) and key.owner == owner]
        return self._items[mine[-1]] if mine else None

    def clear(self) -> None:
        self._items.clear()

    def forget(self, key: Hashable) -> None:
        """Drop the snapshot kept under ``key`` (its chat was deleted), and its checkpoints."""
        self._items.pop(key, None)
        for item in [k for k in self._items if isinstance(k, _Checkpoint) and k.owner == key]:
            del self._items[item]

    def discard(self, snapshot: KVSnapshot) -> None:
        """Drop a snapshot that failed in use, under whichever key holds it."""
        for key in [k for k, s in self._items.items() if s is snapshot]:
            del self._items[key]


def usable_prefix(state: Sequence[int], tokens: Sequence[int], rewindable: bool = True, window: int = 0) -> int:
    """How many of ``tokens`` a saved state holding ``state`` saves reading once restored. A KV cache can be cut
    back to any shared prefix — but a sliding-window cache (``window`` tokens) restored holds only the window before
    its end (llama.cpp keeps no more: ``can_cut_back`` then refuses any cut short of the end, and restoring it was
    for nothing); a recurrent state (Mamba, RWKV, LFM2's convolutions, delta-nets) only continues from exactly where
    it was saved: all of it is a prefix of ``tokens`` with at least one token left to read, or it is of no use."""
    shared = common_prefix(state, tokens)
    if not rewindable:
        return shared if shared == len(state) < len(tokens) else 0
    if 0 < window < len(state) and shared < len(state):
        return 0
    return shared


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count
