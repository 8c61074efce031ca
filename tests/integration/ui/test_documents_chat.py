"""A chat that answers from a collection, end to end with the real model: the folder is indexed in the background,
the question's passages go into the prompt llama.cpp reads, and the reply carries citations to the right page."""

from __future__ import annotations

import pytest

from fara_desktop.planning.params import LoadParams
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.documents import write_mixed_folder

pytestmark = pytest.mark.real_model


def test_the_real_model_answers_from_a_collection_with_citations(qtbot, smollm2_path, tmp_path):
    write_mixed_folder(tmp_path / "manuals")
    win = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=48))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=60000):
        win.load_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False))
    with qtbot.waitSignal(win.documents.finished, timeout=60000):
        win.documents.index_paths("manuals", [tmp_path / "manuals"])
    win.documents.use_collection("manuals", True)
    backend = win.bridge.worker._backend.local  # type: ignore[attr-defined]
    rendered: list[str] = []
    original = backend.prepare

    def recording(*args, **kwargs):
        prompt = original(*args, **kwargs)
        rendered.append(prompt.detail.rendered.text)
        return prompt

    backend.prepare = recording
    win.composer.setPlainText("Which valve controls the pressure?")
    with qtbot.waitSignal(win.replyFinished, timeout=120000) as finished:
        win.send_button.click()
    assert finished.args[0].text.strip()
    assert "The aquamarine valve controls the pressure." in rendered[-1]  # what llama.cpp read
    reply = win.chat_view.messages()[-1]
    assert reply.source_buttons[0].text() == "[1] manual.pdf, page 2"
    stored = win.store.messages(win.session.conversation_id)[-1]
    assert stored.sources[0].page == 2 and stored.sources[0].path.endswith("manual.pdf")
    win.close()


def test_an_embedding_model_adds_semantic_vectors_in_the_background(qtbot, tmp_path):
    from fara_desktop.documents.index import DocumentIndex, documents_path
    from tests.helpers.fakes import FakeBackend
    from tests.helpers.gguf_factory import write_bert_embedder

    write_mixed_folder(tmp_path / "manuals")
    win = MainWindow(backend=FakeBackend())
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.modelLoaded, timeout=5000):
        win.load_model("fake.gguf")
    win.core.embedding.use(write_bert_embedder(tmp_path / "bge-tiny.gguf"))
    with qtbot.waitSignal(win.documents.finished, timeout=120000):
        win.documents.index_paths("manuals", [tmp_path / "manuals"])
    assert win.documents_panel.status.text() == "Search: lexical + semantic"
    embedder = win.documents.embedder()
    index = DocumentIndex(documents_path(win.paths.data))
    (summary,) = index.collections()
    assert index.vector_count("manuals", embedder.name) == summary.passages
    index.close()
    win.documents.use_collection("manuals", True)
    win.composer.setPlainText("Which valve controls the pressure?")
    with qtbot.waitSignal(win.replyFinished, timeout=10000):
        win.send_button.click()
    assert any(b.text().startswith("[1]") for b in win.chat_view.messages()[-1].source_buttons)
    win.close()
