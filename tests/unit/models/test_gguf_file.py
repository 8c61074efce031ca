"""The GGUF header reader: damaged files fail with a reason; hostile headers are refused item by item."""

from __future__ import annotations

import json
import os
import struct
import tracemalloc
from pathlib import Path

import pytest

from fara_desktop.models.discovery import scan_models
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import metadata_from_header
from fara_desktop.vocabulary.errors import NotAGGUFError
from tests.helpers.fifo_watch import watched_fifo
from tests.helpers.gguf_factory import (
    GGUF_ARRAY,
    kv,
    kv_f32,
    kv_str,
    kv_u32,
    nested_arrays,
    write_raw_gguf,
    write_tiny_model,
)


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


HOSTILE = {
    "alignment-string.gguf": [kv_str("general.alignment", "thirty-two")],
    "alignment-not-power-of-two.gguf": [kv_u32("general.alignment", 24)],
    "file-type-string.gguf": [kv_str("general.file_type", "Q4_K_M")],
    "nan-context.gguf": [kv_f32("llama.context_length", float("nan"))],
    "inf-heads.gguf": [kv_f32("llama.attention.head_count", float("inf"))],
    "name-is-a-list.gguf": [kv("general.name", GGUF_ARRAY, nested_arrays(1, 3))],
    "deep-arrays.gguf": [kv("tokenizer.x", GGUF_ARRAY, nested_arrays(5000))],
}


def scan(folder: Path, tmp_path: Path):
    return scan_models(folder, tmp_path / "cache", env={}, home=tmp_path / "home", include_packages=False)


def test_each_odd_file_is_marked_unusable_and_the_good_model_is_still_found(tmp_path: Path):
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "good.gguf")
    for name, pairs in HOSTILE.items():
        write_raw_gguf(folder / name, *pairs)
    result = scan(folder, tmp_path)
    by_name = {Path(m.path).name: m for m in result.models}
    assert by_name["good.gguf"].usable
    for name in ("alignment-string.gguf", "alignment-not-power-of-two.gguf", "deep-arrays.gguf"):
        assert not by_name[name].usable and by_name[name].problem, name
    assert "array of arrays" in (by_name["deep-arrays.gguf"].problem or "")
    # A header with no weights was listed as usable (a NaN context, a string file type…): llama.cpp cannot load it.
    for name in ("file-type-string.gguf", "nan-context.gguf", "inf-heads.gguf", "name-is-a-list.gguf"):
        assert not by_name[name].usable and "holds no tensors" in (by_name[name].problem or ""), name
    assert [m.path for m in result.usable] == [str(folder / "good.gguf")]


def test_wrong_types_in_values_only_displayed_count_as_missing(tmp_path: Path):
    for name in ("file-type-string.gguf", "nan-context.gguf", "inf-heads.gguf", "name-is-a-list.gguf"):
        metadata = metadata_from_header(read_gguf_header(write_raw_gguf(tmp_path / name, *HOSTILE[name])))
        assert metadata.quantization == "unknown" or name != "file-type-string.gguf"
        assert metadata.context_length is None or name != "nan-context.gguf"
        assert metadata.n_head is None or name != "inf-heads.gguf"
        assert metadata.name == "name-is-a-list" or name != "name-is-a-list.gguf"


def test_nested_wide_arrays_are_refused_without_multiplying_memory(tmp_path: Path):
    path = write_raw_gguf(tmp_path / "wide.gguf", kv("x", GGUF_ARRAY, nested_arrays(4, 64)))  # 64**4 leaves
    tracemalloc.start()
    try:
        with pytest.raises(NotAGGUFError, match="array of arrays"):
            read_gguf_header(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * path.stat().st_size + (1 << 20)


def test_long_strings_are_kept_as_a_length_and_names_lose_control_characters(tmp_path: Path):
    path = write_raw_gguf(
        tmp_path / "model.gguf",  # a file name that says nothing: the GGUF name is shown
        kv_str("general.name", "Evil\x1b]0;pwned\x07\nModel" + "x" * 5000),
        kv_str("general.description", "d" * 200_000),
    )
    header = read_gguf_header(path)
    assert not isinstance(header.metadata["general.description"], str)
    name = metadata_from_header(header).name
    assert "\x1b" not in name and "\n" not in name and "\x07" not in name
    assert name.startswith("Evil") and len(name) <= 200


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX feature")
def test_a_fifo_named_like_a_model_does_not_block_the_scan(tmp_path: Path):
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "good.gguf")
    with watched_fifo(folder / "x.gguf") as fifo:
        result = scan(folder, tmp_path)
    assert fifo.opened == 0, "the scan opened the FIFO (and would have blocked on it)"
    by_name = {Path(m.path).name: m for m in result.models}
    assert by_name["good.gguf"].usable
    assert "not a regular file" in (by_name["x.gguf"].problem or "")


def test_a_fifo_as_ollama_manifest_and_a_digest_that_climbs_out_are_refused(tmp_path: Path):
    store = tmp_path / "ollama"
    manifests = store / "manifests" / "registry.ollama.ai" / "library" / "evil"
    manifests.mkdir(parents=True)
    (store / "blobs").mkdir()
    outside = write_tiny_model(tmp_path / "outside.gguf")
    layer = {"mediaType": "application/vnd.ollama.image.model", "digest": "../../outside.gguf"}
    (manifests / "climb").write_text(json.dumps({"layers": [layer]}))
    with watched_fifo(manifests / "fifo") as fifo:
        result = scan_models(
            tmp_path / "none",
            tmp_path / "cache",
            env={"OLLAMA_MODELS": str(store)},
            home=tmp_path / "home",
            include_packages=False,
        )
    assert fifo.opened == 0
    assert not any(Path(m.path) == outside for m in result.models)
    problems = sorted(m.problem or "" for m in result.models)
    assert any("invalid digest" in p for p in problems)
    assert any("not a regular file" in p for p in problems)


def test_a_vocabulary_that_lists_a_token_twice_is_refused(tmp_path: Path):
    from fara_desktop.models.gguf_file import read_gguf_header
    from fara_desktop.vocabulary.errors import NotAGGUFError
    from tests.helpers.gguf_factory import write_bert_embedder

    bad = write_bert_embedder(tmp_path / "dup.gguf", extra_tokens=("[CLS]",))
    with pytest.raises(NotAGGUFError, match=r"lists the token '\[CLS\]' twice"):
        read_gguf_header(bad)
    assert read_gguf_header(write_bert_embedder(tmp_path / "good.gguf")).metadata["tokenizer.ggml.tokens"].length > 100
