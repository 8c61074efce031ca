"""Chats' KV states on disk, so a chat reopened after a restart is restored in about a second instead of re-read.

A file holds one conversation's state for one model: llama.cpp's sequence data (``llama_state_seq_get_data``) and
the exact tokens it covers, behind a header that binds it to the model file's identity (path, size, and a hash of a
sample of its content: ``cp -p``, rsync and tar keep size and modification time, so another model put at the same
path must not be taken for the first), the context it was made in (length, KV type, flash attention) and the
llama-cpp-python version. A file is checked before llama.cpp sees a byte of it: its size, its header, its identity,
and a CRC-32 of its tokens and data (6 GB/s here: 0.1 s for a 590 MB state). A truncated, foreign or corrupt file is
deleted and the chat is simply re-read.

Files are private (0600, in a 0700 folder), written through a temporary file and renamed (never half of one), and
kept within a byte budget, the least recently used first out. Writing runs on its own thread (``KVDiskWriter``):
the inference thread only copies the state out of llama.cpp.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import queue
import secrets
import struct
import tempfile
import threading
import zlib
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from fara_desktop.engine.kv_states import KVSnapshot, usable_prefix, zeroed_buffer
from fara_desktop.files.atomic import write_bytes_atomically
from fara_desktop.files.regular import read_regular

log = logging.getLogger(__name__)

MAGIC = b"FARAKV1\n"
_PREFIX = struct.Struct("<8sI")  # magic, header length
_MAX_HEADER = 4096
_MAX_TOKENS = 1 << 24
SUFFIX = ".kvstate"
# A 3,000-token chat at 1.7B (no GQA, f16) is a 590 MB state, 2,000 tokens at 8B (GQA) 262 MB: 4 GiB keeps the
# last 6-15 long chats, and never more than a tenth of the disk's free space (see ``budget_within``).
DEFAULT_BUDGET_BYTES = 4 << 30
CHECKPOINT_SLOT = "p-"  # a recurrent model's chat also keeps the state where its last prompt ended
MIN_TOKENS = 64  # a shorter state is re-read faster than a file is opened


class StateFileError(Exception):
    """A state file that cannot be used (truncated, foreign, corrupt): it is deleted and the chat re-read."""


@dataclass(frozen=True)
class StateIdentity:
    """What a state belongs to: the model file as it is now and the context it was made in."""

    model: str  # resolved path
    size: int
    content: str  # a hash of the file's header and a sample of its tensor data (``content_sample``)
    n_ctx: int
    kv_type: str
    flash_attn: bool
    engine: str  # llama-cpp-python's version: the state format is llama.cpp's own

    @property
    def key(self) -> str:
        text = json.dumps([self.model, self.size, self.content, self.n_ctx, self.kv_type, self.flash_attn, self.engine])
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @classmethod
    def of(cls, path: Path, n_ctx: int, kv_type: str, flash_attn: bool, engine: str) -> StateIdentity:
        resolved = path.resolve()
        return cls(str(resolved), resolved.stat().st_size, content_sample(resolved), n_ctx, kv_type, flash_attn, engine)


SAMPLE_HEAD = 4 << 20  # the GGUF header (metadata, tensor directory) and the first tensors
SAMPLE_BLOCKS = 64
SAMPLE_BLOCK = 64 << 10
_samples: dict[tuple[str, int, int, int, int], str] = {}
_samples_lock = threading.Lock()


def content_sample(path: Path) -> str:
    """A hash of the file's first 4 MiB, 64 blocks of 64 KiB spread evenly over the rest and its last block
    (8 MiB read: ~10 ms warm, well under a second cold, at any model size). Computed once per file as it is on disk
    (its inode and change time included, which a copy over it changes)."""
    info = path.stat()
    key = (str(path), info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    with _samples_lock:
        known = _samples.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256(str(info.st_size).encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(SAMPLE_HEAD))
        rest = max(info.st_size - SAMPLE_HEAD, 0)
        for number in range(SAMPLE_BLOCKS + 1):
            handle.seek(SAMPLE_HEAD + rest * number // SAMPLE_BLOCKS - (SAMPLE_BLOCK if number == SAMPLE_BLOCKS else 0))
            digest.update(handle.read(SAMPLE_BLOCK))
    sample = digest.hexdigest()[:32]
    with _samples_lock:
        _samples[key] = sample
    return sample


@dataclass(frozen=True)
class StoredState:
    """A state file found on disk (its header read, its data not)."""

    path: Path
    conversation: str
    tokens: tuple[int, ...]
    size: int


def budget_within(folder: Path, wanted: int) -> int:
    """The budget, at most a tenth of the free space of the disk the states go to (and of the space they use)."""
    try:
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize if hasattr(os, "statvfs") else wanted
    except OSError:
        return wanted
    used = sum(p.stat().st_size for p in _state_files(folder))
    return max(0, min(wanted, (free + used) // 10))


def room_for(folder: Path, size: int) -> bool:
    """Whether ``size`` bytes can be written to the disk of ``folder`` and leave the disk's reserve free (a tenth of
    it, at most 1 GiB): a state is only a speed-up, and a full disk would make the chats' database and the settings
    fail to save meanwhile."""
    if not hasattr(os, "statvfs"):
        return True
    probe = folder if folder.exists() else folder.parent
    try:
        disk = os.statvfs(probe)
    except OSError:
        return True
    reserve = min(1 << 30, disk.f_blocks * disk.f_frsize // 10)
    return disk.f_bavail * disk.f_frsize - size >= reserve


def _state_files(folder: Path) -> Iterator[Path]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return iter(())
    return iter(p for p in entries if p.name.endswith(SUFFIX) and p.is_file() and not p.is_symlink())


KEY_FILE = "state.key"


def _state_key(folder: Path) -> bytes:
    """The key of the states' seals: made once (random, 0600 in the 0700 folder), read after; one that cannot be
    kept lives as long as the process (its states are then refused at the next start and read again)."""
    path = folder / KEY_FILE
    with contextlib.suppress(OSError):
        key = read_regular(path, 64)
        if len(key) == 32:
            return key
    key = secrets.token_bytes(32)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_bytes_atomically(path, key)
    except OSError as exc:
        log.warning("The key of the chats' saved readings could not be kept: %s", exc)
    return key


def _unfinished_files(folder: Path) -> Iterator[Path]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return iter(())
    return iter(
        p for p in entries if p.name.startswith(".") and p.name.endswith(".tmp") and p.is_file() and not p.is_symlink()
    )


def _checksum(tokens: bytes, data: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(data, zlib.crc32(tokens))


class KVDiskStore:
    """The folder of state files; safe to use from the inference thread and the writer thread at once."""

    def __init__(self, folder: Path, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.folder = folder
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()  # deletions (the budget) against reads
        self._secret: bytes | None = None  # the seal's key (``seal``), read or made on first use
        self._key_lock = threading.Lock()
        self.sweep_unfinished()

    def sweep_unfinished(self) -> int:
        """Delete the temporary files of writes that never ended (the app was killed while writing: hundreds of MB
        each). Only the app's one window writes states, and it calls this before its writer starts."""
        removed = 0
        for path in _unfinished_files(self.folder):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
        return removed

    def file_for(self, conversation: Hashable, identity: StateIdentity, slot: str = "") -> Path:
        """``slot``: a second state of the chat (``CHECKPOINT_SLOT``: where its last prompt ended)."""
        return self.folder / f"c{conversation}-{slot}{identity.key}{SUFFIX}"

    # ------------------------------------------------------------------ writing (the writer thread)

    def save(
        self, conversation: Hashable, identity: StateIdentity, snapshot: KVSnapshot, slot: str = ""
    ) -> Path | None:
        """Write the state atomically, then keep the folder within the budget; None when it was not written (too
        short, larger than the budget, or the disk refused: states are only a speed-up, so that is logged)."""
        if len(snapshot.tokens) < MIN_TOKENS or len(snapshot.data) > self.budget_bytes:
            return None
        if not room_for(self.folder, len(snapshot.data) + 4 * len(snapshot.tokens) + _MAX_HEADER):
            log.info("A chat's state was not saved: the disk is nearly full (the chat will be read again)")
            return None
        tokens = struct.pack(f"<{len(snapshot.tokens)}i", *snapshot.tokens)
        fields = {
            "identity": identity.key,
            "conversation": str(conversation),
            "tokens": len(snapshot.tokens),
            "data": len(snapshot.data),
            "crc32": _checksum(tokens, snapshot.data),
        }
        header = json.dumps({**fields, "seal": self.seal(fields, tokens)}).encode()
        target = self.file_for(conversation, identity, slot)
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp_name = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.folder)
        except OSError as exc:
            log.warning("A chat's state was not saved: %s", exc)
            return None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_PREFIX.pack(MAGIC, len(header)))
                handle.write(header)
                handle.write(tokens)
                handle.write(snapshot.data)
                handle.flush()
                os.fsync(handle.fileno())
            with self._lock:
                os.replace(tmp_name, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            log.warning("A chat's state was not saved: %s", exc)
            return None
        self.enforce_budget(keep=target)
        return target

    def enforce_budget(self, keep: Path | None = None) -> None:
        """Delete the least recently used files until the folder holds at most the budget."""
        with self._lock:
            files = []
            for path in _state_files(self.folder):
                with contextlib.suppress(OSError):
                    info = path.stat()
                    files.append((info.st_mtime_ns, info.st_size, path))
            files.sort()
            total = sum(size for _, size, _ in files)
            for _, size, path in files:
                if total <= self.budget_bytes:
                    break
                if path == keep:
                    continue
                with contextlib.suppress(OSError):
                    path.unlink()
                    total -= size

    # ------------------------------------------------------------------ reading (the inference thread)

    def load(self, path: Path, identity: StateIdentity) -> KVSnapshot | None:
        """The state in ``path``, checked whole; a file that fails a check is deleted (logged) and None returned."""
        try:
            with self._lock, open(path, "rb") as handle:
                header, tokens = self._read_header(handle, identity, os.fstat(handle.fileno()).st_size)
                data = zeroed_buffer(header["data"])
                if handle.readinto(data) != len(data):
                    raise StateFileError("truncated data")
                packed = struct.pack(f"<{len(tokens)}i", *tokens)
                if _checksum(packed, data) != header["crc32"]:
                    raise StateFileError("checksum mismatch")
                os.utime(path)  # recently used: the budget evicts others first
        except FileNotFoundError:
            return None
        except (OSError, StateFileError) as exc:
            self._discard(path, exc)
            return None
        return KVSnapshot(tokens, data)

    def best_for(
        self,
        conversation: Hashable,
        identity: StateIdentity,
        tokens: Sequence[int],
        better_than: int = 0,
        rewindable: bool = True,
        window: int = 0,
    ) -> StoredState | None:
        """The stored state for this model sharing the longest usable prefix with ``tokens`` (more than
        ``better_than`` and ``MIN_TOKENS``; for a recurrent model, ``usable_prefix``): the chat's own first, then
        any other (a branch, an edited copy)."""
        best: StoredState | None = None
        best_length = max(better_than, MIN_TOKENS - 1)
        own = self.file_for(conversation, identity)
        candidates = sorted(self._files_of(identity), key=lambda p: p != own)
        for path in candidates:
            stored = self.header(path, identity)
            if stored is None:
                continue
            length = usable_prefix(stored.tokens, tokens, rewindable, window)
            if length > best_length:
                best, best_length = stored, length
        return best

    def header(self, path: Path, identity: StateIdentity) -> StoredState | None:
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                header, tokens = self._read_header(handle, identity, size)
        except FileNotFoundError:
            return None
        except (OSError, StateFileError) as exc:
            self._discard(path, exc)
            return None
        return StoredState(path, header["conversation"], tokens, size)

    def _files_of(self, identity: StateIdentity) -> list[Path]:
        ending = f"-{identity.key}{SUFFIX}"
        return [p for p in _state_files(self.folder) if p.name.endswith(ending)]

    def seal(self, fields: dict[str, Any], tokens: bytes) -> str:
        """What binds a file to this app's own writing: a keyed hash (the key is private to this user, in the states'
        folder) of its header's fields — its model, its chat, its sizes, its data's checksum — and its exact token
        record. A file made elsewhere (positions out of range, values that are not numbers, the tokens of another
        text over a state, every checksum made to agree) has no seal that matches and never reaches llama.cpp."""
        named = json.dumps([fields.get(k) for k in ("identity", "conversation", "tokens", "data", "crc32")])
        return hmac.new(self._key(), named.encode() + tokens, hashlib.sha256).hexdigest()

    def _key(self) -> bytes:
        with self._key_lock:  # the inference and writer threads at once made two keys, one of them never kept
            if self._secret is None:
                self._secret = _state_key(self.folder)
            return self._secret

    def _read_header(
        self, handle: BinaryIO, identity: StateIdentity, size: int
    ) -> tuple[dict[str, Any], tuple[int, ...]]:
        read = handle.read
        prefix = read(_PREFIX.size)
        if len(prefix) != _PREFIX.size:
            raise StateFileError("too short")
        magic, header_length = _PREFIX.unpack(prefix)
        if magic != MAGIC or not 0 < header_length <= _MAX_HEADER:
            raise StateFileError("not a state file")
        try:
            header = json.loads(read(header_length))
        except (ValueError, UnicodeDecodeError) as exc:
            raise StateFileError("unreadable header") from exc
        if not isinstance(header, dict) or header.get("identity") != identity.key:
            raise StateFileError("made for another model or context")
        count, data, crc = header.get("tokens"), header.get("data"), header.get("crc32")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (count, data, crc)):
            raise StateFileError("malformed header")
        assert isinstance(count, int) and isinstance(data, int)
        if not 0 < count <= min(_MAX_TOKENS, identity.n_ctx) or data <= 0:
            raise StateFileError("malformed header")
        promised = _PREFIX.size + header_length + 4 * count + data
        if size != promised:
            raise StateFileError(f"{size} bytes where the header promises {promised}")
        packed = read(4 * count)
        if len(packed) != 4 * count:
            raise StateFileError("truncated tokens")
        seal = header.get("seal")
        if not isinstance(seal, str) or not hmac.compare_digest(seal, self.seal(header, packed)):
            raise StateFileError("not written by this app (its seal does not match)")
        header["conversation"] = str(header.get("conversation", ""))
        return header, struct.unpack(f"<{count}i", packed)

    def discard(self, path: Path, why: str) -> None:
        """A state that passed every check but failed in use (llama.cpp could not decode on it): never again."""
        self._discard(path, StateFileError(why))

    def delete_file(self, path: Path) -> None:
        with self._lock, contextlib.suppress(OSError):
            path.unlink()

    def _discard(self, path: Path, why: Exception) -> None:
        log.warning("The saved state %s is not used (%s); its chat will be read again", path.name, why)
        with self._lock, contextlib.suppress(OSError):
            path.unlink()

    # ------------------------------------------------------------------ for the user

    def bytes_used(self) -> int:
        """Every state file and every write under way (its temporary file)."""
        total = 0
        for path in (*_state_files(self.folder), *_unfinished_files(self.folder)):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total

    def size_of(self, conversation: Hashable) -> int:
        """Bytes held for one chat, over every model."""
        prefix = f"c{conversation}-"
        return sum(p.stat().st_size for p in _state_files(self.folder) if p.name.startswith(prefix))

    def forget(self, conversation: Hashable | None = None) -> None:
        """Delete one chat's states (it was deleted), or all of them."""
        prefix = "" if conversation is None else f"c{conversation}-"
        with self._lock:
            for path in _state_files(self.folder):
                if path.name.startswith(prefix):
                    with contextlib.suppress(OSError):
                        path.unlink()


class KVDiskWriter:
    """One thread writing states to a ``KVDiskStore``; a newer state of a chat replaces one still waiting. Idle means
    nothing waiting *and* nothing being written; a chat discarded while its state is being written has that file
    deleted by this thread as soon as the write ends (it never lands after the chat's deletion)."""

    def __init__(self, store: KVDiskStore) -> None:
        self.store = store
        self._pending: dict[tuple[Hashable, str], tuple[StateIdentity, KVSnapshot]] = {}
        self._writing: Hashable | None = None  # the conversation whose state is being written now
        self._written: tuple[StateIdentity, KVSnapshot] | None = None  # and that state
        self._dropped = False  # it was discarded meanwhile: the file it writes is deleted once written
        self._lock = threading.Lock()
        self._written_one = threading.Condition(self._lock)  # a write ended
        self._wake: queue.Queue[tuple[Hashable, str] | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name="fara-kv-writer", daemon=True)
        self._thread.start()

    def put(self, conversation: Hashable, identity: StateIdentity, snapshot: KVSnapshot, slot: str = "") -> None:
        key = (conversation, slot)
        with self._lock:
            fresh = key not in self._pending
            self._pending[key] = (identity, snapshot)
            self._idle.clear()
            if not self._thread.is_alive():  # closed, and used again (a backend kept after its engine ended)
                self._thread = threading.Thread(target=self._run, name="fara-kv-writer", daemon=True)
                self._thread.start()
        if fresh:
            self._wake.put(key)

    def discard(self, conversation: Hashable | None = None) -> None:
        """States of ``conversation`` (None: of every chat) still waiting are not written; one being written now
        is deleted by the writer as soon as it is written. ``wait_idle`` then returns after both."""
        with self._lock:
            for key in [k for k in self._pending if conversation is None or k[0] == conversation]:
                del self._pending[key]
            if self._writing is not None and (conversation is None or self._writing == conversation):
                self._dropped = True
            self._update_idle()

    def in_flight(self, conversation: Hashable, identity: StateIdentity) -> list[KVSnapshot]:
        """The states of ``conversation`` handed over and not yet on disk (waiting, or being written): a prompt
        that needs one takes it from here rather than waiting for the disk (600 MB at 1.7B and 3,000 tokens)."""
        with self._lock:
            held = [item for key, item in self._pending.items() if key[0] == conversation]
            if self._writing == conversation and self._written is not None:
                held.append(self._written)
        return [snapshot for made_for, snapshot in held if made_for == identity]

    def wait_written(self, conversation: Hashable, timeout: float | None = None) -> bool:
        """Until no state of ``conversation`` waits or is being written (other chats' writes go on)."""
        with self._written_one:
            return self._written_one.wait_for(
                lambda: self._writing != conversation and all(key[0] != conversation for key in self._pending), timeout
            )

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every state handed over is written (and none is being written); True when they are."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what waits (up to ``timeout`` seconds), then end the thread."""
        self._wake.put(None)
        self._thread.join(timeout)

    def _update_idle(self) -> None:
        """Under the lock: idle when nothing waits and nothing is being written."""
        if not self._pending and self._writing is None:
            self._idle.set()

    def _run(self) -> None:
        while True:
            key = self._wake.get()
            if key is None:
                with self._lock:
                    if self._pending:  # handed over after ``close`` queued the end: written first, then the end
                        self._wake.put(None)
                        continue
                return
            with self._lock:
                item = self._pending.pop(key, None)
                self._writing, self._dropped = (key[0] if item is not None else None), False
                self._written = item
            written: Path | None = None
            if item is not None:
                try:
                    written = self.store.save(key[0], *item, slot=key[1])
                except Exception:  # the thread must survive anything: a state is only a speed-up
                    log.exception("Saving a chat's state failed")
            with self._lock:
                if self._dropped and written is not None:
                    self.store.delete_file(written)  # its chat was deleted while it was being written
                self._writing, self._written, self._dropped = None, None, False
                self._update_idle()
                self._written_one.notify_all()


def chat_state_store(data_folder: Path, budget_gb: float) -> KVDiskStore:
    """The app's store of chats' states, in its private data folder (a budget of 0 GB keeps none)."""
    folder = data_folder / "chat-states"
    return KVDiskStore(folder, budget_within(folder, int(max(0.0, budget_gb) * (1 << 30))))
