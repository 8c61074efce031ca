"""Gemma 4's E-models judged by what a token touches (issue 54, item 3): most of the file is a table of per-layer
embeddings a token reads one row of, kept on disk by llama.cpp at this app's request; the last layers reuse
earlier layers' KV; global layers have heads twice as wide as the windowed ones. A tiny model of the real layout
(``tests/helpers/real_shapes.py``), loaded by the real llama.cpp."""

from __future__ import annotations

import logging
import math

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import metadata_from_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import architecture_reasons, estimate_memory, kv_cache_bytes
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.real_shapes import Shape, write_shape_q8

TINY = Shape("Tiny Gemma 4", "gemma4", 128, 10, 2, 1, 256, 4096, 1000000.0, True, 64, 32, per_layer=32,
             shared_kv=5, global_every=5, global_head_dim=128, double_wide=True)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_gemma4(tmp_path_factory, smollm2_path):
    return write_shape_q8(TINY, smollm2_path, tmp_path_factory.mktemp("gemma4") / "tiny-gemma4.gguf")


def test_what_a_token_touches_and_what_the_cache_keeps(tiny_gemma4):
    header = read_gguf_header(tiny_gemma4)
    meta = metadata_from_header(header)
    table = next(t for t in header.tensors if t.name == "per_layer_token_embd.weight")
    table_bytes = math.prod(table.shape) // 32 * 34
    assert meta.lazy_weights_bytes == table_bytes > meta.weights_bytes / 3
    assert meta.active_weights_bytes == pytest.approx(meta.weights_bytes - table_bytes, abs=1)
    embeddings = next(t for t in header.tensors if t.name == "token_embd.weight")  # tied: loaded twice (gemma4.cpp)
    assert meta.duplicated_weights_bytes == math.prod(embeddings.shape) // 32 * 34
    assert meta.resident_weights_bytes == meta.weights_bytes - table_bytes + meta.duplicated_weights_bytes
    # 5 of 10 layers keep KV (the last 5 reuse that of layers 3 and 4, as llama.cpp pairs them); of those, layer
    # 4 is global (heads 128 wide), 0-3 windowed (64); without flash attention every V is padded to 128
    assert (meta.kv_layers, meta.recurrent_layers, meta.rewindable) == (5, 0, True)
    assert (meta.kv_values_full, meta.kv_values_swa) == (1 * (128 + 128), 4 * 1 * (64 + 128))
    assert meta.kv_values_swa == 768
    assert kv_cache_bytes(meta, 1000) == 2 * (256 + 768) * 1000
    assert kv_cache_bytes(meta, 1000, swa_full=False, n_ubatch=16) == 2 * (256 * 1000 + 768 * (32 + 16))
    assert estimate_memory(meta, 1000).weights == meta.resident_weights_bytes
    (reason,) = architecture_reasons(meta)
    assert "stay on disk, a row read for each word" in reason


def test_the_real_llama_cpp_loads_the_layout_and_the_model_answers(tiny_gemma4, caplog):
    backend = LlamaBackend()
    with caplog.at_level(logging.WARNING):
        info = backend.load(tiny_gemma4, LoadParams(n_ctx=512, prefault=False))
    try:
        assert info.architecture == "gemma4"
        assert "padding V cache to 128" in caplog.text  # as counted above
        prompt = backend.prepare(PromptRequest([ChatMessage("user", "Hello there")], 16))
        result = backend.reply(
            prompt,
            ReplyRequest(
                SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True), lambda: False, lambda _t: None
            ),
        )
        assert result.stats.completion_tokens == 6
    finally:
        backend.close()


def test_every_path_that_keeps_a_prefix_continues_as_a_fresh_read_of_the_same_tokens(tmp_path, smollm2_path,
                                                                                       monkeypatch):
    """A new architecture's kept contexts (Regenerate, Edit, Branch, a chat in RAM, the read-ahead, the local API,
    a restart) continue exactly as a fresh read: Gemma 4's layers that reuse earlier layers' KV and its windowed
    cache included. The prompts are compared token for token, so the model's own spelling of earlier replies
    (``own_tokens``, which a fresh read of the stored text would tokenize otherwise) is left out here."""
    from dataclasses import replace

    from fara_desktop.bench.prefix_paths import prefix_paths

    monkeypatch.setattr("fara_desktop.engine.llama_backend.longest_respelled_as_read", lambda *_args: None)
    model = write_shape_q8(replace(TINY, sliding_window=128), smollm2_path, tmp_path / "gemma4-window-128.gguf")
    figures = prefix_paths(model, LoadParams(n_ctx=2048, n_threads=2, prefault=False))
    assert figures["prefix_paths_batch_split_stable"], "the control: this model's continuation depends on batches"
    assert figures["prefix_paths_same_tokens"], figures["prefix_paths"]
    assert figures["prefix_paths_figures_true"]
