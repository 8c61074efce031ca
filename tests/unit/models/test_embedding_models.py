"""An embedding GGUF found among the models is known for what it is: never chosen to chat, offered to documents."""

from __future__ import annotations

from pathlib import Path

from fara_desktop.models.discovery import scan_models
from fara_desktop.planning.tuning import choose_model
from tests.helpers.gguf_factory import write_bert_embedder, write_tiny_model


def test_an_embedder_is_marked_and_never_picked_for_chat(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    write_bert_embedder(folder / "bge-small.gguf")
    write_tiny_model(folder / "chat.gguf", "llama")
    result = scan_models(folder, tmp_path / "cache", env={}, home=tmp_path, include_packages=False)
    by_name = {Path(m.path).name: m.metadata for m in result.usable}
    assert by_name["bge-small.gguf"].embedding and not by_name["chat.gguf"].embedding
    best, ranked = choose_model(list(by_name.values()), 8 << 30, 16 << 30, 20e9)
    assert best is not None and best.path.endswith("chat.gguf")
    assert all(not r.path.endswith("bge-small.gguf") for r in ranked)
    only_embedder, _ = choose_model([by_name["bge-small.gguf"]], 8 << 30, 16 << 30, 20e9)
    assert only_embedder is None
