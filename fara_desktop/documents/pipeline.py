"""Bringing a collection up to date: the text index first (searchable by words at once), then vectors for the
passages that have none from the embedding model. One flow for the window's Documents panel and
``fara-desktop docs index``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fara_desktop.documents.index import DocumentIndex
from fara_desktop.documents.indexer import IndexProgress, IndexReport, index_collection
from fara_desktop.documents.semantic import EmbeddingProgress, TextEmbedder, embed_collection


@dataclass(frozen=True)
class CollectionUpdate:
    """What indexing read, and what embedding added (None: no embedding model)."""

    report: IndexReport
    embedded: EmbeddingProgress | None


def update_collection(
    index: DocumentIndex,
    collection: str,
    roots: Sequence[Path],
    embedder: Callable[[], TextEmbedder | None],
    on_index: Callable[[IndexProgress], None] | None = None,
    on_embed: Callable[[EmbeddingProgress], None] | None = None,
    pause: threading.Event | None = None,
    yield_to: Callable[[], bool] | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_indexed: Callable[[IndexReport], None] | None = None,
) -> CollectionUpdate:
    """``embedder`` is asked for only once the text index is done (loading it takes seconds the words need not
    wait for); ``on_indexed`` hears then that the collection is searchable by words. ``pause``, ``yield_to`` (a
    reply is being written) and ``should_stop`` reach both steps."""
    report = index_collection(
        index, collection, list(roots), on_progress=on_index, pause=pause, yield_to=yield_to, should_stop=should_stop
    )
    if on_indexed is not None:
        on_indexed(report)
    model = embedder()
    if model is None:
        return CollectionUpdate(report, None)
    embedded = embed_collection(
        index, collection, model, on_progress=on_embed, pause=pause, yield_to=yield_to, should_stop=should_stop
    )
    return CollectionUpdate(report, embedded)
