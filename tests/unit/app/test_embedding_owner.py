"""The embedder has one owner that closes it on every path (issue 50, item 10): closed while a load is under way,
the loaded model is closed as its load ends, never kept after the close, and none is loaded again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import ClassVar

from fara_desktop.app import embedding
from fara_desktop.app.embedding import EmbedderService


class SlowEmbedder:
    """Stands in for ``engine.embedder.Embedder``: its load waits for the test."""

    go = threading.Event()
    loading = threading.Event()
    made: ClassVar[list[SlowEmbedder]] = []

    def __init__(self, _model: Path) -> None:
        SlowEmbedder.loading.set()
        assert SlowEmbedder.go.wait(10)
        self.closed = False
        SlowEmbedder.made.append(self)

    def close(self) -> None:
        self.closed = True


def test_a_close_during_the_load_closes_what_the_load_brings(monkeypatch):
    monkeypatch.setattr(embedding, "Embedder", SlowEmbedder)
    service = EmbedderService(Path("/models/embedder.gguf"))
    got: list[object] = []
    loader = threading.Thread(target=lambda: got.append(service.get()))
    loader.start()
    assert SlowEmbedder.loading.wait(10)
    service.close()  # the app quits while the model loads
    SlowEmbedder.go.set()
    loader.join(10)
    assert got == [None]
    assert [e.closed for e in SlowEmbedder.made] == [True], "the embedder loaded after the close was kept open"
    assert service.get() is None and len(SlowEmbedder.made) == 1  # nothing is loaded after the close
