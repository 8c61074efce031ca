"""The fast GGUF header reader on the real models and on damaged files we write ourselves."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from fara_desktop.errors import NotAGGUFError
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


def _gguf_prefix(kv_count: int, tensor_count: int = 0, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensor_count, kv_count)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty"),
        (b"PK\x03\x04 zip file", "not a GGUF"),
        (b"GGUF" + struct.pack("<I", 99) + b"\0" * 16, "version 99"),
        (_gguf_prefix(3) + _string("general.architecture"), "truncated"),
        (_gguf_prefix(1) + struct.pack("<Q", 1 << 40), "claims"),
        (_gguf_prefix(1) + _string("a") + struct.pack("<IIQ", 9, 4, 1 << 40), "claims"),
        (_gguf_prefix(1 << 40), "claims"),
    ],
)
def test_damaged_files_fail_with_a_reason(tmp_path: Path, content: bytes, reason: str):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(NotAGGUFError, match=reason):
        read_gguf_header(path)
