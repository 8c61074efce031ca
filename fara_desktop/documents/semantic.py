"""Semantic retrieval beside the lexical one: passage vectors computed in the background once the text index is
ready, and the two rankings merged by reciprocal rank fusion (no score calibration needed between BM25 and
cosine similarity)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fara_desktop.documents.index import DocumentIndex, Hit

BATCH = 16
# Fusion: lexical hits weigh 1, semantic ones SEMANTIC_WEIGHT, each 1 / (RRF_K + rank); each list is searched
# CANDIDATES_PER_RESULT times deeper than the results asked for (bench --section retrieval: the grid).
RRF_K = 60  # the constant of Cormack et al.; ranks deep in either list still count a little
SEMANTIC_WEIGHT = 1.0
CANDIDATES_PER_RESULT = 4


class TextEmbedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass
class EmbeddingProgress:
    """This run's vectors: ``done`` of ``total``; ``already``: the collection's passages that had vectors when it
    started (a run stopped by closing the app resumes where it was: the queue is the passages without one)."""

    done: int = 0
    total: int = 0
    started: float = 0.0
    already: int = 0

    @property
    def per_second(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0


def embed_collection(
    index: DocumentIndex,
    collection: str,
    embedder: TextEmbedder,
    on_progress: Callable[[EmbeddingProgress], None] | None = None,
    pause: threading.Event | None = None,
    yield_to: Callable[[], bool] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> EmbeddingProgress:
    """Vectors for every passage of ``collection`` that has none from this model yet."""
    total = len(index.passages_without_vectors(collection, embedder.name, 10_000_000))
    already = index.vector_count(collection, embedder.name)
    progress = EmbeddingProgress(0, total, time.perf_counter(), already)
    if on_progress is not None and total:
        on_progress(progress)  # a resumed run shows where it stands at once
    while True:
        while (pause is not None and pause.is_set()) or (yield_to is not None and yield_to()):
            if should_stop is not None and should_stop():
                return progress
            time.sleep(0.05)  # paused, or a reply is being generated: the pause itself, not synchronisation
        if should_stop is not None and should_stop():
            return progress
        batch = index.passages_without_vectors(collection, embedder.name, BATCH)
        if not batch:
            return progress
        vectors = embedder.embed([text for _, text in batch])
        index.store_vectors(embedder.name, [pid for pid, _ in batch], vectors)
        progress.done += len(batch)
        if on_progress is not None:
            on_progress(progress)


def fuse(
    rankings: Sequence[Sequence[Hit]], top: int, weights: Sequence[float] | None = None, k: float = RRF_K
) -> list[Hit]:
    """Reciprocal rank fusion: each list gives weight / (k + rank) to its passages; the sums rank the union."""
    scores: dict[int, float] = {}
    first: dict[int, Hit] = {}
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings), strict=True):
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.passage_id] = scores.get(hit.passage_id, 0.0) + weight / (k + rank)
            first.setdefault(hit.passage_id, hit)
    best = sorted(scores, key=lambda pid: -scores[pid])[:top]
    return [
        Hit(
            first[p].passage_id,
            first[p].path,
            first[p].text,
            first[p].page,
            first[p].line_start,
            first[p].line_end,
            scores[p],
        )
        for p in best
    ]


def hybrid_search(
    index: DocumentIndex, collections: Sequence[str], query: str, embedder: TextEmbedder | None, top: int = 5
) -> list[Hit]:
    """Lexical results, fused with semantic ones when an embedder is there and the collections have its vectors."""
    lexical = index.search(collections, query, top * CANDIDATES_PER_RESULT)
    if embedder is None or not query.strip():
        return lexical[:top]
    semantic = index.semantic_search(
        collections, embedder.embed_query(query), embedder.name, top * CANDIDATES_PER_RESULT
    )
    if not semantic:
        return lexical[:top]
    return fuse([lexical, semantic], top, (1.0, SEMANTIC_WEIGHT))
