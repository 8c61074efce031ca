"""Files llama.cpp would refuse or abort on are refused from their header, before llama.cpp sees them.

Each hostile file here is a real model (a tiny one of a real architecture, or the embedded SmolLM2) with one value
changed the way a stranger's file could have it. Before these checks each of them was listed as usable; some made
llama.cpp abort the whole process (``block_count`` of four billion: SIGABRT, exit 134, at every start)."""

from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import pytest

from fara_desktop.models.discovery import scan_models
from fara_desktop.models.gguf_checks import GGML_BLOCKS, MAX_LAYERS, UnloadableModelError, check_loadable
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.planning.tuning import choose_model
from tests.helpers.gguf_factory import (
    rewrite_gguf,
    write_bert_embedder,
    write_tiny_model,
    write_with_tensor_shape,
)

V = gguf.GGUFValueType


def test_the_block_table_is_ggmls():
    """Our copy of ggml's block sizes equals gguf-py's (Q8_1 is never stored in a file: gguf-py's size for it
    differs from ggml's, so it is left out; newer types than the llama.cpp we build are not needed)."""
    theirs = {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items() if int(k) != 9}
    assert {k: v for k, v in theirs.items() if k in GGML_BLOCKS} == {
        k: GGML_BLOCKS[k] for k in theirs if k in GGML_BLOCKS
    }
    assert set(GGML_BLOCKS) >= {k for k in theirs if k <= 39}


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "qwen3moe", "gemma3"])
def test_real_architectures_pass(tmp_path: Path, arch: str):
    check_loadable(read_gguf_header(write_tiny_model(tmp_path / f"{arch}.gguf", arch=arch)))


def test_the_real_models_pass(smollm2_path: Path, gemma3_path: Path, tmp_path: Path):
    for path in (smollm2_path, gemma3_path, write_bert_embedder(tmp_path / "bert.gguf")):
        check_loadable(read_gguf_header(path))


HOSTILE_VALUES = {
    "layers-four-billion": ({"llama.block_count": (V.UINT32, 4_000_000_000)}, "block_count is 4,000,000,000"),
    "layers-more-than-tensors": ({"llama.block_count": (V.UINT32, 7)}, "holds tensors for 2"),
    "layers-fewer-than-tensors": ({"llama.block_count": (V.UINT32, 1)}, "tensors of layer 1"),
    "heads-zero": ({"llama.attention.head_count": (V.UINT32, 0)}, "head_count is 0"),
    "heads-not-dividing": ({"llama.attention.head_count": (V.UINT32, 3)}, "not a multiple"),
    "kv-heads-above-heads": ({"llama.attention.head_count_kv": (V.UINT32, 8)}, "more key/value heads"),
    "context-nan": ({"llama.context_length": (V.FLOAT32, float("nan"))}, "not a whole number"),
    "context-negative": ({"llama.context_length": (V.INT32, -4096)}, "outside what a model can have"),
    "context-string": ({"llama.context_length": (V.STRING, "4k")}, "not a whole number"),
    "file-type-string": ({"general.file_type": (V.STRING, "Q4_K_M")}, "general.file_type"),
    "width-zero": ({"llama.embedding_length": (V.UINT32, 0)}, "embedding_length is 0"),
    "no-architecture-name": ({"general.architecture": (V.STRING, " ")}, "architecture"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VALUES))
def test_a_hostile_value_is_refused_with_the_reason(tmp_path: Path, name: str):
    changes, reason = HOSTILE_VALUES[name]
    good = write_tiny_model(tmp_path / "good.gguf")
    if "general.architecture" in changes:  # the writer needs a real one; write the blank one over it
        path = rewrite_gguf(good, tmp_path / f"{name}.gguf", {})
        data = path.read_bytes().replace(
            b"\x05\x00\x00\x00\x00\x00\x00\x00llama", b"\x05\x00\x00\x00\x00\x00\x00\x00     ", 1
        )
        path.write_bytes(data)
    else:
        path = rewrite_gguf(good, tmp_path / f"{name}.gguf", changes)
    with pytest.raises(UnloadableModelError, match=reason):
        check_loadable(read_gguf_header(path))


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ((1 << 60, 1 << 60), "impossible shape|beyond the file"),
        ((64, 300_000), "beyond the file"),  # a real-looking shape that the file's bytes do not hold
    ],
)
def test_tensor_shapes_are_checked_against_the_file(tmp_path: Path, shape: tuple[int, ...], reason: str):
    good = write_tiny_model(tmp_path / "good.gguf")
    path = write_with_tensor_shape(good, tmp_path / "bad.gguf", "token_embd.weight", shape)
    with pytest.raises(UnloadableModelError, match=reason):
        check_loadable(read_gguf_header(path))


def test_rows_must_fill_whole_blocks_of_a_quantized_type(smollm2_path: Path, tmp_path: Path):
    path = write_with_tensor_shape(smollm2_path, tmp_path / "bad.gguf", "token_embd.weight", (575, 49152))
    with pytest.raises(UnloadableModelError, match="rows that do not fit"):
        check_loadable(read_gguf_header(path))


def test_a_junk_file_of_absurd_parameters_is_never_recommended(tmp_path: Path):
    """A 5 KB file whose tensor dimensions multiply to ~1e154 parameters was the recommended model."""
    import struct

    from tests.helpers.gguf_factory import kv_str, kv_u32

    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "good.gguf")
    pairs = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 32),
             kv_u32("llama.embedding_length", 4096),
             kv_u32("llama.context_length", 8192), kv_str("tokenizer.chat_template", "{{ messages }}")]  # fmt: skip
    tensor = struct.pack("<Q", 17) + b"token_embd.weight" + struct.pack("<I", 8) + struct.pack("<8Q", *[1 << 63] * 8)
    tensor += struct.pack("<IQ", 0, 0)
    body = b"GGUF" + struct.pack("<IQQ", 3, 1, len(pairs)) + b"".join(pairs) + tensor
    (folder / "junk.gguf").write_bytes(body + b"\0" * (5000 - len(body)))
    result = scan_models(folder, tmp_path / "cache", env={}, home=tmp_path / "home", include_packages=False)
    by_name = {Path(m.path).name: m for m in result.models}
    assert not by_name["junk.gguf"].usable and by_name["junk.gguf"].problem
    best, _ranked = choose_model([m.metadata for m in result.usable if m.metadata], 8 << 30, 16 << 30, 20e9)
    assert best is not None and Path(best.path).name == "good.gguf"


def test_a_stranger_copy_of_smollm2_that_aborts_llama_cpp_is_listed_unusable(smollm2_path: Path, tmp_path: Path):
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copyfile(smollm2_path, folder / "smollm2.gguf")
    rewrite_gguf(smollm2_path, folder / "smollm2-edited.gguf", {"llama.block_count": (V.UINT32, 4_000_000_000)})
    result = scan_models(folder, tmp_path / "cache", env={}, home=tmp_path / "home", include_packages=False)
    by_name = {Path(m.path).name: m for m in result.models}
    assert by_name["smollm2.gguf"].usable
    assert not by_name["smollm2-edited.gguf"].usable
    assert f"outside what a model can have (1 to {MAX_LAYERS})" in (by_name["smollm2-edited.gguf"].problem or "")


def test_an_embedder_whose_token_type_table_is_not_f32_is_refused_before_llama_cpp_aborts(tmp_path: Path):
    """Found converting all-MiniLM-L6-v2: with that table in f16, llama.cpp's first embedding aborted the process
    ("binary_op: unsupported types: dst: f32, src0: f32, src1: f16")."""
    path = write_bert_embedder(tmp_path / "bert-f16-types.gguf", token_types_f16=True)
    with pytest.raises(UnloadableModelError, match="token-type"):
        check_loadable(read_gguf_header(path))
