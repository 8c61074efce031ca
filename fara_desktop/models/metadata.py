"""What a person (and the fit estimate) needs to know about a GGUF model, read from its header and cached."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fara_desktop.atomic_files import save_cache_file
from fara_desktop.models.gguf_file import GGUFArraySummary, GGUFHeader, read_gguf_header

log = logging.getLogger(__name__)

# llama.cpp's enum llama_ftype → the name people know.
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE",
}  # fmt: skip
_INSTRUCT_HINTS = re.compile(r"instruct|chat|\bit\b|-it[-.]|assistant|\brl\b", re.IGNORECASE)
CACHE_VERSION = 3


def _first_int(value: Any) -> int | None:
    """Per-layer arrays (some architectures vary heads by layer) count by their largest entry."""
    if isinstance(value, list):
        numbers = [int(v) for v in value if isinstance(v, (int, float))]
        return max(numbers) if numbers else None
    return int(value) if isinstance(value, (int, float)) else None


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

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.weights_bytes / self.parameters if self.parameters else 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _vocab_size(header: GGUFHeader) -> int | None:
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, GGUFArraySummary):
        return tokens.length
    if isinstance(tokens, list):
        return len(tokens)
    return _first_int(header.arch_value("vocab_size"))


def metadata_from_header(
    header: GGUFHeader, display_name: str | None = None, total_bytes: int | None = None
) -> ModelMetadata:
    meta = header.metadata
    n_head = _first_int(header.arch_value("attention.head_count"))
    n_embd = _first_int(header.arch_value("embedding_length"))
    head_dim_k = _first_int(header.arch_value("attention.key_length"))
    if head_dim_k is None and n_head and n_embd:
        head_dim_k = n_embd // n_head
    head_dim_v = _first_int(header.arch_value("attention.value_length")) or head_dim_k
    n_head_kv = _first_int(header.arch_value("attention.head_count_kv")) or n_head
    name = display_name or str(meta.get("general.name") or header.path.stem)
    has_template = bool(str(meta.get("tokenizer.chat_template", "")).strip())
    file_type = meta.get("general.file_type")
    quantization = FILE_TYPES.get(int(file_type), f"type {file_type}") if file_type is not None else "unknown"
    extra = (total_bytes or header.file_bytes) - header.file_bytes
    hint_text = " ".join(str(meta.get(k, "")) for k in ("general.name", "general.finetune")) + " " + header.path.name
    return ModelMetadata(
        path=str(header.path),
        name=name,
        architecture=header.architecture,
        size_label=meta.get("general.size_label"),
        parameters=header.parameter_count,
        quantization=quantization,
        context_length=_first_int(header.arch_value("context_length")),
        n_layer=_first_int(header.arch_value("block_count")),
        n_embd=n_embd,
        n_ff=_first_int(header.arch_value("feed_forward_length")),
        n_vocab=_vocab_size(header),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        sliding_window=_first_int(header.arch_value("attention.sliding_window")),
        has_chat_template=has_template,
        license=meta.get("general.license"),
        file_bytes=header.file_bytes + extra,
        weights_bytes=header.tensor_bytes + extra,
        instruct=has_template or bool(_INSTRUCT_HINTS.search(hint_text)),
    )


class MetadataCache:
    """Header facts cached in a JSON file, keyed by (path, size, mtime): a rescan reads no unchanged file."""

    def __init__(self, file: Path | None) -> None:
        self._file = file
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty = False
        if file and file.is_file():
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
                if data.get("version") == CACHE_VERSION:
                    self._entries = data.get("entries", {})
            except (OSError, ValueError) as exc:
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
        if cached and cached.get("stamp") == stamp:
            return ModelMetadata(**cached["metadata"])
        header = read_gguf_header(header_path or path)
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
