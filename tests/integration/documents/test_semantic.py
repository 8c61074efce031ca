"""Semantic retrieval with an embedding GGUF run by llama.cpp: vectors for every passage after the text index,
kept in the database and dropped with their passages, fused with the lexical ranking; and the embedding speed of a
bge-small-shaped model (random weights: speed and memory depend on shape, not on the values)."""

from __future__ import annotations

import time

import pytest

from fara_desktop.documents.index import DocumentIndex, Hit
from fara_desktop.documents.indexer import index_collection
from fara_desktop.documents.semantic import embed_collection, fuse, hybrid_search
from fara_desktop.engine.embedder import Embedder
from fara_desktop.models.metadata import is_embedding_architecture
from tests.helpers.documents import write_mixed_folder
from tests.helpers.gguf_factory import write_bert_embedder

pytestmark = pytest.mark.real_model


def hit(pid: int) -> Hit:
    return Hit(pid, f"/f{pid}.txt", f"passage {pid}", None, 1, 1, 0.0)


def test_reciprocal_rank_fusion_rewards_agreement():
    lexical = [hit(1), hit(2), hit(3)]
    semantic = [hit(3), hit(4), hit(1)]
    fused = fuse([lexical, semantic], top=4)
    assert [h.passage_id for h in fused][:2] == [1, 3]  # in both lists
    assert {h.passage_id for h in fused} == {1, 2, 3, 4}


def test_vectors_are_computed_after_the_text_index_and_fused_with_it(tmp_path):
    model = write_bert_embedder(tmp_path / "embedder.gguf")
    embedder = Embedder(model)
    assert embedder.dimensions == 64 and is_embedding_architecture("bert")
    assert is_embedding_architecture("qwen3", 1) and not is_embedding_architecture("qwen3")
    write_mixed_folder(tmp_path / "docs")
    index = DocumentIndex(tmp_path / "documents.sqlite3")
    report = index_collection(index, "mixed", [tmp_path / "docs"])
    progress = embed_collection(index, "mixed", embedder)
    assert progress.done == progress.total == report.passages == index.vector_count("mixed", embedder.name)
    assert embed_collection(index, "mixed", embedder).total == 0  # nothing left to do
    semantic = index.semantic_search(["mixed"], embedder.embed(["pump valve pressure"])[0], embedder.name, 3)
    assert len(semantic) == 3 and all(-1.0 <= h.score <= 1.0001 for h in semantic)
    fused = hybrid_search(index, ["mixed"], "aquamarine valve", embedder, top=3)
    assert fused and any("aquamarine" in h.text for h in fused)
    (tmp_path / "docs" / "notes.md").unlink()
    index_collection(index, "mixed", [])
    assert index.vector_count("mixed", embedder.name) == report.passages - 1  # its vector went with it
    embedder.close()
    index.close()


def test_embedding_speed_of_a_bge_small_shaped_model(tmp_path):
    model = write_bert_embedder(tmp_path / "bge-small-shape.gguf", n_embd=384, n_layer=12, n_head=12, n_ff=1536,
                                n_vocab=30522)  # fmt: skip
    embedder = Embedder(model)
    passage = ("The pump must be primed before use, and the valve controls the pressure of the water. " * 9)[:800]
    embedder.embed([passage])  # warm up
    started = time.perf_counter()
    count = 0
    for _ in range(4):
        count += len(embedder.embed([passage] * 16))
    seconds = time.perf_counter() - started
    tokens = len(embedder._llm.tokenize(passage.encode(), add_bos=True, special=False))  # type: ignore[attr-defined]
    print(f"\nbge-small shape (33M parameters, F32): {count / seconds:.1f} passages/s of {min(tokens, 512)} tokens, "
          f"{count * min(tokens, 512) / seconds:,.0f} tokens/s")  # fmt: skip
    assert count == 64
    embedder.close()
