"""Write small GGUF files for tests: random-weight models of real architectures, and damaged files.

The models have the tensor names and shapes llama.cpp expects for each architecture, a tiny SentencePiece
vocabulary (specials + 256 byte tokens + a few words) and F32 weights, so llama.cpp loads them and generates.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

WORDS = ["▁the", "▁a", "▁cat", "▁dog", "▁sat", "▁on", "▁mat", "▁hello", "▁world", "."]


def _vocab() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>"]
    types = [2, 3, 3, 3, 3]  # unknown, control…
    tokens += [f"<0x{i:02X}>" for i in range(256)]
    types += [6] * 256  # byte
    tokens += WORDS
    types += [1] * len(WORDS)  # normal
    scores = [0.0] * 5 + [-1000.0] * 256 + [-float(i) for i in range(len(WORDS))]
    return tokens, scores, types


def add_tiny_vocabulary(writer: gguf.GGUFWriter, chat_template: str | None = None) -> list[str]:
    """The tiny SentencePiece vocabulary (and a chat template) written into a model; returns its tokens."""
    tokens, scores, types = _vocab()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    if chat_template:
        writer.add_chat_template(chat_template)
    return tokens


def write_tiny_model(
    path: Path,
    arch: str = "llama",
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    context_length: int = 512,
    chat_template: str | None = None,
    name: str | None = None,
    seed: int = 0,
    only_words: bool = False,
) -> Path:
    """``only_words``: the output layer can only pick "▁cat" or "▁dog" (their rows are ±e₀, every other row is
    zero), so whatever the random weights compute, the reply is a stream of those two words: a model whose output
    a test can reason about without knowing its weights."""
    rng = np.random.default_rng(seed)
    tokens = _vocab()[0]
    n_vocab = len(tokens)
    head_dim = n_embd // n_head
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name or f"Tiny {arch}")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_file_type(0)  # ALL_F32
    if arch in ("gemma3", "gpt-oss"):
        writer.add_sliding_window(128)  # gpt-oss: every other layer
    if arch == "qwen2vl":  # M-RoPE: a picture's positions are (time, row, column); text's all three the same
        half = head_dim // 2  # split as Qwen2-VL-7B's 16/24/24 of 64
        time_part, row_part = half // 4, (half - half // 4) // 2
        writer.add_array("qwen2vl.rope.dimension_sections", [time_part, row_part, half - time_part - row_part, 0])
    n_expert = 4
    moe = arch in ("qwen3moe", "gpt-oss")
    if moe:
        writer.add_expert_count(n_expert)
        writer.add_expert_used_count(2)
        writer.add_expert_feed_forward_length(n_ff)
    add_tiny_vocabulary(writer, chat_template)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    # numpy shapes are (rows, cols) = (out, in): ggml's ne is the reverse.
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", ones(n_embd))
    output = weight(n_vocab, n_embd)
    if only_words:
        output[:] = 0.0
        output[tokens.index("▁cat"), 0] = 10.0
        output[tokens.index("▁dog"), 0] = -10.0
    writer.add_tensor("output.weight", output)
    for i in range(n_layer):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", ones(n_embd))
        writer.add_tensor(f"{blk}.attn_q.weight", weight(n_head * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_k.weight", weight(n_head_kv * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_v.weight", weight(n_head_kv * head_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_output.weight", weight(n_embd, n_head * head_dim))
        if arch == "gpt-oss":  # attention sinks, biases on the output and on every expert, a norm after attention
            writer.add_tensor(f"{blk}.attn_sinks.weight", np.zeros(n_head, dtype=np.float32))
            writer.add_tensor(f"{blk}.attn_output.bias", np.zeros(n_embd, dtype=np.float32))
            writer.add_tensor(f"{blk}.post_attention_norm.weight", ones(n_embd))
            writer.add_tensor(f"{blk}.ffn_gate_inp.bias", np.zeros(n_expert, dtype=np.float32))
            writer.add_tensor(f"{blk}.ffn_gate_exps.bias", np.zeros((n_expert, n_ff), dtype=np.float32))
            writer.add_tensor(f"{blk}.ffn_up_exps.bias", np.zeros((n_expert, n_ff), dtype=np.float32))
            writer.add_tensor(f"{blk}.ffn_down_exps.bias", np.zeros((n_expert, n_embd), dtype=np.float32))
        if arch in ("qwen2", "qwen2vl"):
            writer.add_tensor(f"{blk}.attn_q.bias", np.zeros(n_head * head_dim, dtype=np.float32))
            writer.add_tensor(f"{blk}.attn_k.bias", np.zeros(n_head_kv * head_dim, dtype=np.float32))
            writer.add_tensor(f"{blk}.attn_v.bias", np.zeros(n_head_kv * head_dim, dtype=np.float32))
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            writer.add_tensor(f"{blk}.attn_q_norm.weight", ones(head_dim))
            writer.add_tensor(f"{blk}.attn_k_norm.weight", ones(head_dim))
        if arch == "gemma3":
            writer.add_tensor(f"{blk}.post_attention_norm.weight", ones(n_embd))
            writer.add_tensor(f"{blk}.post_ffw_norm.weight", ones(n_embd))
        if arch != "gpt-oss":
            writer.add_tensor(f"{blk}.ffn_norm.weight", ones(n_embd))
        if moe:
            writer.add_tensor(f"{blk}.ffn_gate_inp.weight", weight(n_expert, n_embd))
            writer.add_tensor(f"{blk}.ffn_gate_exps.weight", weight(n_expert, n_ff, n_embd))
            writer.add_tensor(f"{blk}.ffn_up_exps.weight", weight(n_expert, n_ff, n_embd))
            writer.add_tensor(f"{blk}.ffn_down_exps.weight", weight(n_expert, n_embd, n_ff))
            continue
        writer.add_tensor(f"{blk}.ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(n_embd, n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_bert_embedder(
    path: Path,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_ff: int = 128,
    n_vocab: int = 0,
    context_length: int = 512,
    seed: int = 0,
    extra_tokens: tuple[str, ...] = (),
    token_types_f16: bool = False,
) -> Path:
    """A BERT-family sentence embedder (mean pooling, WordPiece vocabulary) with random weights, as llama.cpp runs
    bge, e5 and all-MiniLM. ``n_vocab`` pads the vocabulary to a real model's size (30,522 for bge-small)."""
    rng = np.random.default_rng(seed)
    words = ["the", "pump", "valve", "pressure", "water", "dry", "store", "chapter", "manual", "log", "server"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(c) for c in range(33, 127)]
    tokens += ["##" + chr(c) for c in range(97, 123)] + words
    tokens += [f"[unused{i}]" for i in range(max(0, n_vocab - len(tokens)))]
    tokens += list(extra_tokens)  # a test's hostile additions (a duplicate makes llama.cpp abort the process)
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_name("Random BERT embedder")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_token_type_count(2)
    writer.add_file_type(0)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types([3, 2, 3, 3, 3] + [1] * (len(tokens) - 5))
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_unk_token_id(1)
    writer.add_pad_token_id(0)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(3)
    writer.add_sep_token_id(3)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    writer.add_tensor("token_embd.weight", weight(len(tokens), n_embd))
    types = weight(2, n_embd)
    writer.add_tensor("token_types.weight", types.astype(np.float16) if token_types_f16 else types)
    writer.add_tensor("position_embd.weight", weight(context_length, n_embd))
    writer.add_tensor("token_embd_norm.weight", ones(n_embd))
    writer.add_tensor("token_embd_norm.bias", zeros(n_embd))
    for i in range(n_layer):
        blk = f"blk.{i}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{blk}.{name}.weight", weight(n_embd, n_embd))
            writer.add_tensor(f"{blk}.{name}.bias", zeros(n_embd))
        writer.add_tensor(f"{blk}.attn_output_norm.weight", ones(n_embd))
        writer.add_tensor(f"{blk}.attn_output_norm.bias", zeros(n_embd))
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_up.bias", zeros(n_ff))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(n_embd, n_ff))
        writer.add_tensor(f"{blk}.ffn_down.bias", zeros(n_embd))
        writer.add_tensor(f"{blk}.layer_output_norm.weight", ones(n_embd))
        writer.add_tensor(f"{blk}.layer_output_norm.bias", zeros(n_embd))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_truncated_copy(source: Path, target: Path, keep_bytes: int) -> Path:
    with open(source, "rb") as handle:
        target.write_bytes(handle.read(keep_bytes))
    return target


# ---------------------------------------------------------------------- hand-made headers for hostile files
# gguf's writer refuses (or recurses on) what an attacker would write, so these build the bytes directly.

GGUF_UINT32, GGUF_FLOAT32, GGUF_STRING, GGUF_ARRAY = 4, 6, 8, 9


def gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def kv(key: str, value_type: int, payload: bytes) -> bytes:
    return gguf_string(key) + struct.pack("<I", value_type) + payload


def kv_str(key: str, value: str) -> bytes:
    return kv(key, GGUF_STRING, gguf_string(value))


def kv_u32(key: str, value: int) -> bytes:
    return kv(key, GGUF_UINT32, struct.pack("<I", value))


def kv_f32(key: str, value: float) -> bytes:
    return kv(key, GGUF_FLOAT32, struct.pack("<f", value))


def nested_arrays(depth: int, width: int = 1) -> bytes:
    """An array of arrays ``depth`` deep, each holding ``width`` elements; the innermost hold uint32 zeros."""
    payload = struct.pack("<IQ", GGUF_UINT32, width) + b"\0\0\0\0" * width
    for _ in range(depth - 1):
        payload = struct.pack("<IQ", GGUF_ARRAY, width) + payload * width
    return payload


def write_raw_gguf(path: Path, *pairs: bytes, architecture: str = "llama") -> Path:
    """A header-only GGUF (no tensors) with ``general.architecture`` and the given raw key/value pairs."""
    body = [kv_str("general.architecture", architecture), *pairs]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(body)) + b"".join(body))
    return path


def rewrite_gguf(
    source: Path,
    target: Path,
    changes: dict[str, tuple[gguf.GGUFValueType, object]],
    drop_tensors: tuple[str, ...] = (),
) -> Path:
    """A copy of ``source`` with some metadata values replaced (of any type, or added): a stranger's edit of a
    real model. The tensors are copied as they are, but for ``drop_tensors``."""
    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields["general.architecture"].contents())
    writer = gguf.GGUFWriter(str(target), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in changes:
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), value_type, sub_type=sub_type)
    for name, (value_type, value) in changes.items():
        writer.add_key_value(name, value, value_type)
    for tensor in reader.tensors:
        if tensor.name not in drop_tensors:
            writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


def write_with_tensor_shape(source: Path, target: Path, tensor: str, shape: tuple[int, ...]) -> Path:
    """A copy of ``source`` whose directory claims another shape for one tensor (the data stays as it was)."""
    data = bytearray(source.read_bytes())
    reader = gguf.GGUFReader(str(source))
    info = next(t for t in reader.tensors if t.name == tensor)
    field = info.field
    # parts: name length, name, n_dims, dims, type, offset — dims is the fourth part
    dims = field.parts[3]
    start = field.offset + sum(p.nbytes for p in field.parts[:3])
    assert len(shape) == len(dims)
    data[start : start + 8 * len(shape)] = struct.pack(f"<{len(shape)}Q", *shape)
    target.write_bytes(bytes(data))
    return target


def write_projector(
    path: Path,
    n_embd: int = 64,
    name: str = "Tiny vision projector",
    n_ff: int = 128,
    n_layer: int = 1,
    n_head: int = 4,
    image_size: int = 224,
    patch_size: int = 14,
    text_embd: int = 640,
    half: bool = False,
    half_position_embedding: bool = False,
) -> Path:
    """A vision projector (``mmproj``) of llama.cpp's Gemma 3 layout (a SigLIP encoder, ``clip.projector_type``
    gemma3), random weights, that llama.cpp's ``mtmd`` loads and runs: ``text_embd`` must be the paired text
    model's width (Gemma 3 270M: 640). Real shape (Gemma 3's SigLIP-So400m): n_embd 1152, n_ff 4304, 27 layers,
    16 heads, 896 px, ``half`` (f16 matrices). Tensors added to f32 ones stay f32 (an f16 position embedding makes
    ggml abort the whole process: a check for strangers' projectors must refuse it)."""
    writer, weights, vector = _vision_encoder(
        path, name, "gemma3", image_size, patch_size, n_embd, n_ff, n_layer, n_head, text_embd, half, seed=1,
        mean_std=([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
    )  # fmt: skip
    writer.add_tensor("v.patch_embd.weight", weights(n_embd, 3, patch_size, patch_size))
    writer.add_tensor("v.patch_embd.bias", vector(n_embd))
    positions = weights((image_size // patch_size) ** 2, n_embd).astype(np.float32)
    writer.add_tensor("v.position_embd.weight", positions.astype(np.float16) if half_position_embedding else positions)
    _encoder_blocks(writer, weights, vector, n_layer, n_embd, n_ff)
    writer.add_tensor("mm.input_projection.weight", weights(n_embd, text_embd))
    writer.add_tensor("mm.soft_emb_norm.weight", vector(n_embd, one=True))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_qwen2vl_projector(
    path: Path, n_embd: int = 64, n_ff: int = 128, n_layer: int = 1, n_head: int = 4, patch_size: int = 14,
    text_embd: int = 64, half: bool = False,
) -> Path:
    """A vision projector of llama.cpp's Qwen2-VL layout (``qwen2vl_merger``: a ViT with 2-D M-RoPE, two patch
    convolutions, 2×2 patches merged into one token by an MLP), random weights, that ``mtmd`` loads and runs:
    ``text_embd`` must be the paired ``qwen2vl`` text model's width. Its pictures take fewer positions than tokens
    (M-RoPE). Real shape (Qwen2-VL-7B / Fara-7B): n_embd 1280, n_ff 5120, 32 layers, 16 heads, text 3584."""
    writer, weights, vector = _vision_encoder(
        path, "Tiny Qwen2-VL projector", "qwen2vl_merger", 560, patch_size, n_embd, n_ff, n_layer, n_head, text_embd,
        half, seed=2, mean_std=([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]),
    )  # fmt: skip
    writer.add_tensor("v.patch_embd.weight", weights(n_embd, 3, patch_size, patch_size))
    writer.add_tensor("v.patch_embd.weight.1", weights(n_embd, 3, patch_size, patch_size))
    _encoder_blocks(writer, weights, vector, n_layer, n_embd, n_ff)
    writer.add_tensor("mm.0.weight", weights(n_embd * 4, n_embd * 4))
    writer.add_tensor("mm.0.bias", vector(n_embd * 4))
    writer.add_tensor("mm.2.weight", weights(text_embd, n_embd * 4))
    writer.add_tensor("mm.2.bias", vector(text_embd))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_llava_projector(
    path: Path, n_embd: int = 64, n_ff: int = 128, n_layer: int = 2, n_head: int = 4, image_size: int = 112,
    patch_size: int = 14, text_embd: int = 640,
) -> Path:
    """A vision projector of llama.cpp's LLaVA layout (``clip.projector_type`` "mlp": a CLIP ViT with a class
    embedding, two linear layers into the text model's width), random weights, that ``mtmd`` loads and runs beside a
    text model ``text_embd`` wide. No token of the text model opens its pictures: a prompt's text meets a picture's
    span directly. Real shape (LLaVA-1.5-7B): n_embd 1024, n_ff 4096, 24 layers, 16 heads, 336 px, text 4096."""
    writer, weights, vector = _vision_encoder(
        path, "Tiny LLaVA projector", "mlp", image_size, patch_size, n_embd, n_ff, n_layer, n_head, text_embd,
        False, seed=3, mean_std=([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]),
    )  # fmt: skip
    writer.add_tensor("v.patch_embd.weight", weights(n_embd, 3, patch_size, patch_size))
    writer.add_tensor("v.class_embd", vector(n_embd))
    writer.add_tensor("v.position_embd.weight", weights((image_size // patch_size) ** 2 + 1, n_embd))
    writer.add_tensor("v.pre_ln.weight", vector(n_embd, one=True))
    writer.add_tensor("v.pre_ln.bias", vector(n_embd))
    _encoder_blocks(writer, weights, vector, n_layer, n_embd, n_ff)
    writer.add_tensor("mm.0.weight", weights(text_embd, n_embd))
    writer.add_tensor("mm.0.bias", vector(text_embd))
    writer.add_tensor("mm.2.weight", weights(text_embd, text_embd))
    writer.add_tensor("mm.2.bias", vector(text_embd))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


Weights = Callable[..., np.ndarray]


def _vision_encoder(
    path: Path, name: str, kind: str, image_size: int, patch_size: int, n_embd: int, n_ff: int, n_layer: int,
    n_head: int, text_embd: int, half: bool, seed: int, mean_std: tuple[list[float], list[float]],
) -> tuple[gguf.GGUFWriter, Weights, Weights]:
    """A ``clip`` GGUF's writer with a ViT's keys, and makers of its random matrices (f16 when ``half``) and f32
    vectors (ones for norms' weights)."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name(name)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", kind)
    for key, value in (("image_size", image_size), ("patch_size", patch_size), ("embedding_length", n_embd),
                       ("feed_forward_length", n_ff), ("block_count", n_layer), ("projection_dim", text_embd),
                       ("attention.head_count", n_head)):  # fmt: skip
        writer.add_uint32(f"clip.vision.{key}", value)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", mean_std[0])
    writer.add_array("clip.vision.image_std", mean_std[1])
    writer.add_bool("clip.use_gelu", True)
    writer.add_file_type(1 if half else 0)

    def weights(*shape: int) -> np.ndarray:
        values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        return values.astype(np.float16) if half and len(shape) > 1 else values

    def vector(n: int, one: bool = False) -> np.ndarray:
        return np.ones(n, np.float32) if one else weights(n).astype(np.float32)

    return writer, weights, vector


def _encoder_blocks(writer: gguf.GGUFWriter, weights: Weights, vector: Weights, n_layer: int, n_embd: int,
                    n_ff: int) -> None:  # fmt: skip
    """A ViT's layers (attention with biases, layer norms, a two-matrix MLP) and its final norm."""
    for layer in range(n_layer):
        for kind in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"v.blk.{layer}.{kind}.weight", weights(n_embd, n_embd))
            writer.add_tensor(f"v.blk.{layer}.{kind}.bias", vector(n_embd))
        for kind in ("ln1", "ln2"):
            writer.add_tensor(f"v.blk.{layer}.{kind}.weight", vector(n_embd, one=True))
            writer.add_tensor(f"v.blk.{layer}.{kind}.bias", vector(n_embd))
        writer.add_tensor(f"v.blk.{layer}.ffn_up.weight", weights(n_ff, n_embd))
        writer.add_tensor(f"v.blk.{layer}.ffn_up.bias", vector(n_ff))
        writer.add_tensor(f"v.blk.{layer}.ffn_down.weight", weights(n_embd, n_ff))
        writer.add_tensor(f"v.blk.{layer}.ffn_down.bias", vector(n_embd))
    writer.add_tensor("v.post_ln.weight", vector(n_embd, one=True))
    writer.add_tensor("v.post_ln.bias", vector(n_embd))
