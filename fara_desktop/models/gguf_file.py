"""A fast GGUF header reader: metadata and tensor directory without touching the weights.

``gguf.GGUFReader`` memory-maps the file and materialises every array (the vocabulary: tens of thousands of
strings), which takes seconds. This reader walks the header once, skips large arrays, keeps small ones, and
refuses absurd lengths, so a damaged or hostile file fails fast with a clear reason.

Every GGUF is a stranger's file. The reader therefore opens only regular files, without blocking (a FIFO named
``x.gguf`` must not hang a scan); it never recurses (arrays of arrays, which llama.cpp itself refuses, are refused
here too); it keeps at most ``_KEEP_STRING`` characters of a string it does not need whole; and callers read values
through ``GGUFHeader.int_value``/``str_value``, which check type and range, never the raw dictionary.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fara_desktop.files.regular import NotARegularFileError, open_regular
from fara_desktop.vocabulary.errors import NotAGGUFError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
_MAX_STRING = 64 * 1024 * 1024  # chat templates are kilobytes; 64 MiB is already absurd
_MAX_ARRAY = 1 << 28
_MAX_KEYS = 1 << 16  # real models have about 40 keys
_MAX_TENSORS = 1 << 20  # an 8B model has ~300 tensors; large mixtures of experts a few thousand
_KEEP_ARRAY = 512  # arrays up to this length (per-layer patterns, up to 512 layers) are kept; longer ones counted
_KEEP_STRING = 64 * 1024  # strings longer than this are kept as a summary…
_KEEP_WHOLE = {"tokenizer.chat_template": 1024 * 1024}  # …except these, which are needed whole (up to a limit)
_DEFAULT_ALIGNMENT = 32
_MAX_ALIGNMENT = 1 << 16

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


@dataclass(frozen=True)
class GGUFStringSummary:
    """A string too long to keep (nothing we use is that long): only its length is kept."""

    length: int


def _as_int(value: Any) -> int | None:
    """An integer from an integer or an integral, finite float; anything else (NaN, strings, lists) is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One entry of the tensor directory: where a tensor's data lies and what shape and type it claims."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the tensor data


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
    tensors: list[GGUFTensorInfo] = field(default_factory=list)
    alignment: int = _DEFAULT_ALIGNMENT

    @property
    def architecture(self) -> str:
        return self.str_value("general.architecture", 64) or "unknown"

    def arch_value(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)

    def str_value(self, key: str, limit: int = 256) -> str | None:
        """A string value cut to ``limit`` characters; None when missing or not a string."""
        value = self.metadata.get(key)
        return value[:limit] if isinstance(value, str) else None

    def int_value(self, key: str, low: int = 0, high: int = 1 << 40) -> int | None:
        """An integer value within [low, high]; None when missing, of another type, NaN or out of range. A
        per-layer array counts by its largest entry, when every entry is valid."""
        value = self.metadata.get(key)
        if isinstance(value, list):
            numbers = [_as_int(v) for v in value]
            if not numbers or any(n is None for n in numbers):
                return None
            value = max(n for n in numbers if n is not None)
        number = _as_int(value)
        return number if number is not None and low <= number <= high else None

    def arch_int(self, key: str, low: int = 0, high: int = 1 << 40) -> int | None:
        return self.int_value(f"{self.architecture}.{key}", low, high)


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

    def string(self, keep: int = _KEEP_STRING) -> str | GGUFStringSummary:
        length = self.unpack("<Q")
        if length > _MAX_STRING:
            raise NotAGGUFError(f"{self._path.name} is damaged: a header string claims {length} bytes.")
        if length > keep:
            self.skip(length)
            return GGUFStringSummary(length)
        return self.exact(length).decode("utf-8", errors="replace")

    def key(self) -> str:
        name = self.string(keep=4096)
        if not isinstance(name, str):
            raise NotAGGUFError(f"{self._path.name} is damaged: a key name is {name.length} bytes long.")
        return name

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

    def token_list(self, value_type: int) -> Any:
        """The vocabulary, walked once: every token must be there once. llama.cpp asserts it and, on a duplicate,
        aborts the whole process (GGML_ASSERT in llama-vocab.cpp) — a stranger's file would take the app down."""
        if value_type != _ARRAY:
            return self.value(value_type, _KEEP_STRING)
        start = self.offset
        element_type = self.unpack("<I")
        length = self.unpack("<Q")
        if element_type != _STRING or length > _MAX_ARRAY:
            self.offset = start
            return self.value(value_type, _KEEP_STRING)
        unpack, data, offset, size = self._u64.unpack_from, self._data, self.offset, self._size
        seen: set[bytes] = set()
        for _ in range(length):
            if offset + 8 > size:
                break
            end = offset + 8 + unpack(data, offset)[0]
            token = data[offset + 8 : end]
            if token in seen:
                shown = token[:40].decode("utf-8", errors="replace")
                raise NotAGGUFError(
                    f"{self._path.name} is damaged: its vocabulary lists the token {shown!r} twice, and llama.cpp "
                    "would stop the whole app loading it."
                )
            seen.add(token)
            offset = end
        self.offset = offset
        self._need(0)
        return GGUFArraySummary(element_type, length)

    def scalar_or_string(self, value_type: int, keep: int = _KEEP_STRING) -> Any:
        if value_type in _SCALARS:
            return self.unpack(_SCALARS[value_type])
        if value_type == _STRING:
            return self.string(keep)
        raise NotAGGUFError(f"{self._path.name} has a metadata value of unknown type {value_type}.")

    def value(self, value_type: int, keep: int) -> Any:
        if value_type != _ARRAY:
            return self.scalar_or_string(value_type, keep)
        element_type = self.unpack("<I")
        length = self.unpack("<Q")
        if element_type == _ARRAY:  # llama.cpp refuses nested arrays too; refusing them keeps this loop flat
            raise NotAGGUFError(f"{self._path.name} has an array of arrays, which llama.cpp cannot load.")
        if element_type not in _SCALARS and element_type != _STRING:
            raise NotAGGUFError(f"{self._path.name} has an array of unknown type {element_type}.")
        if length > _MAX_ARRAY:
            raise NotAGGUFError(f"{self._path.name} is damaged: an array claims {length} elements.")
        if length <= _KEEP_ARRAY:
            return [self.scalar_or_string(element_type) for _ in range(length)]
        if element_type in _SCALARS:
            self.skip(struct.calcsize(_SCALARS[element_type]) * length)
        else:
            self.skip_strings(length)
        return GGUFArraySummary(element_type, length)


def _open_regular_file(path: Path) -> int:
    try:
        return open_regular(path)
    except NotARegularFileError as exc:
        raise NotAGGUFError(str(exc)) from exc
    except OSError as exc:
        raise NotAGGUFError(f"Cannot read {Path(path).name}: {exc.strerror or exc}") from exc


def _check_magic(path: Path, head: bytes) -> int:
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        size = "empty" if not head else "not a GGUF model file"
        raise NotAGGUFError(f"{path.name} is {size} (GGUF files start with the bytes 'GGUF').")
    version = struct.unpack("<I", head[4:8])[0]
    if version not in SUPPORTED_VERSIONS:
        raise NotAGGUFError(f"{path.name} uses GGUF version {version}; supported: 2 and 3.")
    return int(version)


def _alignment(path: Path, metadata: dict[str, Any]) -> int:
    if "general.alignment" not in metadata:
        return _DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    number = _as_int(value) if not isinstance(value, float) else None  # llama.cpp wants a uint32
    if number is None or not 0 < number <= _MAX_ALIGNMENT or number & (number - 1):
        raise NotAGGUFError(f"{path.name} is damaged: general.alignment is {value!r:.40}, not a power of two.")
    return number


def read_gguf_header(path: Path | str) -> GGUFHeader:
    path = Path(path)
    fd = _open_regular_file(path)
    try:
        file_bytes = os.fstat(fd).st_size
        if file_bytes == 0:
            raise NotAGGUFError(f"{path.name} is empty (GGUF files start with the bytes 'GGUF').")
        version = _check_magic(path, os.pread(fd, 8, 0))
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            return _parse(path, data, version, file_bytes)
    except OSError as exc:
        raise NotAGGUFError(f"Cannot read {path.name}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _parse(path: Path, data: mmap.mmap, version: int, file_bytes: int) -> GGUFHeader:
    reader = _Reader(data, path)
    reader.skip(8)
    tensor_count = reader.unpack("<Q")
    kv_count = reader.unpack("<Q")
    if tensor_count > _MAX_TENSORS or kv_count > _MAX_KEYS:
        raise NotAGGUFError(f"{path.name} is damaged: it claims {tensor_count} tensors, {kv_count} keys.")
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = reader.key()
        if key == "tokenizer.ggml.tokens":
            metadata[key] = reader.token_list(reader.unpack("<I"))
        else:
            metadata[key] = reader.value(reader.unpack("<I"), _KEEP_WHOLE.get(key, _KEEP_STRING))
    names: list[str] = []
    tensors: list[GGUFTensorInfo] = []
    parameters = 0
    for _ in range(tensor_count):
        name = reader.key()
        names.append(name)
        n_dims = reader.unpack("<I")
        if n_dims > 8:
            raise NotAGGUFError(f"{path.name} is damaged: a tensor claims {n_dims} dimensions.")
        shape = tuple(reader.unpack("<Q") for _ in range(n_dims))
        parameters += math.prod(shape)  # Python integers: a hostile shape cannot overflow here
        tensors.append(GGUFTensorInfo(name[:256], shape, reader.unpack("<I"), reader.unpack("<Q")))
    alignment = _alignment(path, metadata)
    data_start = -(-reader.offset // alignment) * alignment
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
        tensors=tensors,
        alignment=alignment,
    )
