"""A fast GGUF header reader: metadata and tensor directory without touching the weights.

``gguf.GGUFReader`` memory-maps the file and materialises every array (the vocabulary: tens of thousands of
strings), which takes seconds. This reader walks the header once with buffered reads, skips large arrays, keeps
small ones, and refuses absurd lengths, so a damaged or hostile file fails fast with a clear reason.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fara_desktop.engine.errors import NotAGGUFError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
_MAX_STRING = 64 * 1024 * 1024  # chat templates are kilobytes; 64 MiB is already absurd
_MAX_ARRAY = 1 << 28
_MAX_COUNT = 1 << 24
_KEEP_ARRAY = 64  # arrays up to this length are kept (per-layer patterns); longer ones only counted
_DEFAULT_ALIGNMENT = 32

# value type → struct format (scalars)
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFArraySummary:
    """A long metadata array (token list, merges): only its element type and length are kept."""

    element_type: int
    length: int


@dataclass
class GGUFHeader:
    """What a GGUF file says about itself, read in milliseconds."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensor_count: int
    tensor_bytes: int  # bytes of tensor data (the weights) after the header
    file_bytes: int
    tensor_names: list[str] = field(default_factory=list)
    parameter_count: int = 0

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    def arch_value(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)


class _Reader:
    """Walks a memory-mapped header by offset; every read is bounds-checked."""

    _u64 = struct.Struct("<Q")

    def __init__(self, data: mmap.mmap, path: Path) -> None:
        self._data = data
        self._size = len(data)
        self._path = path
        self.offset = 0

    def _need(self, n: int) -> None:
        if self.offset + n > self._size:
            raise NotAGGUFError(f"{self._path.name} is truncated: its GGUF header ends early.")

    def exact(self, n: int) -> bytes:
        self._need(n)
        chunk = self._data[self.offset : self.offset + n]
        self.offset += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self._need(size)
        value = struct.unpack_from(fmt, self._data, self.offset)[0]
        self.offset += size
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        if length > _MAX_STRING:
            raise NotAGGUFError(f"{self._path.name} is damaged: a header string claims {length} bytes.")
        return self.exact(length).decode("utf-8", errors="replace")

    def skip(self, n: int) -> None:
        self._need(n)
        self.offset += n

    def skip_strings(self, count: int) -> None:
        # The vocabulary: hundreds of thousands of strings; a tight loop over offsets, no copies.
        unpack, data, offset, size = self._u64.unpack_from, self._data, self.offset, self._size
        for _ in range(count):
            if offset + 8 > size:
                break
            offset += 8 + unpack(data, offset)[0]
        self.offset = offset
        self._need(0)

    def value(self, value_type: int) -> Any:
        if value_type in _SCALARS:
            return self.unpack(_SCALARS[value_type])
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            element_type = self.unpack("<I")
            length = self.unpack("<Q")
            if length > _MAX_ARRAY:
                raise NotAGGUFError(f"{self._path.name} is damaged: an array claims {length} elements.")
            if length <= _KEEP_ARRAY:
                return [self.value(element_type) for _ in range(length)]
            if element_type in _SCALARS:
                self.skip(struct.calcsize(_SCALARS[element_type]) * length)
            elif element_type == _STRING:
                self.skip_strings(length)
            else:
                raise NotAGGUFError(f"{self._path.name} has an array of unsupported type {element_type}.")
            return GGUFArraySummary(element_type, length)
        raise NotAGGUFError(f"{self._path.name} has a metadata value of unknown type {value_type}.")


def check_gguf_header(path: Path) -> int:
    """Raise ``NotAGGUFError`` unless the file starts like a GGUF we can read; return its version."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise NotAGGUFError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        size = "empty" if not head else "not a GGUF model file"
        raise NotAGGUFError(f"{Path(path).name} is {size} (GGUF files start with the bytes 'GGUF').")
    version = struct.unpack("<I", head[4:8])[0]
    if version not in SUPPORTED_VERSIONS:
        raise NotAGGUFError(f"{Path(path).name} uses GGUF version {version}; supported: 2 and 3.")
    return version


def read_gguf_header(path: Path | str) -> GGUFHeader:
    path = Path(path)
    version = check_gguf_header(path)
    file_bytes = path.stat().st_size
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        reader = _Reader(data, path)
        reader.skip(8)
        tensor_count = reader.unpack("<Q")
        kv_count = reader.unpack("<Q")
        if tensor_count > _MAX_COUNT or kv_count > _MAX_COUNT:
            raise NotAGGUFError(f"{path.name} is damaged: it claims {tensor_count} tensors, {kv_count} keys.")
        metadata: dict[str, Any] = {}
        for _ in range(kv_count):
            key = reader.string()
            metadata[key] = reader.value(reader.unpack("<I"))
        names: list[str] = []
        parameters = 0
        for _ in range(tensor_count):
            names.append(reader.string())
            n_dims = reader.unpack("<I")
            if n_dims > 8:
                raise NotAGGUFError(f"{path.name} is damaged: a tensor claims {n_dims} dimensions.")
            elements = 1
            for _ in range(n_dims):
                elements *= reader.unpack("<Q")
            parameters += elements
            reader.skip(4 + 8)  # type, offset
        alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT)) or _DEFAULT_ALIGNMENT
        header_end = reader.offset
    data_start = -(-header_end // alignment) * alignment
    if tensor_count and data_start > file_bytes:
        raise NotAGGUFError(f"{path.name} is truncated: it has no tensor data.")
    return GGUFHeader(
        path=path,
        version=version,
        metadata=metadata,
        tensor_count=tensor_count,
        tensor_bytes=max(0, file_bytes - data_start),
        file_bytes=file_bytes,
        tensor_names=names,
        parameter_count=parameters,
    )
