"""Every use of llama-cpp-python's private names, in one place, each with why there is no public way.

llama-cpp-python offers no public API for these two things we need; an upgrade may move them, and
``tests/integration/machine/test_llama_internals.py`` then fails naming the one that moved:

- ``llama_cpp.llama_cpp._lib``: the ctypes handle of libllama. ggml's backend registry functions are looked up
  through it so that they come from the very libggml libllama uses (opening libggml by path can load a second copy
  whose registry libllama never sees).
- ``Llama._requires_eval``: after we restore a KV-cache snapshot, the logits held by ``Llama`` are not those of
  the restored tokens; setting it makes ``Llama.generate`` evaluate the last prompt token again instead of
  sampling from stale logits.

It sits beside the build probe because both the machine probe and the engine use it (the engine may import the
machine layer, never the other way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cpp import Llama


def libllama() -> Any:
    """The loaded libllama (a ``ctypes.CDLL``)."""
    import llama_cpp.llama_cpp as bindings

    return bindings._lib


def mark_logits_stale(llm: Llama) -> None:
    """Make the next ``generate`` re-evaluate the last prompt token (its logits were not computed here)."""
    if not hasattr(llm, "_requires_eval"):
        raise AttributeError("llama_cpp.Llama has no _requires_eval any more: see machine/llama_internals.py")
    llm._requires_eval = True
