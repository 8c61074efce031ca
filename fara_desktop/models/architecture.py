"""What a token touches and what a sequence keeps, read from a GGUF header: the facts that set the speed and
memory of mixtures of experts and of hybrid and recurrent models.

The file says almost everything: expert counts and widths, per-layer KV head counts (0 where a layer has no KV
cache), state sizes, and each tensor's type and shape. What llama.cpp instead derives from the architecture's
*name* is written here, in one place, from its sources (``llama-arch.cpp`` ``llm_arch_is_recurrent`` /
``llm_arch_is_hybrid``, and each model's ``load_arch_hparams``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from fara_desktop.models.gguf_checks import GGML_BLOCKS
from fara_desktop.models.gguf_file import GGUFHeader

# llm_arch_is_recurrent: every layer holds a fixed state per sequence and none a KV cache.
RECURRENT_ARCHITECTURES = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
# llm_arch_is_hybrid: some layers attend (a KV cache that grows with the context), the others are recurrent.
HYBRID_ARCHITECTURES = frozenset(
    {
        "jamba",
        "falcon-h1",
        "plamo2",
        "granitehybrid",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "nemotron_h_moe",
        "qwen3next",
        "kimi-linear",
        "bailingmoe3",
        "kimi-k3",
        "glm5-next",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "minimax-01",
    }
)
# Hybrids whose recurrent layers llama.cpp places by an interval when the file lists none
# (``attention.recurrent_layers``): every ``full_attention_interval``-th layer attends, 4 unless the file says.
INTERVAL_HYBRIDS = frozenset({"qwen3next", "qwen35", "qwen35moe", "qwen4exp"})
DEFAULT_FULL_ATTENTION_INTERVAL = 4
# Hybrids whose recurrent layers are those with no KV heads (``attention.head_count_kv`` per layer, 0 = recurrent).
ZERO_KV_HEADS_HYBRIDS = frozenset({"granitehybrid", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe", "jamba"})
# Recurrent states are kept in f32 (llama.cpp's type_r and type_s).
STATE_BYTES_PER_VALUE = 4
_EXPERT_TENSOR = re.compile(r"\.ffn_[a-z_]*_exps\.")
# Tables a token reads one row of, which this app has llama.cpp keep on disk (``TENSOR_READ_LAZY`` in gemma4.cpp;
# ``load_progress`` in ``machine/llama_internals.py``): Gemma 4's per-layer embeddings, most of an E-model's file.
LAZY_TABLES = frozenset({"per_layer_token_embd.weight"})
# Architectures whose loader makes the tied output (``token_embd`` as the output layer) before the embeddings: the
# two are then separate tensors and the table is in memory twice (gemma4.cpp; measured at E2B's shape: 847 + 861
# MiB of weights for 1,400 in the file, the other 308 its Q6_K embeddings). Where the embeddings come first
# (llama, gemma3, ...) llama.cpp finds them and shares one copy.
OUTPUT_FIRST = frozenset({"gemma4"})
_MAX = 1 << 24


@dataclass(frozen=True)
class ArchitectureFacts:
    """How a model spends memory and bandwidth beyond "every weight, every layer": experts, recurrent layers."""

    n_expert: int = 0  # 0: a dense model
    n_expert_used: int = 0
    active_fraction: float = 1.0  # of the weights' bytes a generated token reads
    active_parameter_fraction: float = 1.0
    kv_layers: int | None = None  # layers holding a KV cache; None: every layer
    recurrent_layers: int = 0
    recurrent_state_bytes: int = 0  # per sequence, all recurrent layers
    rewindable: bool = True  # the context can be cut back to any prefix (False: recurrent state)
    note: str | None = None  # what could not be read, said where the estimate is shown
    lazy_bytes: int = 0  # tables kept on disk and read a row per token (``LAZY_TABLES``)
    duplicated_bytes: int = 0  # a tied output table loaded a second time (``OUTPUT_FIRST``)
    # Values one token keeps in the KV cache, summed over the layers that keep one, where heads differ by layer
    # (Gemma 4: 512-wide global layers, 256-wide windowed ones); None: uniform heads (the metadata's own)
    kv_values_full: int | None = None
    kv_values_swa: int | None = None


def _ints(value: object, length: int) -> list[int] | None:
    """A per-layer list of ``length`` integers (a scalar is repeated); None when missing or malformed."""
    if isinstance(value, bool):
        return [int(value)] * length
    if isinstance(value, int):
        return [value] * length
    if isinstance(value, list) and len(value) >= length and all(isinstance(v, int) for v in value[:length]):
        return [int(v) for v in value[:length]]
    return None


def recurrent_layer_flags(header: GGUFHeader, n_layer: int) -> list[bool] | None:
    """Which layers are recurrent, as llama.cpp decides it; None when the pattern of a hybrid is unknown."""
    arch = header.architecture
    if arch in RECURRENT_ARCHITECTURES:
        return [True] * n_layer
    if arch not in HYBRID_ARCHITECTURES:
        return [False] * n_layer
    listed = _ints(header.arch_value("attention.recurrent_layers"), n_layer)
    if listed is not None:
        return [bool(v) for v in listed]
    if arch in INTERVAL_HYBRIDS:
        interval = header.arch_int("full_attention_interval", 1, _MAX) or DEFAULT_FULL_ATTENTION_INTERVAL
        return [(i + 1) % interval != 0 for i in range(n_layer)]
    if arch in ZERO_KV_HEADS_HYBRIDS:
        heads = _ints(header.arch_value("attention.head_count_kv"), n_layer)
        if heads is not None:
            return [h == 0 for h in heads]
    return None


def recurrent_values_per_layer(header: GGUFHeader) -> int:
    """llama.cpp's ``n_embd_r() + n_embd_s()``: the values one recurrent layer keeps for a sequence."""
    n_embd = header.arch_int("embedding_length", 1, _MAX) or 0
    wkv_head = header.arch_int("wkv.head_size", 0, _MAX) or 0
    if wkv_head:  # RWKV: token shifts and the wkv state
        shifts = header.arch_int("token_shift_count", 0, 16) or 2
        return shifts * n_embd + n_embd * wkv_head
    l_cache = header.arch_int("shortconv.l_cache", 0, _MAX) or 0
    if l_cache:  # LFM2's short convolutions
        return n_embd * (l_cache - 1)
    d_conv = header.arch_int("ssm.conv_kernel", 0, _MAX) or 0
    d_inner = header.arch_int("ssm.inner_size", 0, _MAX) or 0
    d_state = header.arch_int("ssm.state_size", 0, _MAX) or 0
    groups = header.arch_int("ssm.group_count", 0, _MAX) or 0
    return max(0, d_conv - 1) * (d_inner + 2 * groups * d_state) + d_state * d_inner  # Mamba 1/2, gated delta-net


def tensor_bytes(ggml_type: int, shape: Sequence[int]) -> int | None:
    block = GGML_BLOCKS.get(ggml_type)
    if block is None:
        return None
    elements, size = block
    return math.prod(shape) // elements * size


def _touched_fractions(header: GGUFHeader, used: int, experts: int) -> tuple[float, float]:
    """The share of weight bytes and of parameters one token reads: every tensor, except that of each expert
    tensor only ``used / experts`` (the experts it is routed to) and of a lazy table one row (nothing, counted).
    From the tensor directory, so experts' widths, shared experts (``*_shexp``, always read) and leading dense
    layers are exactly as the file has them."""
    total_bytes = active_bytes = 0.0
    total_params = active_params = 0.0
    share = used / experts if experts else 1.0
    for tensor in header.tensors:
        size = tensor_bytes(tensor.ggml_type, tensor.shape)
        if size is None:
            return 1.0, 1.0  # a type we cannot size: claim nothing
        count = math.prod(tensor.shape)
        weight = 0.0 if tensor.name in LAZY_TABLES else share if _EXPERT_TENSOR.search(tensor.name) else 1.0
        total_bytes += size
        active_bytes += size * weight
        total_params += count
        active_params += count * weight
    if not total_bytes or not total_params:
        return 1.0, 1.0
    return active_bytes / total_bytes, active_params / total_params


def _lazy_bytes(header: GGUFHeader) -> int:
    return sum(tensor_bytes(t.ggml_type, t.shape) or 0 for t in header.tensors if t.name in LAZY_TABLES)


def _duplicated_bytes(header: GGUFHeader) -> int:
    names = {t.name: t for t in header.tensors}
    if header.architecture not in OUTPUT_FIRST or "output.weight" in names or "token_embd.weight" not in names:
        return 0
    table = names["token_embd.weight"]
    return tensor_bytes(table.ggml_type, table.shape) or 0


def _per_layer_kv_values(header: GGUFHeader, kv_layers: int) -> tuple[int, int] | None:
    """(global, windowed) KV values per token for a model whose windowed layers have heads of their own width
    (``attention.key_length_swa`` and a ``sliding_window_pattern``); None for any other. V as llama.cpp keeps it
    without flash attention (the app's f16 cache): every layer's padded to the widest (``n_embd_v_gqa_max``)."""
    n_layer = header.arch_int("block_count", 1, _MAX) or 0
    swa_k = header.arch_int("attention.key_length_swa", 1, _MAX)
    pattern = _ints(header.arch_value("attention.sliding_window_pattern"), n_layer)
    heads = _ints(header.arch_value("attention.head_count_kv"), n_layer)
    full_k = header.arch_int("attention.key_length", 1, _MAX)
    if not (swa_k and pattern and heads and full_k):
        return None
    swa_v = header.arch_int("attention.value_length_swa", 1, _MAX) or swa_k
    full_v = header.arch_int("attention.value_length", 1, _MAX) or full_k
    layers = list(zip(heads[:kv_layers], pattern, strict=False))
    v_max = max(h * (swa_v if windowed else full_v) for h, windowed in layers)
    full = sum(h * full_k + v_max for h, windowed in layers if not windowed)
    swa = sum(h * swa_k + v_max for h, windowed in layers if windowed)
    return full, swa


def architecture_facts(header: GGUFHeader) -> ArchitectureFacts:
    n_layer = header.arch_int("block_count", 1, _MAX) or 0
    experts = header.arch_int("expert_count", 0, _MAX) or 0
    used = header.arch_int("expert_used_count", 0, _MAX) or 0
    if experts and not 0 < used <= experts:
        used = experts  # a count we cannot trust: assume every expert is read
    lazy = _lazy_bytes(header)
    byte_share, param_share = _touched_fractions(header, used, experts) if experts or lazy else (1.0, 1.0)
    flags = recurrent_layer_flags(header, n_layer) if n_layer else []
    note = None
    arch = header.architecture
    recurrent = arch in RECURRENT_ARCHITECTURES or arch in HYBRID_ARCHITECTURES
    if flags is None:
        note = f"which layers of this {arch} model are recurrent is not known here: memory counted generously"
        kv_layers, recurrent_count = n_layer, n_layer  # every layer both: never under-estimate
    else:
        recurrent_count = sum(flags)
        kv_layers = n_layer - recurrent_count
    per_layer = recurrent_values_per_layer(header) if recurrent_count else 0
    # llama.cpp's n_layer_kv_from_start: the last ``shared_kv_layers`` reuse earlier layers' KV (Gemma 3n, 4)
    shared = header.arch_int("attention.shared_kv_layers", 0, n_layer) or 0
    kv_holding = n_layer - shared if shared and not recurrent else None
    by_layer = _per_layer_kv_values(header, kv_holding or n_layer)
    return ArchitectureFacts(
        n_expert=experts,
        n_expert_used=used,
        active_fraction=byte_share,
        active_parameter_fraction=param_share,
        kv_layers=kv_layers if recurrent else kv_holding,
        recurrent_layers=recurrent_count,
        recurrent_state_bytes=recurrent_count * per_layer * STATE_BYTES_PER_VALUE,
        rewindable=not recurrent,
        note=note,
        lazy_bytes=lazy,
        duplicated_bytes=_duplicated_bytes(header),
        kv_values_full=by_layer[0] if by_layer else None,
        kv_values_swa=by_layer[1] if by_layer else None,
    )
