"""Small random-weight models of the hybrid and recurrent families llama.cpp runs, for the suite.

Each has the keys and tensors its ``load_arch_hparams`` / ``load_arch_tensors`` in llama.cpp read (the vendored
sources of llama-cpp-python: ``src/models/lfm2.cpp``, ``granite-hybrid.cpp``, ``qwen35.cpp``), the tiny
SentencePiece vocabulary of ``gguf_factory`` and F32 weights: they load in the installed llama.cpp, keep a
recurrent state (which cannot be cut back to a prefix) and generate deterministically under greedy sampling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np

from tests.helpers.gguf_factory import add_tiny_vocabulary

HYBRID_FAMILIES = ("lfm2", "granitehybrid", "qwen35")  # short convolutions, Mamba-2, gated delta-net
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF = 64, 4, 4, 2, 128
HEAD_DIM = N_EMBD // N_HEAD


def write_tiny_hybrid(
    path: Path,
    arch: str,
    chat_template: str | None = None,
    seed: int = 0,
    vocabulary_of: Path | None = None,
    mtp: bool = False,
) -> Path:
    """A four-layer model of ``arch``: layers 1 and 3 attend, 0 and 2 are recurrent. ``vocabulary_of``: a real
    model whose tokenizer (and chat template) it takes instead of the tiny one — text its replies can be stored
    as and tokenized again, as a real model's. ``mtp`` (qwen35): a fifth block, the multi-token-prediction head
    (NextN) Qwen3.5's files carry, as ``load_block_mtp`` in llama.cpp's ``qwen35.cpp`` reads it."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"Tiny {arch}")
    writer.add_context_length(2048)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER + (1 if mtp else 0))
    if mtp:
        writer.add_uint32(f"{arch}.nextn_predict_layers", 1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    attends = [i % 2 == 1 for i in range(N_LAYER)]
    if arch == "qwen35":
        writer.add_head_count_kv(N_HEAD_KV)
        writer.add_uint32(f"{arch}.full_attention_interval", 2)
        writer.add_rope_dimension_sections([2, 2, 2, 2])
    else:  # a layer with no KV heads is a recurrent one
        writer.add_head_count_kv([N_HEAD_KV if a else 0 for a in attends])
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_file_type(0)
    d_conv, d_state, n_group, n_ssm_head = 4, 16, 2, 4
    d_inner = 2 * N_EMBD if arch == "granitehybrid" else d_state * n_ssm_head
    if arch == "lfm2":
        writer.add_uint32(f"{arch}.shortconv.l_cache", 3)
    else:
        writer.add_ssm_conv_kernel(d_conv)
        writer.add_ssm_inner_size(d_inner)
        writer.add_ssm_state_size(d_state)
        writer.add_ssm_time_step_rank(n_ssm_head)
        writer.add_ssm_group_count(n_group)
    if vocabulary_of is not None:
        from tests.helpers.real_shapes import _copy_tokenizer

        tokens = range(_copy_tokenizer(writer, vocabulary_of))
    else:
        tokens = add_tiny_vocabulary(writer, chat_template)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    def ones(*shape: int) -> np.ndarray:
        return np.ones(shape, dtype=np.float32)

    add = writer.add_tensor
    n_vocab = len(tokens)
    add("token_embd.weight", weight(n_vocab, N_EMBD))
    add("token_embd_norm.weight" if arch == "lfm2" else "output_norm.weight", ones(N_EMBD))
    add("output.weight", weight(n_vocab, N_EMBD))
    kv = N_HEAD_KV * HEAD_DIM
    for i in range(N_LAYER):
        blk = f"blk.{i}"
        add(f"{blk}.attn_norm.weight", ones(N_EMBD))
        if attends[i]:  # numpy shapes are (out, in): ggml's ne reversed
            q_rows = 2 * N_HEAD * HEAD_DIM if arch == "qwen35" else N_HEAD * HEAD_DIM  # qwen35: query and gate
            add(f"{blk}.attn_q.weight", weight(q_rows, N_EMBD))
            add(f"{blk}.attn_k.weight", weight(kv, N_EMBD))
            add(f"{blk}.attn_v.weight", weight(kv, N_EMBD))
            add(f"{blk}.attn_output.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
            if arch in ("lfm2", "qwen35"):
                add(f"{blk}.attn_q_norm.weight", ones(HEAD_DIM))
                add(f"{blk}.attn_k_norm.weight", ones(HEAD_DIM))
        elif arch == "lfm2":
            add(f"{blk}.shortconv.conv.weight", weight(N_EMBD, 3))
            add(f"{blk}.shortconv.in_proj.weight", weight(3 * N_EMBD, N_EMBD))
            add(f"{blk}.shortconv.out_proj.weight", weight(N_EMBD, N_EMBD))
        elif arch == "granitehybrid":  # Mamba-2
            conv_dim = d_inner + 2 * n_group * d_state
            add(f"{blk}.ssm_in.weight", weight(2 * d_inner + 2 * n_group * d_state + n_ssm_head, N_EMBD))
            add(f"{blk}.ssm_conv1d.weight", weight(conv_dim, d_conv))
            add(f"{blk}.ssm_conv1d.bias", np.zeros(conv_dim, dtype=np.float32))
            add(f"{blk}.ssm_dt.bias", np.zeros(n_ssm_head, dtype=np.float32))
            add(f"{blk}.ssm_a", -ones(n_ssm_head, 1))
            add(f"{blk}.ssm_d", ones(n_ssm_head, 1))
            add(f"{blk}.ssm_norm.weight", ones(n_group, d_inner // n_group))
            add(f"{blk}.ssm_out.weight", weight(N_EMBD, d_inner))
        else:  # qwen35's gated delta-net
            key_dim, value_dim = d_state * n_group, d_state * n_ssm_head
            add(f"{blk}.attn_qkv.weight", weight(2 * key_dim + value_dim, N_EMBD))
            add(f"{blk}.attn_gate.weight", weight(value_dim, N_EMBD))
            add(f"{blk}.ssm_conv1d.weight", weight(2 * key_dim + value_dim, d_conv))
            add(f"{blk}.ssm_dt.bias", np.zeros(n_ssm_head, dtype=np.float32))
            add(f"{blk}.ssm_a", -ones(n_ssm_head))
            add(f"{blk}.ssm_beta.weight", weight(n_ssm_head, N_EMBD))
            add(f"{blk}.ssm_alpha.weight", weight(n_ssm_head, N_EMBD))
            add(f"{blk}.ssm_norm.weight", ones(d_state))
            add(f"{blk}.ssm_out.weight", weight(N_EMBD, value_dim))
        if arch == "qwen35":
            add(f"{blk}.post_attention_norm.weight", ones(N_EMBD))
        else:
            add(f"{blk}.ffn_norm.weight", ones(N_EMBD))
        add(f"{blk}.ffn_gate.weight", weight(N_FF, N_EMBD))
        add(f"{blk}.ffn_up.weight", weight(N_FF, N_EMBD))
        add(f"{blk}.ffn_down.weight", weight(N_EMBD, N_FF))
    if mtp:
        _add_mtp_block(add, weight, ones, N_LAYER, kv)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_mtp_block(add: Any, weight: Any, ones: Any, index: int, kv: int) -> None:
    """Qwen3.5's NextN block: a full-attention decoder block fed the projection of the next token's embedding
    and the trunk's last hidden state (``eh_proj``), each normed first; its LM head is the model's own."""
    blk = f"blk.{index}"
    add(f"{blk}.attn_norm.weight", ones(N_EMBD))
    add(f"{blk}.post_attention_norm.weight", ones(N_EMBD))
    add(f"{blk}.attn_q.weight", weight(2 * N_HEAD * HEAD_DIM, N_EMBD))
    add(f"{blk}.attn_k.weight", weight(kv, N_EMBD))
    add(f"{blk}.attn_v.weight", weight(kv, N_EMBD))
    add(f"{blk}.attn_output.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
    add(f"{blk}.attn_q_norm.weight", ones(HEAD_DIM))
    add(f"{blk}.attn_k_norm.weight", ones(HEAD_DIM))
    add(f"{blk}.ffn_gate.weight", weight(N_FF, N_EMBD))
    add(f"{blk}.ffn_up.weight", weight(N_FF, N_EMBD))
    add(f"{blk}.ffn_down.weight", weight(N_EMBD, N_FF))
    add(f"{blk}.nextn.eh_proj.weight", weight(N_EMBD, 2 * N_EMBD))
    add(f"{blk}.nextn.enorm.weight", ones(N_EMBD))
    add(f"{blk}.nextn.hnorm.weight", ones(N_EMBD))
