"""Sentence embeddings for document search, from an embedding GGUF (BERT-family encoders such as bge, e5,
nomic-embed, all-MiniLM) run by llama.cpp in this process.

It is a second, small model on its own llama.cpp context, owned by one thread: the indexing thread's passages,
a search's query and the local API's ``/v1/embeddings`` are requests to that thread, and a query goes before the
passages still waiting (a search during background indexing waits for one passage, ~25 ms, not for the batch).
The chat model and its inference thread are not involved. Inputs longer than the model's context are cut to it
(a passage is ~100 tokens; the cut only touches pathological ones).

Measured with all-MiniLM-L6-v2 on 2 cores (bench ``--section retrieval``): one text per llama.cpp call is faster
than several in one batch (their attention spans the whole batch), and flash attention 1.8× faster than without.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fara_desktop.engine.errors import ModelLoadError
from fara_desktop.machine.hardware import physical_cores, usable_cores
from fara_desktop.machine.kernels import prepare_llama_load
from fara_desktop.machine.priority import lower_this_threads_priority
from fara_desktop.models.gguf_checks import check_loadable
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.planning.tuning import default_threads
from fara_desktop.vocabulary.errors import FaraError, NotAGGUFError

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

MAX_TOKENS = 512


class EmbedderClosedError(FaraError):
    """The embedding model was closed (the app is closing, or another model replaced it)."""


class EmbeddingCancelledError(FaraError):
    """The one who asked stopped waiting (a local API client left, or the server is stopping)."""


def embedder_threads() -> int:
    """Like the chat model's: the physical cores this process may use (an encoder is compute-bound; SMT siblings
    only contend). Measured on 2 cores: 1 thread 24, 2 threads 42 passages/s."""
    return default_threads(physical_cores(), usable_cores())


@dataclass
class _Request:
    texts: Sequence[str]
    is_query: bool
    cancel: threading.Event | None = None
    result: Future[np.ndarray] = field(default_factory=Future)
    rows: list[np.ndarray] = field(default_factory=list)


class Embedder:
    """Turns texts into unit-length float32 vectors on the model's own thread; any thread may ask."""

    def __init__(self, path: Path, threads: int | None = None, flash_attention: bool = True) -> None:
        self.path = path
        try:
            check_loadable(read_gguf_header(path))  # a stranger's embedder must not abort the app either
        except NotAGGUFError as exc:
            raise ModelLoadError(str(exc)) from exc
        self._threads = threads or embedder_threads()
        self._flash_attention = flash_attention
        self._wake = threading.Condition()
        self._queries: deque[_Request] = deque()
        self._passages: deque[_Request] = deque()
        self._closed = False
        self._runners: set[int] = set()
        self.passages_embedded = 0  # texts embedded for ``embed`` since the start (progress, tests)
        loaded: Future[Llama] = Future()
        self._thread = threading.Thread(target=self._own, args=(loaded,), name="fara-embedder", daemon=True)
        self._thread.start()
        self._llm = loaded.result()  # the load's error, if any, is raised here (the thread has ended then)
        self.name = str(self._llm.metadata.get("general.name") or path.stem)
        self.dimensions = int(self._llm.n_embd())

    # ------------------------------------------------------------------ callers' side

    def embed(self, texts: Sequence[str], cancel: threading.Event | None = None) -> np.ndarray:
        """One row per text, each of length 1 (cosine similarity is then a dot product). Passages: queries asked
        for meanwhile are served first. ``cancel``: once set, the request ends before its next text with
        ``EmbeddingCancelledError`` (a text takes at most ~1 s, at 512 tokens)."""
        return self._ask(texts, is_query=False, cancel=cancel)

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one search query, before any passage still waiting."""
        vector: np.ndarray = self._ask([text], is_query=True)[0]
        return vector

    def threads_that_ran_the_model(self) -> frozenset[int]:
        return frozenset(self._runners)

    def close(self) -> None:
        """Ends the owner thread once the text in progress is done; requests still waiting get EmbedderClosedError."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            waiting = [*self._queries, *self._passages]
            self._queries.clear()
            self._passages.clear()
            self._wake.notify_all()
        for request in waiting:
            request.result.set_exception(EmbedderClosedError("The embedding model was closed."))
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _ask(self, texts: Sequence[str], is_query: bool, cancel: threading.Event | None = None) -> np.ndarray:
        request = _Request(list(texts), is_query, cancel)
        if not request.texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._wake:
            if self._closed:
                raise EmbedderClosedError("The embedding model was closed.")
            (self._queries if is_query else self._passages).append(request)
            self._wake.notify()
        return request.result.result()

    # ------------------------------------------------------------------ the owner thread

    def _own(self, loaded: Future[Llama]) -> None:
        lower_this_threads_priority()  # like indexing: the window and the chat model come first
        try:
            llm = self._load()
        except BaseException as exc:
            loaded.set_exception(exc)
            return
        loaded.set_result(llm)
        self._runners.add(threading.get_ident())
        try:
            while (request := self._next()) is not None:
                if request.cancel is not None and request.cancel.is_set():
                    if self._drop(request):
                        request.result.set_exception(EmbeddingCancelledError("The embedding request was stopped."))
                    continue
                try:
                    text = request.texts[len(request.rows)]
                    request.rows.append(self._vector(llm, text))
                except Exception as exc:
                    if self._drop(request):
                        request.result.set_exception(exc)
                    continue
                if not request.is_query:
                    self.passages_embedded += 1
                if len(request.rows) == len(request.texts) and self._drop(request):
                    request.result.set_result(np.vstack(request.rows).astype(np.float32, copy=False))
        finally:
            llm.close()

    def _next(self) -> _Request | None:
        """The request to take one text from: a query first, else the oldest passages; None once closed."""
        with self._wake:
            while not self._closed and not self._queries and not self._passages:
                self._wake.wait()
            if self._closed:
                return None
            return self._queries[0] if self._queries else self._passages[0]

    def _drop(self, request: _Request) -> bool:
        """Takes a finished request out of its queue; False when ``close`` took it first (and answered it)."""
        with self._wake:
            queue = self._queries if request.is_query else self._passages
            if request not in queue:
                return False
            queue.remove(request)
            return True

    def _load(self) -> Llama:
        from llama_cpp import Llama

        # A portable build (the frozen app's) has no CPU backend until one is loaded: without this, an embedder
        # loaded before any chat model (``docs index``, the API's /v1/embeddings) failed in the frozen app only.
        prepare_llama_load(None, self._threads)
        try:
            return Llama(
                model_path=str(self.path),
                embedding=True,
                n_ctx=MAX_TOKENS,
                n_batch=MAX_TOKENS,
                n_ubatch=MAX_TOKENS,
                n_threads=self._threads,
                n_threads_batch=self._threads,
                flash_attn=self._flash_attention,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"llama.cpp could not load the embedding model {self.path.name} ({exc}).") from exc

    @staticmethod
    def _vector(llm: Llama, text: str) -> np.ndarray:
        tokens = llm.tokenize(text.encode("utf-8", errors="replace"), add_bos=True, special=False)
        if len(tokens) > MAX_TOKENS - 2:
            text = llm.detokenize(tokens[1 : MAX_TOKENS - 2]).decode("utf-8", errors="replace")
        vector = np.asarray(llm.embed([text], normalize=True, truncate=True), dtype=np.float32)
        return vector.reshape(-1)
