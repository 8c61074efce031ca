"""The embedder registers llama.cpp's CPU backend before it loads: a portable build (the frozen app's) has none
until one is loaded, and an embedder loaded before any chat model failed there (``docs index``, /v1/embeddings),
found by ``packaging/check_frozen.sh``."""

from __future__ import annotations

import pytest

import fara_desktop.engine.embedder as embedder_module
from fara_desktop.engine.errors import ModelLoadError
from tests.helpers.gguf_factory import write_bert_embedder


def test_the_cpu_backend_is_loaded_before_the_embedder(tmp_path, monkeypatch):
    """(and the kernel path applied: ``prepare_llama_load`` does both)"""
    order: list[str] = []
    monkeypatch.setattr(embedder_module, "prepare_llama_load", lambda *_args: order.append("backend"))

    class Refusing:
        def __init__(self, **_kwargs: object) -> None:
            order.append("load")
            raise ValueError("no backend")

    import llama_cpp

    monkeypatch.setattr(llama_cpp, "Llama", Refusing)
    with pytest.raises(ModelLoadError, match="no backend"):
        embedder_module.Embedder(write_bert_embedder(tmp_path / "bert.gguf"))  # it loads on its own thread
    assert order == ["backend", "load"]
