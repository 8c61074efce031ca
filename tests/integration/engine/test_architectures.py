"""Model architectures llama.cpp loads, with tiny real GGUF files of each shape."""

from __future__ import annotations

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.models.discovery import scan_models
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.tuning import estimate_memory, kv_cache_bytes
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_tiny_model

ARCHITECTURES = ["llama", "qwen2", "qwen3", "qwen3moe", "gemma3"]


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    return {
        arch: write_tiny_model(folder / f"tiny-{arch}.gguf", arch, chat_template=CHATML if arch != "gemma3" else None)
        for arch in ARCHITECTURES
    }


def test_discovery_reads_every_family(tiny_models, tmp_path):
    folder = next(iter(tiny_models.values())).parent
    result = scan_models(folder, tmp_path / "cache", env={}, home=tmp_path, include_packages=False)
    found = {m.metadata.architecture: m.metadata for m in result.usable}
    assert set(found) == set(ARCHITECTURES)
    for meta in found.values():
        assert (meta.n_layer, meta.n_head, meta.n_head_kv, meta.head_dim_k, meta.n_vocab) == (2, 4, 2, 16, 271)
        assert meta.quantization == "F32" and meta.context_length == 512
    assert found["gemma3"].sliding_window == 128 and not found["gemma3"].has_chat_template
    assert found["qwen3"].has_chat_template and found["qwen3"].instruct


@pytest.mark.real_model
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_engine_loads_and_generates(arch, tiny_models, tmp_path):
    path = tiny_models[arch]
    meta = scan_models(path.parent, tmp_path / "cache", env={}, home=tmp_path, include_packages=False)
    meta = next(m.metadata for m in meta.usable if m.metadata.architecture == arch)
    estimate = estimate_memory(meta, 256)
    assert estimate.kv_cache == kv_cache_bytes(meta, 256) == 2 * 2 * 2 * 16 * 256 * 2
    assert meta.weights_bytes < estimate.total < meta.weights_bytes + 64 * 1024**2

    backend = LlamaBackend()
    info = backend.load(path, LoadParams(n_ctx=256, prefault=False))
    assert info.architecture == arch
    prompt = backend.prepare(PromptRequest([ChatMessage("user", "hello world")], 16))
    result = backend.reply(
        prompt,
        ReplyRequest(SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True), lambda: False, lambda _t: None),
    )
    assert result.stats.completion_tokens == 6
    backend.unload()
