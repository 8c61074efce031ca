"""The state a loaded ``Llama`` holds beyond its weights: KV-cache snapshots of a conversation, the prompt prefix
it can reuse, and the model file's pages read ahead into the page cache."""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fara_desktop.engine.kv_states import KVSnapshot, usable_prefix, zeroed_buffer
from fara_desktop.machine.llama_internals import cut_context, hold_tokens, mark_logits_stale, reused_prefix

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)


def snapshot_sequence(llm: Llama) -> KVSnapshot | None:
    """Copy sequence 0's KV cells and the tokens they hold."""
    import llama_cpp

    if llm.n_tokens == 0:
        return None
    size = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
    data = zeroed_buffer(size)  # one copy of the state (hundreds of MB at 1.7B), written into by llama.cpp
    written = llama_cpp.llama_state_seq_get_data(llm.ctx, (ctypes.c_uint8 * size).from_buffer(data), size, 0)
    return KVSnapshot(tuple(llm.input_ids[: llm.n_tokens].tolist()), data[:written])


def restore_sequence(llm: Llama, snapshot: KVSnapshot) -> bool:
    import llama_cpp

    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), -1, 0, -1)
    data = (ctypes.c_uint8 * len(snapshot.data)).from_buffer(snapshot.data)  # read in place, not copied
    if llama_cpp.llama_state_seq_set_data(llm.ctx, data, len(snapshot.data), 0) == 0:
        cut_context(llm, 0)
        return False
    hold_tokens(llm, snapshot.tokens)
    mark_logits_stale(llm)  # the logits are not those of the restored state
    return True


def start_prefault(path: Path) -> threading.Thread:
    """Read the file once in the background so its pages are in the page cache before the first prompt.

    With mmap, weights are faulted in lazily; the first reply would otherwise pay for reading the file from disk.
    """

    def read_all() -> None:
        try:
            with open(path, "rb", buffering=0) as handle:
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
                while handle.read(8 << 20):
                    pass
        except OSError as exc:  # the model still works; only the first reply is slower
            log.info("Could not pre-read %s: %s", path, exc)

    thread = threading.Thread(target=read_all, name="fara-prefault", daemon=True)
    thread.start()
    return thread


def cached_prefix(llm: Llama, tokens: Sequence[int], rewindable: bool = True) -> int:
    """How many prompt tokens the context saves reading: for a KV cache, what llama-cpp-python takes from it
    (mirrors ``Llama.generate``) when it can be cut back there (``can_cut_back``), else none; for a recurrent
    state, all it holds or nothing (``usable_prefix``)."""
    if llm.n_tokens == 0:
        return 0
    held = llm.input_ids[: llm.n_tokens].tolist()
    if not rewindable:
        return usable_prefix(held, tokens, rewindable=False)
    shared = reused_prefix(held, tokens)
    return shared if shared >= llm.n_tokens or can_cut_back(llm, shared) else 0


def can_cut_back(llm: Llama, position: int) -> bool:
    """Whether the KV cache still holds what reading on from ``position`` needs. A sliding-window layer's cache
    reuses the cells of tokens that fell out of its window (llama.cpp's ``find_slot``, even with a full-size SWA
    cache), so after a long reply the window before an earlier position may be gone; cutting back there would
    continue silently wrong. The rule llama.cpp's server uses: the oldest position held must be within a window
    of the cut (``llama_memory_seq_pos_min``)."""
    import llama_cpp

    window = sliding_window(llm)
    if window <= 0:
        return True
    oldest = llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(llm.ctx), 0)
    return bool(oldest <= max(0, position - window))


def sliding_window(llm: Llama) -> int:
    """The model's sliding attention window in tokens (0: none)."""
    import llama_cpp

    return max(0, int(llama_cpp.llama_model_n_swa(llm.model)))


def is_rewindable(llm: Llama) -> bool:
    """The context can be cut back to any prefix: False for recurrent and hybrid models (llama.cpp says which)."""
    import llama_cpp

    return not (llama_cpp.llama_model_is_recurrent(llm.model) or llama_cpp.llama_model_is_hybrid(llm.model))
