"""Would llama.cpp load this GGUF, or stop the whole process? Checked from the header, before llama.cpp sees it.

llama.cpp trusts much of a GGUF's header: a hyperparameter it cannot use often ends in ``GGML_ASSERT`` (SIGABRT,
the app gone) rather than an error it returns, and a file chosen once is loaded at every start. So the header is
checked here the way llama.cpp will use it: each tensor's type, shape and bytes against the file, each
hyperparameter's type and range, and the hyperparameters against the tensors (the layers, the head counts against
the width). A file that fails is listed as unusable with the reason and never reaches llama.cpp.

What this cannot foresee is caught by the load record (``models.load_record``): a load that never finished.
"""

from __future__ import annotations

import math
import re
from typing import Any

from fara_desktop.models.gguf_file import GGUFArraySummary, GGUFHeader
from fara_desktop.vocabulary.errors import NotAGGUFError

# ggml.h enum ggml_type → (elements per block, bytes per block), as ggml's type traits (and gguf-py's
# GGML_QUANT_SIZES, which a test compares this with). Missing numbers were removed from ggml.
GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4),
    1: (1, 2),
    2: (32, 18),
    3: (32, 20),
    6: (32, 22),
    7: (32, 24),
    8: (32, 34),
    9: (32, 36),
    10: (256, 84),
    11: (256, 110),
    12: (256, 144),
    13: (256, 176),
    14: (256, 210),
    15: (256, 292),
    16: (256, 66),
    17: (256, 74),
    18: (256, 98),
    19: (256, 50),
    20: (32, 18),
    21: (256, 110),
    22: (256, 82),
    23: (256, 136),
    24: (1, 1),
    25: (1, 2),
    26: (1, 4),
    27: (1, 8),
    28: (1, 8),
    29: (256, 56),
    30: (1, 2),
    34: (256, 54),
    35: (256, 66),
    39: (32, 17),
}
MAX_LAYERS = 512  # llama.cpp's LLAMA_MAX_LAYERS: per-layer arrays are this long
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_ELEMENTS = (1 << 63) - 1  # ggml counts elements and bytes in int64
_MAX_NAME = 63  # GGML_MAX_NAME - 1
_LAYER = re.compile(r"(?:^|\.)blk\.(\d{1,9})\.")
_INTEGER_ARRAY_TYPES = frozenset({0, 1, 2, 3, 4, 5, 10, 11})  # GGUF's integer value types

# Hyperparameters llama.cpp reads as integers, with the range a real model can have. A key of another type makes
# llama.cpp refuse the file (or worse); one out of range sizes buffers from nonsense.
_INTEGER_KEYS: dict[str, tuple[int, int]] = {
    "context_length": (1, 1 << 24),
    "embedding_length": (1, 1 << 20),
    "feed_forward_length": (0, 1 << 22),
    "block_count": (1, MAX_LAYERS),
    "attention.head_count": (0, 1 << 14),
    "attention.head_count_kv": (0, 1 << 14),
    "attention.key_length": (1, 1 << 16),
    "attention.value_length": (1, 1 << 16),
    "attention.sliding_window": (0, 1 << 24),
    "vocab_size": (1, 1 << 24),
    "expert_count": (0, 1 << 12),
    "expert_used_count": (0, 1 << 12),
}


class UnloadableModelError(NotAGGUFError):
    """A GGUF whose header llama.cpp could not use: loading it would fail, or abort the whole process."""


def _integer(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):  # True is an int in Python
        return None
    return int(value)


def _integers(value: Any) -> list[int] | None:
    """A scalar or a per-layer array (short arrays are kept by the reader) as a list; None when of another type."""
    values = value if isinstance(value, list) else [value]
    numbers = [_integer(v) for v in values]
    if not numbers or any(n is None for n in numbers):
        return None
    return [n for n in numbers if n is not None]


def check_loadable(header: GGUFHeader, total_bytes: int | None = None) -> None:
    """Raise ``UnloadableModelError`` with the reason when llama.cpp could not load this file safely.
    ``total_bytes``: the whole model's size when the header's file is only its first chunk (a packaged model)."""
    name = header.path.name

    def refuse(reason: str) -> UnloadableModelError:
        return UnloadableModelError(f"{name} cannot be loaded: {reason}.")

    if not header.tensors:
        raise refuse("it holds no tensors (weights), only a header")
    architecture = header.metadata.get("general.architecture")
    if not isinstance(architecture, str) or not architecture.strip():
        raise refuse("it does not name its architecture (general.architecture)")
    _check_tensors(header, header.tensor_bytes + max(0, (total_bytes or 0) - header.file_bytes), refuse)
    token_types = next((t for t in header.tensors if t.name == "token_types.weight"), None)
    if token_types is not None and token_types.ggml_type != 0:
        # BERT's graph adds this table to the activations; ggml's CPU add aborts the process unless it is f32
        raise refuse("its token-type embeddings are not stored as f32, which llama.cpp cannot add (it would abort)")
    values = _check_hyperparameters(header, architecture, refuse)
    _check_layers(header, values.get("block_count"), refuse)
    _check_heads(values, refuse)


# What a vision encoder reads at once: the largest of 2026 read 896-1,024 px (Gemma 3, Pixtral), at most 2,048 here;
# a 4,096 px one took 140 s and 1.2 GB for one picture on a CPU. Its patches bound the encoder's work and tokens.
MAX_PICTURE_SIDE = 2048
MAX_PICTURE_PATCHES = 32_768


def check_projector(header: GGUFHeader) -> None:
    """Raise ``UnloadableModelError`` when llama.cpp's ``mtmd`` could not load this vision projector safely: the
    same bounds as a model's tensors, a vision encoder (not only sound), a sane picture size, and every tensor that
    ggml adds to the activations stored as f32 (an f16 position embedding aborts the whole process: measured)."""
    name = header.path.name

    def refuse(reason: str) -> UnloadableModelError:
        return UnloadableModelError(f"{name} cannot be used to see pictures: {reason}.")

    if header.metadata.get("general.architecture") != "clip" or not header.tensors:
        raise refuse("it is not a vision projector (an mmproj file)")
    _check_tensors(header, header.tensor_bytes, refuse)
    if header.metadata.get("clip.has_vision_encoder") is not True:
        raise refuse("it has no vision encoder (a projector for sound, or none)")
    image = header.int_value("clip.vision.image_size", 1, MAX_PICTURE_SIDE)
    patch = header.int_value("clip.vision.patch_size", 1, MAX_PICTURE_SIDE)
    if image is None or patch is None or patch > image:
        raise refuse("its picture or patch size is missing or out of range")
    if (image // patch) ** 2 > MAX_PICTURE_PATCHES:
        raise refuse(f"its {image} px pictures in {patch} px patches are more work than a picture is worth here")
    for tensor in header.tensors:
        added = len(tensor.shape) == 1 or tensor.name.endswith("position_embd.weight")
        if added and tensor.ggml_type != 0:
            raise refuse(f"its {tensor.name} is not stored as f32, which llama.cpp cannot add (it would abort)")
    _check_encoder(header, refuse)


# What llama.cpp's clip.cpp reads for the projector types whose code was checked: a tensor it reads unchecked is a
# null pointer when missing (SIGSEGV: a file saying "mlp" over Gemma 3's tensors). Other types get the encoder's
# checks only.
PROJECTOR_TENSORS: dict[str, tuple[str, ...]] = {
    "gemma3": ("mm.input_projection.weight", "mm.soft_emb_norm.weight"),
    "mlp": ("mm.0.weight", "mm.2.weight"),
    "qwen2vl_merger": ("mm.0.weight", "mm.2.weight"),
    "qwen2.5vl_merger": ("mm.0.weight", "mm.2.weight"),
}


def _check_encoder(header: GGUFHeader, refuse: Any) -> None:
    """The ViT as clip.cpp builds its graph: the width, heads and layers the header says, each layer's attention
    and feed-forward tensors present with that width (a missing layer's tensor is a SIGSEGV on the first picture,
    heads that do not divide the width or a width the tensors disagree with a GGML_ASSERT), and the tensors of its
    projector type."""
    tensors = {t.name: t.shape for t in header.tensors}
    kind = header.metadata.get("clip.projector_type")
    for name in PROJECTOR_TENSORS.get(kind, ()) if isinstance(kind, str) else ():
        if name not in tensors:
            raise refuse(f"its projector type {kind!r} needs the tensor {name}, which it lacks")
    if not any(name.startswith("v.blk.") for name in tensors):
        return
    width = header.int_value("clip.vision.embedding_length", 1, 1 << 16)
    heads = header.int_value("clip.vision.attention.head_count", 1, 1 << 12)
    layers = header.int_value("clip.vision.block_count", 1, MAX_LAYERS)
    if width is None or heads is None or layers is None:
        raise refuse("its encoder's width, head count or layer count is missing or out of range")
    if width % heads:
        raise refuse(f"its {heads} attention heads do not divide its width of {width}")
    patch = tensors.get("v.patch_embd.weight")
    if patch is None or patch[-1] != width:
        raise refuse(f"its patch embedding is missing or not {width} wide")
    position = tensors.get("v.position_embd.weight")
    if position is not None and position[0] != width:
        raise refuse(f"its position embedding is not {width} wide")
    side = header.int_value("clip.vision.image_size", 1, MAX_PICTURE_SIDE)
    step = header.int_value("clip.vision.patch_size", 1, MAX_PICTURE_SIDE)
    if position is not None and side and step and len(position) > 1 and position[1] != (side // step) ** 2:
        # its picture makes another number of patches than it has positions for: a GGML_ASSERT at the first one
        raise refuse(f"its {side} px pictures in {step} px patches do not match its {position[1]} positions")
    for layer in range(layers):
        fused = f"v.blk.{layer}.attn_qkv.weight"
        parts = (fused,) if fused in tensors else tuple(f"v.blk.{layer}.attn_{p}.weight" for p in ("q", "k", "v"))
        for name in (*parts, f"v.blk.{layer}.ffn_down.weight"):
            shape = tensors.get(name)
            if shape is None:
                raise refuse(f"its layer {layer} lacks the tensor {name}")
            if width not in shape[:2]:
                raise refuse(f"its tensor {name} is not {width} wide, as its header says")


def _check_tensors(header: GGUFHeader, data_bytes: int, refuse: Any) -> None:
    seen: set[str] = set()
    total = 0
    for tensor in header.tensors:
        shown = tensor.name[:40]
        if len(tensor.name.encode("utf-8", "replace")) > _MAX_NAME:
            raise refuse(f"a tensor name is longer than llama.cpp allows ({shown!r}…)")
        if tensor.name in seen:
            raise refuse(f"the tensor {shown!r} is listed twice")
        seen.add(tensor.name)
        if not 1 <= len(tensor.shape) <= _MAX_DIMS:
            raise refuse(f"the tensor {shown!r} has {len(tensor.shape)} dimensions (1 to {_MAX_DIMS} are possible)")
        block = GGML_BLOCKS.get(tensor.ggml_type)
        if block is None:
            raise refuse(f"the tensor {shown!r} has an unknown data type ({tensor.ggml_type})")
        elements = math.prod(tensor.shape)
        if elements > _MAX_ELEMENTS or any(d == 0 for d in tensor.shape):
            raise refuse(f"the tensor {shown!r} claims an impossible shape {tensor.shape}")
        block_elements, block_bytes = block
        if tensor.shape[0] % block_elements:
            raise refuse(f"the tensor {shown!r} has rows that do not fit its data type's blocks")
        size = elements // block_elements * block_bytes
        if tensor.offset % header.alignment or tensor.offset + size > data_bytes:
            raise refuse(
                f"the tensor {shown!r} claims {size:,} bytes at offset {tensor.offset:,}, beyond the file's "
                f"{data_bytes:,} bytes of data (a damaged or incomplete file)"
            )
        total += size
    if total > data_bytes:
        raise refuse(f"its tensors claim {total:,} bytes, more than the file's {data_bytes:,}")


def _check_hyperparameters(header: GGUFHeader, architecture: str, refuse: Any) -> dict[str, list[int]]:
    values: dict[str, list[int]] = {}
    for key, (low, high) in _INTEGER_KEYS.items():
        full = f"{architecture}.{key}"
        if full not in header.metadata:
            continue
        raw = header.metadata[full]
        if isinstance(raw, GGUFArraySummary) and raw.element_type in _INTEGER_ARRAY_TYPES:
            continue  # a long per-layer array the reader only counted: llama.cpp checks its length
        numbers = _integers(raw)
        if numbers is None:
            raise refuse(f"{full} is {str(raw)[:40]!r}, not a whole number")
        bad = next((n for n in numbers if not low <= n <= high), None)
        if bad is not None:
            raise refuse(f"{full} is {bad:,}, outside what a model can have ({low:,} to {high:,})")
        values[key] = numbers
    for key in ("embedding_length", "block_count"):
        if key not in values:
            raise refuse(f"{architecture}.{key} is missing")
    file_type = header.metadata.get("general.file_type")
    if file_type is not None and _integer(file_type) is None:
        raise refuse(f"general.file_type is {str(file_type)[:40]!r}, not a number")
    return values


def _check_layers(header: GGUFHeader, block_count: list[int] | None, refuse: Any) -> None:
    if not block_count:
        return
    layers = block_count[0]
    indices = {int(m.group(1)) for t in header.tensors if (m := _LAYER.search(t.name))}
    if not indices:
        return  # an architecture that names its layers otherwise: llama.cpp checks the tensors it expects
    if max(indices) >= layers:
        raise refuse(f"it has tensors of layer {max(indices)} but says it has {layers} layers (block_count)")
    if max(indices) + 1 < layers:
        raise refuse(f"it says it has {layers:,} layers (block_count) but holds tensors for {max(indices) + 1}")


def _check_heads(values: dict[str, list[int]], refuse: Any) -> None:
    width = values["embedding_length"][0]
    heads = values.get("attention.head_count")
    heads_kv = values.get("attention.head_count_kv")
    if heads is not None and max(heads) == 0:
        raise refuse("attention.head_count is 0")
    if heads is None:
        return
    if "attention.key_length" not in values and any(h and width % h for h in heads):
        raise refuse(f"the width ({width:,}) is not a multiple of the head count ({max(heads):,})")
    if heads_kv is not None:
        layers = max(len(heads), len(heads_kv))
        per_layer = heads * layers if len(heads) == 1 else heads
        per_layer_kv = heads_kv * layers if len(heads_kv) == 1 else heads_kv
        for h, kv in zip(per_layer, per_layer_kv, strict=False):
            if h and kv > h:
                raise refuse(f"more key/value heads ({kv:,}) than heads ({h:,})")
            if kv and h % kv:
                raise refuse(f"the head count ({h:,}) is not a multiple of the key/value head count ({kv:,})")
