"""Every use of llama-cpp-python's private names, in one place, each with why there is no public way.

llama-cpp-python offers no public API for these things we need; an upgrade may move them, and
``tests/integration/machine/test_llama_internals.py`` (a canary for each) then fails naming the one that moved:

- ``llama_cpp.llama_cpp._lib``: the ctypes handle of libllama. ggml's backend registry functions are looked up
  through it so that they come from the very libggml libllama uses (opening libggml by path can load a second copy
  whose registry libllama never sees).
- ``Llama._requires_eval``: after we restore a KV-cache snapshot, the logits held by ``Llama`` are not those of
  the restored tokens; setting it makes ``Llama.generate`` evaluate the last prompt token again instead of
  sampling from stale logits.

- ``llama_cpp.llama_cpp.llama_model_default_params``, swapped while a load runs (``load_progress``): ``Llama``
  does not expose llama.cpp's load-progress callback nor its ``lazy_mode``, and takes its model parameters from
  that function.
- ``llama_cpp.llama_cpp.llama_context_default_params``, swapped likewise (``recurrent_rollback``): ``Llama``
  offers no ``n_rs_seq``, the recurrent states a hybrid keeps to take a rejected proposal back.
- ``Llama.n_tokens`` and ``Llama.input_ids`` written (``hold_tokens``, ``cut_context``): after a state restored
  into the context, or to make the next ``eval`` drop the cells past a position.
- ``Llama.generate``'s prefix matching, mirrored (``reused_prefix``) to know before a reply what it will reuse.
- ``Llama.eval``, wrapped on one instance (``follow_evals``): an MTP head reads the hidden state of every token
  the model reads, by whichever path (a prompt read up to its last token, a read-ahead, ``Llama.generate``).
- llama.cpp's staging functions for the hidden state a multi-token-prediction head reads (``nextn_staging``):
  declared in its ``src/llama-ext.h`` without ``extern "C"``, so libllama exports them under C++ names only, and
  llama-cpp-python binds none; they are looked up by those names (plain C arguments: the same calling convention).

It sits beside the build probe because both the machine probe and the engine use it (the engine may import the
machine layer, never the other way).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)
_patch_lock = threading.Lock()
_context_patch_lock = threading.Lock()


def libllama() -> Any:
    """The loaded libllama (a ``ctypes.CDLL``)."""
    import llama_cpp.llama_cpp as bindings

    return bindings._lib


def mark_logits_stale(llm: Llama) -> None:
    """Make the next ``generate`` re-evaluate the last prompt token (its logits were not computed here)."""
    if not hasattr(llm, "_requires_eval"):
        raise AttributeError("llama_cpp.Llama has no _requires_eval any more: see machine/llama_internals.py")
    llm._requires_eval = True


def compact_json_schema_repetitions() -> None:
    """Make llama-cpp-python's JSON-schema converter write counted repetitions as GBNF's ``item{m,n}``.

    ``llama_cpp.llama_grammar._build_repetition`` spells ``{"maxLength": 4096}`` out as 4,096 nested optional
    groups; llama.cpp's grammar parser refuses more than about 1,000 of them (and overflows its stack on a
    pattern's ``a{0,1000000}``: a SIGSEGV), while it takes ``char{0,4096}`` in its own syntax (above 2,000 it
    leaves the upper bound open, as llama.cpp's own converter does). llama.cpp's newer converter (in its
    examples folder) writes this form; llama-cpp-python's copy of it has not caught up, and offers no way to
    choose, hence the module-level swap.
    Called before every conversion (idempotent)."""
    import llama_cpp.llama_grammar as grammar

    if getattr(grammar._build_repetition, "__name__", "") == _compact_repetition.__name__:
        return
    if not hasattr(grammar, "_build_repetition") or not hasattr(grammar, "SchemaConverter"):
        raise AttributeError("llama_cpp.llama_grammar has no _build_repetition: see machine/llama_internals.py")
    grammar._build_repetition = _compact_repetition


def _compact_repetition(
    item_rule: str,
    min_items: int,
    max_items: int | None,
    separator_rule: str | None = None,
    item_rule_is_literal: bool = False,
) -> str:
    """``item_rule`` between ``min_items`` and ``max_items`` (None: no limit) times, separated by
    ``separator_rule``, in GBNF's counted form (what llama.cpp's own converter writes)."""
    del item_rule_is_literal  # a literal is repeated like any item: "ab"{3}, never spelled out
    if max_items == 0:
        return ""
    if min_items == 0 and max_items == 1:
        return f"{item_rule}?"
    if not separator_rule:
        if min_items == 1 and max_items is None:
            return f"{item_rule}+"
        if min_items == 0 and max_items is None:
            return f"{item_rule}*"
        return f"{item_rule}{{{min_items},{'' if max_items is None else max_items}}}"
    rest = _compact_repetition(
        f"({separator_rule} {item_rule})", max(min_items - 1, 0), None if max_items is None else max_items - 1
    )
    result = f"{item_rule} {rest}".rstrip()
    return f"({result})?" if min_items == 0 else result


# ---------------------------------------------------------------- the load-progress callback


@contextmanager
def load_progress(
    report: Callable[[float], bool] | None, stopped: list[bool], lazy_tables: bool = False, mtp: bool = False
) -> Iterator[None]:
    """While the block runs, ``report(fraction)`` is called as llama.cpp loads on this thread; when it returns
    False the load is aborted and ``stopped`` gets an entry (so the caller can tell a stop from a failure).

    ``Llama.__init__`` takes its model parameters from ``llama_model_default_params()`` and passes them straight to
    ``llama_model_load_from_file``; while a load runs, that function is wrapped so the parameters made *on the
    loading thread* carry a progress callback (another thread loading an embedding model at the same moment gets
    the plain defaults). ``lazy_tables``: the tables the architecture marks for it stay on disk and are read a row
    at a time (``LLAMA_LAZY_MODE_ON``; llama.cpp's default does so only above 4 GiB). Gemma 4 E2B's per-layer
    embeddings (1.8 GiB at real shape): 3.6 → 1.8 GiB resident, generation not slower (16.8 → 18.9 tok/s here).
    ``mtp``: the multi-token-prediction layers a file carries are loaded too (``load_mtp``; skipped by default)."""
    if report is None and not lazy_tables and not mtp:
        yield
        return
    import llama_cpp.llama_cpp as raw

    owner = threading.get_ident()

    def on_progress(fraction: float, _user_data: Any) -> bool:
        try:
            keep_going = report is None or bool(report(float(fraction)))
        except Exception:  # a callback must never raise into C
            log.exception("The load progress callback failed")
            keep_going = True
        if not keep_going:
            stopped.append(True)
        return keep_going

    callback = raw.llama_progress_callback(on_progress) if report is not None else None
    with _patch_lock:
        original = raw.llama_model_default_params

        def with_progress() -> Any:
            params = original()
            if threading.get_ident() == owner:
                if callback is not None:
                    params.progress_callback = callback
                if lazy_tables:
                    params.lazy_mode = raw.LLAMA_LAZY_MODE_ON
                if mtp:
                    params.load_mtp = True
            return params

        raw.llama_model_default_params = with_progress
        try:
            yield
        finally:
            raw.llama_model_default_params = original


@contextmanager
def recurrent_rollback(snapshots: int) -> Iterator[None]:
    """While the block runs, a context made on this thread keeps ``snapshots`` recurrent states a sequence
    (``n_rs_seq``), so a hybrid's last tokens can be taken back (a rejected proposal). ``Llama.__init__`` takes its
    context parameters from ``llama_context_default_params()`` and has no keyword for it; llama.cpp keeps none
    for an architecture that cannot roll back."""
    if snapshots <= 0:
        yield
        return
    import llama_cpp.llama_cpp as raw

    owner = threading.get_ident()
    with _context_patch_lock:
        original = raw.llama_context_default_params

        def with_snapshots() -> Any:
            params = original()
            if threading.get_ident() == owner:
                params.n_rs_seq = snapshots
            return params

        raw.llama_context_default_params = with_snapshots
        try:
            yield
        finally:
            raw.llama_context_default_params = original


# ---------------------------------------------------------------- the hidden state an MTP head reads

_NEXTN_SYMBOLS = (  # Itanium C++ names of src/llama-ext.h's functions (llama-cpp-python 0.3.36's llama.cpp)
    "_Z26llama_set_embeddings_nextnP13llama_contextbb",
    "_Z26llama_get_embeddings_nextnP13llama_context",
    "_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
)


@dataclass(frozen=True)
class NextnStaging:
    """llama.cpp's functions for the hidden state before the LM head (``h_nextn``): ``set(ctx, on, masked)`` makes
    a context keep it at each decode (``masked``: for the tokens with logits only; else for every token),
    ``rows(ctx)`` gives them all from the last decode, ``row(ctx, i)`` the one of batch index ``i``."""

    set: Any
    rows: Any
    row: Any


def nextn_staging() -> NextnStaging | None:
    """The staging functions, or None when this libllama does not export them under the names known here."""
    import ctypes

    import llama_cpp.llama_cpp as raw

    try:
        found = [getattr(raw._lib, name) for name in _NEXTN_SYMBOLS]
    except AttributeError:
        log.info("This llama.cpp build exports no MTP staging functions: MTP heads are not used")
        return None
    setter, rows, row = found
    setter.argtypes, setter.restype = [ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool], None
    rows.argtypes, rows.restype = [ctypes.c_void_p], ctypes.POINTER(ctypes.c_float)
    row.argtypes, row.restype = [ctypes.c_void_p, ctypes.c_int32], ctypes.POINTER(ctypes.c_float)
    return NextnStaging(setter, rows, row)


def follow_evals(llm: Llama, after: Callable[[int, int], None]) -> Callable[[], None]:
    """Make ``llm.eval`` call ``after(start, count)`` after each batch it decodes (``count`` tokens at positions
    from ``start``: their hidden states are readable until the next decode); returns what takes it back.
    ``Llama.generate`` and every reading path call ``self.eval``, which finds the instance's own first."""
    original = llm.eval

    def eval_followed(tokens: Sequence[int]) -> None:
        step = max(1, llm.n_batch)
        for offset in range(0, len(tokens), step):  # one decode a call, as ``eval`` makes one a batch
            start = llm.n_tokens
            original(tokens[offset : offset + step])
            after(start, llm.n_tokens - start)

    llm.eval = eval_followed  # type: ignore[method-assign]

    def undo() -> None:
        if llm.__dict__.get("eval") is eval_followed:
            del llm.eval

    return undo


# ---------------------------------------------------------------- the tokens a context holds


def hold_tokens(llm: Llama, tokens: Sequence[int]) -> None:
    """Say that the context holds exactly ``tokens`` (a state was just restored into it)."""
    llm.input_ids[: len(tokens)] = tokens
    llm.n_tokens = len(tokens)


def hold_tokens_from(llm: Llama, start: int, tokens: Sequence[int]) -> None:
    """Say that the context holds ``tokens`` from ``start`` on and nothing past them (a picture was decoded there
    by mtmd, outside ``Llama.eval``)."""
    llm.input_ids[start : start + len(tokens)] = tokens
    llm.n_tokens = start + len(tokens)


def cut_context(llm: Llama, count: int) -> None:
    """Keep the first ``count`` tokens: the next ``eval`` drops the cells past them."""
    llm.n_tokens = count


def reused_prefix(held: Sequence[int], tokens: Sequence[int]) -> int:
    """The prompt tokens ``Llama.generate`` will take from a context holding ``held``: the common prefix, but always
    one token short of the whole prompt (it evaluates the last one again for its logits)."""
    shared = 0
    for a, b in zip(held, tokens, strict=False):
        if a != b:
            break
        shared += 1
    return min(shared, len(tokens) - 1)
