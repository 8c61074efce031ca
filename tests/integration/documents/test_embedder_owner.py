"""The embedding model has one owner thread: passages for the index and queries for a search are its requests, and
a query goes before the passages still waiting, so a search during background indexing is served promptly."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fara_desktop.engine.embedder import Embedder, EmbedderClosedError
from tests.conftest import wait_until
from tests.helpers.gguf_factory import write_bert_embedder

pytestmark = pytest.mark.real_model


@pytest.fixture
def embedder(tmp_path):
    model = write_bert_embedder(tmp_path / "embedder.gguf", n_embd=384, n_layer=6, n_head=12, n_ff=1536)
    loaded = Embedder(model, threads=1)
    yield loaded
    loaded.close()


def test_the_model_is_run_by_one_thread_only(embedder):
    callers: set[int] = set()
    threads = [threading.Thread(target=lambda: embedder.embed(["a passage about pumps"] * 3)) for _ in range(3)]
    for thread in threads:
        thread.start()
    embedder.embed_query("valves")
    for thread in threads:
        thread.join()
    callers.update(embedder.threads_that_ran_the_model())
    assert len(callers) == 1 and threading.get_ident() not in callers


def test_a_query_during_background_indexing_goes_before_the_waiting_passages(embedder):
    passages = [f"Passage {i}: the pump is primed before the valve is opened. " * 12 for i in range(200)]
    indexed: list[np.ndarray] = []
    indexing = threading.Thread(target=lambda: indexed.append(embedder.embed(passages)), daemon=True)
    indexing.start()
    wait_until(lambda: embedder.passages_embedded > 0, 30, "indexing to start")
    query = embedder.embed_query("how is the pump primed?")
    done_when_answered = embedder.passages_embedded
    assert query.shape == (384,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-3
    assert done_when_answered < len(passages) // 2, "the query waited behind the indexing"
    indexing.join(120)
    assert indexed and indexed[0].shape == (200, 384)
    # The same text gives the same vector as a passage and as a query (one model, one context).
    assert np.allclose(embedder.embed([passages[0]])[0], indexed[0][0], atol=1e-4)


def test_a_closed_embedder_refuses_work_and_frees_its_waiters(embedder):
    embedder.close()
    with pytest.raises(EmbedderClosedError):
        embedder.embed_query("anything")
    embedder.close()  # twice is harmless


def test_closing_while_passages_are_embedded_ends_them_with_a_clear_error(embedder):
    passages = [f"Passage {i}: the pump is primed before the valve is opened. " * 12 for i in range(200)]
    outcome: list[BaseException] = []

    def index() -> None:
        try:
            embedder.embed(passages)
        except EmbedderClosedError as exc:
            outcome.append(exc)

    indexing = threading.Thread(target=index)
    indexing.start()
    wait_until(lambda: embedder.passages_embedded > 0, 30, "indexing to start")
    embedder.close()  # the app closes mid-way: the owner thread ends after the text it is on
    indexing.join(30)
    assert len(outcome) == 1 and embedder.passages_embedded < len(passages)


@pytest.mark.parametrize("attempt", range(3))
def test_closing_during_a_requests_last_text_leaves_the_owner_thread_clean(embedder, attempt):
    """``close`` answers a waiting request with an error; the owner thread, finishing that request's last text
    meanwhile, must not answer it twice (an exception in the thread is an error here)."""
    long = "The pump is primed before the valve is opened, and the pressure is then checked. " * 20
    outcome: list[object] = []

    def index() -> None:
        try:
            outcome.append(embedder.embed([long, long]))
        except EmbedderClosedError as exc:
            outcome.append(exc)

    indexing = threading.Thread(target=index)
    indexing.start()
    wait_until(lambda: embedder.passages_embedded >= 1, 30, "the first text")
    embedder.close()  # during the second, last text (or just after it)
    indexing.join(30)
    assert len(outcome) == 1
