"""Semantic search is on by default: with all-MiniLM-L6-v2's package installed, the first collection makes the app
convert it (once, off the window's thread) and compute vectors after the text index; vectors stopped by closing the
app resume where they were at the next start (the queue is the passages without a vector, in the database)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fara_desktop.documents.index import DocumentIndex, documents_path
from tests.helpers.documents import write_mixed_folder
from tests.helpers.fakes import FakeBackend
from tests.helpers.gguf_factory import write_bert_embedder

pytestmark = pytest.mark.real_model

NO_MODELS = SimpleNamespace(scan=SimpleNamespace(usable=[]))


def plan_with(embedder: Path) -> SimpleNamespace:
    found = SimpleNamespace(path=str(embedder), metadata=SimpleNamespace(embedding=True))
    return SimpleNamespace(scan=SimpleNamespace(usable=[found]))


def counts(data: Path, collection: str, model: str) -> tuple[int, int]:
    """(passages with a vector from ``model``, passages) of the collection, read from the database."""
    index = DocumentIndex(documents_path(data))
    try:
        summary = next(c for c in index.collections() if c.name == collection)
        return index.vector_count(collection, model), summary.passages
    finally:
        index.close()


def scans_done(documents) -> bool:
    return (documents._scan is None or not documents._scan.is_alive()) and not documents._queue


def test_the_first_collection_turns_semantic_search_on_with_the_installed_embedder(window, qtbot, tmp_path):
    pytest.importorskip("all_minilm_l6_v2")
    win = window(FakeBackend())
    documents = win.documents
    documents.use_plan(NO_MODELS)  # a first start: no embedding GGUF yet, no collection: nothing is converted
    converted = win.paths.models / "all-minilm-l6-v2.f16.gguf"
    assert documents.embedding_model is None and not converted.exists()
    write_mixed_folder(tmp_path / "docs")
    documents.index_paths("docs", [tmp_path / "docs"])
    qtbot.waitUntil(lambda: documents.embedding_model == converted, timeout=120_000)
    embedder = documents.embedder()
    assert embedder is not None
    qtbot.waitUntil(lambda: scans_done(documents), timeout=120_000)
    done, passages = counts(win.paths.data, "docs", embedder.name)
    assert passages > 0 and done == passages
    assert not win.documents_panel.semantic_button.isVisibleTo(win)
    assert "semantic (all-minilm-l6-v2.f16.gguf)" in documents.retrieval_note()


def test_a_start_with_collections_and_no_embedder_converts_it(window, qtbot, tmp_path):
    pytest.importorskip("all_minilm_l6_v2")
    win = window(FakeBackend())
    write_mixed_folder(tmp_path / "docs")
    win.documents.index_paths("docs", [tmp_path / "docs"])  # a collection from an earlier session: words only
    qtbot.waitUntil(lambda: scans_done(win.documents), timeout=60_000)
    win.documents.use_plan(NO_MODELS)
    converted = win.paths.models / "all-minilm-l6-v2.f16.gguf"
    qtbot.waitUntil(lambda: win.documents.embedding_model == converted, timeout=120_000)


def test_vectors_stopped_by_closing_the_app_resume_where_they_were(window, qtbot, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    for number in range(20):  # 20 files of 10 passages
        paragraphs = [f"Note {number}.{part}: the pump on line {part} is primed before the valve opens. " * 10
                      for part in range(10)]  # fmt: skip
        (folder / f"note-{number:02}.txt").write_text("\n".join(paragraphs), encoding="utf-8")
    win = window(FakeBackend())
    model = write_bert_embedder(tmp_path / "embedder.gguf", n_embd=384, n_layer=3, n_head=12, n_ff=1536)
    win.documents.use_plan(plan_with(model))
    progress: list[tuple[int, int]] = []
    win.documents.embedding.connect(lambda _name, done, total, _speed: progress.append((done, total)))
    win.documents.index_paths("notes", [folder])
    qtbot.waitUntil(lambda: bool(progress) and progress[-1][0] >= 32, timeout=120_000)
    win.documents_panel.pause_button.click()  # the next batch waits; then the app is closed
    name = win.documents.embedder().name  # type: ignore[union-attr]
    win.close()
    stopped_at, passages = counts(win.paths.data, "notes", name)
    assert 32 <= stopped_at < passages == progress[-1][1]

    again = window(FakeBackend())  # the next start, on the same data
    resumed: list[tuple[int, int]] = []
    again.documents.embedding.connect(lambda _name, done, total, _speed: resumed.append((done, total)))
    again.documents.use_plan(plan_with(model))
    qtbot.waitUntil(lambda: bool(resumed) and resumed[-1][0] == passages, timeout=180_000)
    assert counts(again.paths.data, "notes", name) == (passages, passages)
    assert resumed[0] == (stopped_at, passages)  # the panel shows where it stands at once
    assert again.documents.embedder().passages_embedded == passages - stopped_at  # type: ignore[union-attr]


def test_the_vectors_progress_is_not_cut_off_at_1024_by_600(window, qtbot):
    """Semantic search on by default means this status shows for minutes: at 1024×600, with a long collection name
    and the panel's button too, every wrapped line of it is on screen (it was cut after two)."""
    win = window(FakeBackend())
    win.resize(1024, 600)
    panel = win.documents_panel
    panel.semantic_button.show()
    panel.show_embedding("stdlib — a collection with a long name for the check", 12_345, 76_756, 55.0)
    qtbot.waitUntil(lambda: win.height() == 600 and panel.status.width() > 0, timeout=5_000)
    status = panel.status

    def status_fits() -> bool:  # after the splitter has answered the panel's new minimum (a layout pass)
        bottom = status.mapTo(win.left_column, status.rect().bottomLeft()).y()
        return status.height() >= status.heightForWidth(status.width()) and bottom <= win.left_column.height()

    qtbot.waitUntil(status_fits, timeout=5_000)
    assert status.heightForWidth(status.width()) > 3 * status.fontMetrics().height()  # it does wrap: 4+ lines
