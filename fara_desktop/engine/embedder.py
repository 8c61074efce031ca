"""Sentence embeddings for document search, from an embedding GGUF (BERT-family encoders such as bge, e5,
nomic-embed, all-MiniLM) run by llama.cpp in this process.

It is a second, small model on its own llama.cpp context, used by the indexing thread (and for one query at a time
on the GUI thread); the chat model and its inference thread are not involved. Inputs longer than the model's
context are cut to it (a passage is ~200 tokens; the cut only touches pathological ones).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fara_desktop.engine.errors import ModelLoadError
from fara_desktop.errors import NotAGGUFError
from fara_desktop.machine.hardware import usable_cores
from fara_desktop.models.gguf_checks import check_loadable
from fara_desktop.models.gguf_file import read_gguf_header

log = logging.getLogger(__name__)

MAX_TOKENS = 512


class Embedder:
    """Turns texts into unit-length float32 vectors; one call at a time (a lock guards the context)."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        from llama_cpp import Llama

        self.path = path
        try:
            check_loadable(read_gguf_header(path))  # a stranger's embedder must not abort the app either
        except NotAGGUFError as exc:
            raise ModelLoadError(str(exc)) from exc
        try:
            self._llm = Llama(
                model_path=str(path), embedding=True, n_ctx=MAX_TOKENS, n_batch=MAX_TOKENS, n_ubatch=MAX_TOKENS,
                n_threads=threads or max(1, usable_cores() - 1), verbose=False,
            )  # fmt: skip
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"llama.cpp could not load the embedding model {path.name} ({exc}).") from exc
        self.name = str(self._llm.metadata.get("general.name") or path.stem)
        self.dimensions = int(self._llm.n_embd())
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, each of length 1 (cosine similarity is then a dot product)."""
        with self._lock:
            cut = [self._fit(t) for t in texts]
            vectors = np.asarray(self._llm.embed(cut, normalize=True, truncate=True), dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors.reshape(1, -1)
        return vectors

    def _fit(self, text: str) -> str:
        tokens = self._llm.tokenize(text.encode("utf-8", errors="replace"), add_bos=True, special=False)
        if len(tokens) <= MAX_TOKENS - 2:
            return text
        return self._llm.detokenize(tokens[1 : MAX_TOKENS - 2]).decode("utf-8", errors="replace")

    def close(self) -> None:
        with self._lock:
            self._llm.close()
