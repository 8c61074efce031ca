"""What a person (and the fit estimate) needs to know about a GGUF model, read from its header and cached."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fara_desktop.files.atomic import save_cache_file
from fara_desktop.models.architecture import architecture_facts
from fara_desktop.models.gguf_checks import check_loadable
from fara_desktop.models.gguf_file import GGUFArraySummary, GGUFHeader, read_gguf_header
from fara_desktop.models.naming import MAX_NAME, model_display_name
from fara_desktop.text.untrusted import one_line

log = logging.getLogger(__name__)

# llama.cpp's enum llama_ftype → the name people know.
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}
_INSTRUCT_HINTS = re.compile(r"instruct|chat|\bit\b|-it[-.]|assistant|\brl\b", re.IGNORECASE)
CACHE_VERSION = 9  # 9: lazy tables, per-layer KV widths; 8: experts and recurrent layers; 7: one display name


@dataclass(frozen=True)
class ModelMetadata:
    """A model file's facts: identity, size, quantization, and the shapes that size its KV cache."""

    path: str
    name: str
    architecture: str
    size_label: str | None
    parameters: int
    quantization: str
    context_length: int | None
    n_layer: int | None
    n_embd: int | None
    n_ff: int | None
    n_vocab: int | None
    n_head: int | None
    n_head_kv: int | None
    head_dim_k: int | None
    head_dim_v: int | None
    sliding_window: int | None
    has_chat_template: bool
    license: str | None
    file_bytes: int
    weights_bytes: int
    instruct: bool
    embedding: bool = False  # a sentence embedder (document search), not a chat model
    # Mixtures of experts and recurrent layers (``architecture.py``): the defaults describe a dense transformer.
    n_expert: int = 0
    n_expert_used: int = 0
    active_fraction: float = 1.0  # of the weights' bytes (and, below, of the parameters) one generated token reads
    active_parameter_fraction: float = 1.0
    kv_layers: int | None = None  # layers that hold a KV cache; None: all of them
    recurrent_layers: int = 0
    recurrent_state_bytes: int = 0  # per sequence: what the recurrent layers keep, whatever the context
    rewindable: bool = True  # its context can be cut back to a prefix (not so with recurrent state)
    architecture_note: str | None = None
    lazy_weights_bytes: int = 0  # tables kept on disk, a row read per token (Gemma 4's per-layer embeddings)
    duplicated_weights_bytes: int = 0  # a tied output table llama.cpp loads a second time (Gemma 4)
    kv_values_full: int | None = None  # KV values per token over the layers that keep one, where widths differ
    kv_values_swa: int | None = None  # by layer (Gemma 4): the global layers', the windowed layers'

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.weights_bytes / self.parameters if self.parameters else 0.0

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 1 and 0 < self.n_expert_used < self.n_expert

    @property
    def active_weights_bytes(self) -> int:
        """Bytes of weights a generated token reads: all but the experts it is not routed to and the rows of a
        lazy table it does not need."""
        return int(self.weights_bytes * self.active_fraction)

    @property
    def resident_weights_bytes(self) -> int:
        """Bytes of weights in memory once loaded: all but the lazy tables, which stay on disk, and a duplicated
        table twice."""
        return self.weights_bytes - self.lazy_weights_bytes + self.duplicated_weights_bytes

    @property
    def active_parameters(self) -> int:
        return int(self.parameters * self.active_parameter_fraction)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_MAX_DIM = 1 << 24  # far above any real width, depth or head count; a bigger value is damage
_MAX_CONTEXT = 1 << 24


def _vocab_size(header: GGUFHeader) -> int | None:
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, GGUFArraySummary):
        return tokens.length
    if isinstance(tokens, list):
        return len(tokens)
    return header.arch_int("vocab_size", 1, _MAX_DIM)


def _quantization(header: GGUFHeader) -> str:
    file_type = header.int_value("general.file_type", 0, 1 << 16)
    if file_type is None:
        return "unknown"
    return FILE_TYPES.get(file_type, f"type {file_type}")


def header_display_name(header: GGUFHeader) -> str:
    """The model's one display name, from its file's name and the GGUF's name fields (see ``naming``)."""
    return model_display_name(
        header.path.name,
        header.str_value("general.name", 1024),
        header.str_value("general.basename", 256),
        header.str_value("general.size_label", 64),
    )


def metadata_from_header(
    header: GGUFHeader, display_name: str | None = None, total_bytes: int | None = None
) -> ModelMetadata:
    """Every value is checked for type and range (a wrong one counts as missing); names are cleaned of control
    characters and capped, since they are shown in labels, logs and terminals."""
    n_head = header.arch_int("attention.head_count", 1, _MAX_DIM)
    n_embd = header.arch_int("embedding_length", 1, _MAX_DIM)
    head_dim_k = header.arch_int("attention.key_length", 1, _MAX_DIM)
    if head_dim_k is None and n_head and n_embd:
        head_dim_k = n_embd // n_head
    head_dim_v = header.arch_int("attention.value_length", 1, _MAX_DIM) or head_dim_k
    n_head_kv = header.arch_int("attention.head_count_kv", 1, _MAX_DIM) or n_head
    name = one_line(display_name, MAX_NAME) if display_name else header_display_name(header)
    template = header.str_value("tokenizer.chat_template", 1 << 20)
    has_template = bool(template and template.strip())
    extra = max(0, (total_bytes or header.file_bytes) - header.file_bytes)
    hint_text = (
        " ".join(header.str_value(k, 1024) or "" for k in ("general.name", "general.finetune")) + " " + header.path.name
    )
    size_label = header.str_value("general.size_label", 64)
    license_name = header.str_value("general.license", 256)
    facts = architecture_facts(header)
    return ModelMetadata(
        path=str(header.path),
        name=name,
        architecture=one_line(header.architecture, 64),
        size_label=one_line(size_label, 32) if size_label else None,
        parameters=header.parameter_count,
        quantization=_quantization(header),
        context_length=header.arch_int("context_length", 1, _MAX_CONTEXT),
        n_layer=header.arch_int("block_count", 1, _MAX_DIM),
        n_embd=n_embd,
        n_ff=header.arch_int("feed_forward_length", 1, _MAX_DIM),
        n_vocab=_vocab_size(header),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        sliding_window=header.arch_int("attention.sliding_window", 1, _MAX_CONTEXT),
        has_chat_template=has_template,
        license=one_line(license_name, 64) if license_name else None,
        file_bytes=header.file_bytes + extra,
        weights_bytes=header.tensor_bytes + extra,
        instruct=has_template or bool(_INSTRUCT_HINTS.search(hint_text)),
        embedding=is_embedding_architecture(header.architecture, header.arch_int("pooling_type", 0, 16)),
        n_expert=facts.n_expert,
        n_expert_used=facts.n_expert_used,
        active_fraction=facts.active_fraction,
        active_parameter_fraction=facts.active_parameter_fraction,
        kv_layers=facts.kv_layers,
        recurrent_layers=facts.recurrent_layers,
        recurrent_state_bytes=facts.recurrent_state_bytes,
        rewindable=facts.rewindable,
        architecture_note=facts.note,
        lazy_weights_bytes=facts.lazy_bytes,
        duplicated_weights_bytes=facts.duplicated_bytes,
        kv_values_full=facts.kv_values_full,
        kv_values_swa=facts.kv_values_swa,
    )


# Encoder architectures llama.cpp runs for sentence embeddings (bge, e5, all-MiniLM, nomic-embed, jina, …).
EMBEDDING_ARCHITECTURES = frozenset(
    {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert", "neo-bert", "t5encoder"}
)


def is_embedding_architecture(architecture: str, pooling_type: int | None = None) -> bool:
    """An embedder: an encoder architecture, or a decoder converted with a pooling type (Qwen3-Embedding)."""
    return architecture in EMBEDDING_ARCHITECTURES or bool(pooling_type)


class MetadataCache:
    """Header facts cached in a JSON file, keyed by (path, size, mtime): a rescan reads no unchanged file."""

    def __init__(self, file: Path | None) -> None:
        self._file = file
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty = False
        if file and file.is_file():
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
                if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
                    entries = data.get("entries")
                    self._entries = entries if isinstance(entries, dict) else {}
            except (OSError, ValueError, RecursionError) as exc:
                log.warning("Ignoring the unreadable metadata cache %s: %s", file, exc)

    def read(
        self,
        path: Path,
        display_name: str | None = None,
        header_path: Path | None = None,
        total_bytes: int | None = None,
    ) -> ModelMetadata:
        """Metadata of ``path``; the header may live in another file (``header_path``: first split or chunk)."""
        stat = path.stat() if path.exists() else (header_path or path).stat()
        key = str(path)
        stamp = [stat.st_size, stat.st_mtime_ns, display_name, total_bytes]
        cached = self._entries.get(key)
        if isinstance(cached, dict) and cached.get("stamp") == stamp:
            try:  # the cache is a file on disk like any other: a damaged entry is read again
                return ModelMetadata(**cached["metadata"])
            except (TypeError, KeyError):
                log.info("metadata cache entry for %s is damaged; reading the file again", path.name)
        header = read_gguf_header(header_path or path)
        check_loadable(header, total_bytes)  # a file llama.cpp would refuse, or abort on, is never listed as usable
        if header_path is not None:
            header.path = path
        metadata = metadata_from_header(header, display_name, total_bytes)
        self._entries[key] = {"stamp": stamp, "metadata": metadata.to_json()}
        self._dirty = True
        return metadata

    def save(self) -> None:
        if not self._file or not self._dirty:
            return
        if save_cache_file(self._file, {"version": CACHE_VERSION, "entries": self._entries}):
            self._dirty = False
