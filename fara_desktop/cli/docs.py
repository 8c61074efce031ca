"""`fara-desktop docs index|search`: document collections from a terminal (scripts and checks rely on these)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fara_desktop.documents.index import DocumentIndex, DocumentIndexError, documents_path
from fara_desktop.documents.indexer import IndexProgress
from fara_desktop.documents.pipeline import update_collection
from fara_desktop.documents.semantic import hybrid_search
from fara_desktop.engine.embedder import Embedder
from fara_desktop.files.paths import AppPaths
from fara_desktop.models.embedder_convert import import_embedder
from fara_desktop.text.format import format_count, format_size
from fara_desktop.text.untrusted import one_line, printable
from fara_desktop.vocabulary.errors import FaraError


def _embedder(path: Path | None, command: str) -> Embedder | None:
    if path is None:
        return None
    try:
        return Embedder(path)
    except FaraError as exc:
        print(printable(f"fara-desktop docs {command}: {exc}"), file=sys.stderr)
        raise SystemExit(1) from exc


def run_docs_index(
    paths: AppPaths, roots: list[Path], collection: str, as_json: bool, embedding_model: Path | None = None
) -> int:
    missing = [str(r) for r in roots if not r.exists()]
    if missing:
        print(printable(f"fara-desktop docs index: not found: {', '.join(missing)}"), file=sys.stderr)
        return 1
    try:
        index = DocumentIndex(documents_path(paths.data))
    except DocumentIndexError as exc:
        print(printable(f"fara-desktop docs index: {exc}"), file=sys.stderr)
        return 1
    last = [0.0]

    def progress(state: IndexProgress) -> None:
        if not as_json and state.files_done - last[0] >= max(1, state.files_total // 20):
            last[0] = state.files_done
            files, found = format_count(state.files_total, "file"), format_count(state.passages, "passage")
            print(f"  {state.files_done:,}/{files} · {found}", file=sys.stderr)

    embedder = _embedder(embedding_model, "index")
    vectors = 0
    embed_seconds = 0.0
    try:
        update = update_collection(index, collection, roots, lambda: embedder, on_index=progress)
        report = update.report
        if update.embedded is not None:
            vectors, embed_seconds = update.embedded.done, time.perf_counter() - update.embedded.started
        summary = next(c for c in index.collections() if c.name == collection)
    finally:
        index.close()
        if embedder is not None:
            embedder.close()
    mb = report.bytes_read / 1e6
    data = {
        "collection": collection,
        "files": report.files,
        "indexed": report.indexed,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "passages": summary.passages,
        "passages_added": report.passages,
        "bytes_read": report.bytes_read,
        "seconds": round(report.seconds, 3),
        "mb_per_s": round(mb / report.seconds, 2) if report.seconds else None,
        "passages_per_s": round(report.passages / report.seconds, 1) if report.seconds else None,
        "unreadable": [{"path": p, "reason": r} for p, r in report.unreadable],
        "vectors_added": vectors,
        "embedding_seconds": round(embed_seconds, 3),
    }
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        print(
            printable(
                f"{collection}: {format_count(report.files, 'file')}, {format_count(summary.passages, 'passage')} "
                f"({report.indexed:,} read, "
                f"{report.unchanged:,} unchanged, {report.removed:,} removed) in {report.seconds:.1f} s — "
                f"{format_size(report.bytes_read)} read"
            )
        )
        for path, reason in report.unreadable:
            print(printable(f"  unreadable: {one_line(path, 500)}: {reason}"))
    usable = summary.passages > 0
    if not usable:
        print("fara-desktop docs index: nothing in the collection could be read", file=sys.stderr)
    return 0 if usable else 1


def run_docs_search(
    paths: AppPaths, collection: str, query: str, top: int, as_json: bool, embedding_model: Path | None = None
) -> int:
    try:
        index = DocumentIndex(documents_path(paths.data))
    except DocumentIndexError as exc:
        print(printable(f"fara-desktop docs search: {exc}"), file=sys.stderr)
        return 1
    try:
        if index.collection_id(collection) is None:
            print(printable(f"fara-desktop docs search: there is no collection {collection!r}"), file=sys.stderr)
            return 1
        embedder = _embedder(embedding_model, "search")
        hits = hybrid_search(index, [collection], query, embedder, top)
        if embedder is not None:
            embedder.close()
    finally:
        index.close()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "rank": n,
                        "path": h.path,
                        "page": h.page,
                        "line_start": h.line_start,
                        "line_end": h.line_end,
                        "score": round(h.score, 4),
                        "text": h.text,
                    }
                    for n, h in enumerate(hits, start=1)
                ],
                ensure_ascii=False,
            )
        )
        return 0
    for number, hit in enumerate(hits, start=1):
        excerpt = " ".join(hit.text.split())[:200]
        print(f"[{number}] {one_line(hit.path, 500)} ({hit.where.split(', ', 1)[-1]}) score {hit.score:.2f}")
        print(printable(f"    {excerpt}"))
    if not hits:
        print("no passage matches", file=sys.stderr)
    return 0


def run_import_embedder(paths: AppPaths, source: str, file_type: str) -> int:
    """Convert a sentence-transformers embedder into the app's models folder, where the Documents panel finds it."""
    try:
        target = import_embedder(source, paths.models, file_type)
    except FaraError as exc:
        print(printable(f"fara-desktop docs import-embedder: {exc}"), file=sys.stderr)
        return 1
    print(target)
    return 0
