"""Chats' KV states on disk (no llama.cpp): private atomic files, checked before use, within a byte budget."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fara_desktop.engine.kv_disk import MIN_TOKENS, KVDiskStore, KVDiskWriter, StateIdentity
from fara_desktop.engine.kv_states import KVSnapshot

IDENTITY = StateIdentity("/models/a.gguf", 1000, "1", 4096, "f16", False, "0.3.36")
OTHER_MODEL = StateIdentity("/models/b.gguf", 1000, 1, 4096, "f16", False, "0.3.36")


def snapshot(count: int = 200, fill: int = 7, size: int = 10_000, first: int = 0) -> KVSnapshot:
    return KVSnapshot(tuple(range(first, first + count)), bytearray([fill]) * size)


def test_a_state_is_written_privately_and_atomically_and_read_back_whole(tmp_path: Path):
    store = KVDiskStore(tmp_path / "kv")
    path = store.save(3, IDENTITY, snapshot())
    assert path is not None and path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "kv").stat().st_mode) == 0o700
    assert [p.name for p in (tmp_path / "kv").iterdir() if p.name != "state.key"] == [path.name]  # no temporary file
    loaded = store.load(path, IDENTITY)
    assert loaded is not None and loaded.tokens == tuple(range(200)) and loaded.data == bytearray([7]) * 10_000


def damage_truncate(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 100)


def damage_flip_a_data_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-50] ^= 0xFF
    path.write_bytes(bytes(data))


def damage_flip_a_token(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-10_000 - 40] ^= 0x01
    path.write_bytes(bytes(data))


def damage_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:8] + b"\xff\xff\xff\x7f" + data[12:])


def damage_grow(path: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(b"\0" * 64)


@pytest.mark.parametrize(
    "damage", [damage_truncate, damage_flip_a_data_byte, damage_flip_a_token, damage_header, damage_grow]
)
def test_a_damaged_file_is_refused_and_deleted(tmp_path: Path, damage):
    store = KVDiskStore(tmp_path)
    path = store.save(3, IDENTITY, snapshot())
    assert path is not None
    damage(path)
    assert store.best_for(3, IDENTITY, range(300)) is None or store.load(path, IDENTITY) is None
    assert not path.exists()


def test_a_state_of_another_model_or_context_is_not_used(tmp_path: Path):
    store = KVDiskStore(tmp_path)
    path = store.save(3, IDENTITY, snapshot())
    assert path is not None
    assert store.best_for(3, OTHER_MODEL, range(300)) is None  # another model's file is not even looked at
    foreign = store.file_for(3, OTHER_MODEL)
    path.rename(foreign)  # a file under another model's name: its header says whose it is
    assert store.load(foreign, OTHER_MODEL) is None
    assert not foreign.exists()


def test_the_state_sharing_the_longest_prefix_is_chosen(tmp_path: Path):
    store = KVDiskStore(tmp_path)
    store.save(1, IDENTITY, snapshot(count=300))
    store.save(2, IDENTITY, snapshot(count=150))
    prompt = [*range(250), 9999]
    best = store.best_for(2, IDENTITY, prompt)
    assert best is not None and best.conversation == "1"  # a branch of chat 1: 250 shared tokens beat 150
    assert store.best_for(2, IDENTITY, prompt, better_than=250) is None  # nothing better than what is in the context
    assert store.best_for(2, IDENTITY, [5, 6, 7]) is None


def test_short_states_are_not_written(tmp_path: Path):
    store = KVDiskStore(tmp_path)
    assert store.save(1, IDENTITY, snapshot(count=MIN_TOKENS - 1)) is None
    assert [p for p in tmp_path.iterdir() if p.name != "state.key"] == []


def test_the_budget_evicts_the_least_recently_used(tmp_path: Path):
    store = KVDiskStore(tmp_path, budget_bytes=35_000)
    paths = [store.save(c, IDENTITY, snapshot(first=c * 1000)) for c in range(3)]
    assert all(p is not None and p.exists() for p in paths)
    for age, path in enumerate(paths):  # chat 0 oldest... then chat 0 is used again
        assert path is not None
        os.utime(path, ns=(10**18 + age * 10**9, 10**18 + age * 10**9))
    assert store.load(paths[0], IDENTITY) is not None  # touches it
    store.save(3, IDENTITY, snapshot(first=3000))
    assert paths[0].exists() and not paths[1].exists() and paths[2].exists()
    assert store.bytes_used() <= 35_000
    assert store.size_of(3) == store.file_for(3, IDENTITY).stat().st_size


def test_a_state_larger_than_the_budget_is_not_written(tmp_path: Path):
    store = KVDiskStore(tmp_path, budget_bytes=5_000)
    assert store.save(1, IDENTITY, snapshot(size=10_000)) is None


def test_a_disk_that_refuses_is_logged_not_raised(tmp_path: Path, caplog):
    blocker = tmp_path / "kv"
    blocker.write_text("a file where the folder should be")
    assert KVDiskStore(blocker).save(1, IDENTITY, snapshot()) is None
    assert "not saved" in caplog.text


def test_the_writer_writes_the_newest_state_of_a_chat(tmp_path: Path):
    store = KVDiskStore(tmp_path)
    writer = KVDiskWriter(store)
    for count in (100, 200, 300):
        writer.put(5, IDENTITY, snapshot(count=count))
    assert writer.wait_idle(10)
    found = store.best_for(5, IDENTITY, range(400))
    assert found is not None and len(found.tokens) == 300
    writer.close()


def test_forgetting_a_chat_deletes_its_states(tmp_path: Path):
    store = KVDiskStore(tmp_path)
    store.save(1, IDENTITY, snapshot())
    store.save(1, OTHER_MODEL, snapshot())
    store.save(12, IDENTITY, snapshot())
    store.forget(1)
    assert store.size_of(1) == 0 and store.size_of(12) > 0


def test_reading_a_large_state_leaves_the_other_threads_running(tmp_path: Path):
    """The window's thread needs the GIL while the inference thread reads a state: allocating its buffer with
    ``bytearray`` zero-filled it with the GIL held (234 ms of a 485 ms read of 600 MB)."""
    import time

    from fara_desktop.bench.resume import StallProbe, evict

    store = KVDiskStore(tmp_path, budget_bytes=1 << 40)
    path = store.save(1, IDENTITY, KVSnapshot(tuple(range(200)), bytearray(os.urandom(1 << 20)) * 384))
    assert path is not None
    evict(path)
    with StallProbe() as probe:
        started = time.perf_counter()
        assert store.load(path, IDENTITY) is not None
        took = time.perf_counter() - started
    print(f"\nread {took * 1000:.0f} ms, longest stall of a 5 ms timer thread {probe.worst_ms:.1f} ms")
    assert probe.worst_ms / 1000 < 0.2 * took


def test_a_state_is_not_written_when_it_would_leave_the_disk_without_its_reserve(tmp_path):
    """A state write had no free-space check: a full disk made the chats' database fail to save meanwhile."""
    import contextlib
    import subprocess

    disk = tmp_path / "small-disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("a small file system cannot be mounted here (needs root)")
    try:
        (disk / "other-files").write_bytes(bytes(24 << 20))  # 8 MB left of 32; the reserve is 3.2 MB
        store = KVDiskStore(disk / "kv")
        tokens = tuple(range(MIN_TOKENS))
        assert store.save(1, IDENTITY, KVSnapshot(tokens, memoryview(bytearray(6 << 20)))) is None
        assert not (disk / "kv").exists() or [p.name for p in (disk / "kv").iterdir()] in ([], ["state.key"])
        assert store.save(2, IDENTITY, KVSnapshot(tokens, memoryview(bytearray(2 << 20)))) is not None
    finally:
        with contextlib.suppress(OSError):
            subprocess.run(["umount", str(disk)], capture_output=True)


def forged(path: Path, tokens: tuple[int, ...] | None = None, data: bytes | None = None) -> None:
    """What the red team wrote: the tokens of another text, or other values, with every size and checksum made to
    agree — all but the seal, whose key it does not have."""
    import json
    import struct
    import zlib

    raw = path.read_bytes()
    magic, length = struct.unpack_from("<8sI", raw)
    header = json.loads(raw[12 : 12 + length])
    old_tokens = raw[12 + length : 12 + length + 4 * header["tokens"]]
    packed = struct.pack(f"<{len(tokens)}i", *tokens) if tokens is not None else old_tokens
    body = data if data is not None else raw[12 + length + 4 * header["tokens"] :]
    header.update(tokens=len(packed) // 4, data=len(body), crc32=zlib.crc32(body, zlib.crc32(packed)))
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<8sI", magic, len(text)) + text + packed + body)


@pytest.mark.parametrize("forgery", ["tokens of another text", "other values (NaN keys, positions out of range)"])
def test_a_forged_state_is_refused_and_deleted_before_llama_cpp_sees_it(tmp_path: Path, forgery: str):
    """Issue 51, item 9: crafted states were accepted and changed the answer (1 of 763 tokens read)."""
    store = KVDiskStore(tmp_path)
    path = store.save(3, IDENTITY, snapshot(count=300))
    assert path is not None and store.load(path, IDENTITY) is not None
    if forgery.startswith("tokens"):
        forged(path, tokens=tuple(range(1000, 1300)))
    else:
        forged(path, data=bytes([0x7E, 0xFF]) * 5_000)  # f16 NaNs where the keys were
    assert store.header(path, IDENTITY) is None and store.load(path, IDENTITY) is None
    assert not path.exists()


def test_the_seal_is_this_users_and_stays_across_starts(tmp_path: Path):
    store = KVDiskStore(tmp_path)
    path = store.save(4, IDENTITY, snapshot())
    assert path is not None
    key = tmp_path / "state.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert KVDiskStore(tmp_path).load(path, IDENTITY) is not None  # the next start reads its own states
    KVDiskStore(tmp_path).forget()
    assert key.exists()  # deleting the readings keeps the key


def test_a_state_handed_over_just_after_close_is_written_not_lost(tmp_path: Path):
    """Issue 61, suspected: ``KVDiskWriter.put`` after ``close``. Confirmed: with the thread still writing when
    ``close`` queued its end, a state handed over next was queued behind the end, never written, and
    ``wait_idle`` never came true. Now the end waits behind what is still to be written."""
    import threading

    release, writing = threading.Event(), threading.Event()
    store = KVDiskStore(tmp_path)
    real_save = store.save

    def slow_save(*args, **kwargs):  # type: ignore[no-untyped-def]
        writing.set()
        release.wait(10)
        return real_save(*args, **kwargs)

    store.save = slow_save  # type: ignore[method-assign]
    writer = KVDiskWriter(store)
    writer.put(1, IDENTITY, snapshot())
    assert writing.wait(10)
    writer.close(timeout=0)  # the thread is still inside the first write
    writer.put(2, IDENTITY, snapshot(count=300))
    release.set()
    assert writer.wait_idle(10)
    found = store.best_for(2, IDENTITY, range(400))
    assert found is not None and len(found.tokens) == 300
    writer.close()


def test_the_seals_key_made_by_two_threads_at_once_is_the_one_kept(tmp_path: Path, monkeypatch):
    """Issue 61, suspected: ``KVDiskStore._key`` set lazily from two threads. Confirmed: the inference thread and the
    writer each made a key; one was kept on disk and the other used, so the states sealed with it were refused at
    the next start. Both threads now get the key the file keeps."""
    import contextlib
    import secrets
    import threading

    from fara_desktop.engine import kv_disk

    inside = threading.Barrier(2, timeout=0.5)
    real = secrets.token_bytes

    def slow_token(n: int) -> bytes:
        # both threads make a key at once (without the lock); with it, the second never gets here
        with contextlib.suppress(threading.BrokenBarrierError):
            inside.wait()
        return real(n)

    monkeypatch.setattr(kv_disk.secrets, "token_bytes", slow_token)
    store = KVDiskStore(tmp_path / "kv")
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(store._key())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    kept = (tmp_path / "kv" / "state.key").read_bytes()
    assert keys == [kept, kept]


def test_deleting_a_chat_waits_for_its_own_write_only(tmp_path: Path):
    """Issue 61, suspected: deleting any chat waited up to 30 s for other chats' writes. Confirmed: ``forget``
    waited for the writer to be idle. It now waits only while that chat's own state is being written (whose file
    the writer deletes once written), and what it waited for is that one write."""
    import threading

    from fara_desktop.engine.context_states import ContextStates

    release, writing = threading.Event(), threading.Event()
    store = KVDiskStore(tmp_path)
    real_save = store.save

    def slow_save(conversation, *args, **kwargs):  # type: ignore[no-untyped-def]
        writing.set()
        release.wait(60)
        return real_save(conversation, *args, **kwargs)

    store.save = slow_save  # type: ignore[method-assign]
    states = ContextStates(store)
    writer = states._writer
    assert writer is not None
    writer.put(2, IDENTITY, snapshot())  # another chat's state, its write held up
    assert writing.wait(10)
    real_save(1, IDENTITY, snapshot())  # chat 1 on disk
    deleted = threading.Thread(target=states.forget, args=(None, 1))
    deleted.start()
    deleted.join(10)  # bounded: a deletion that waits for chat 2's write would be here till it ends
    held = deleted.is_alive()
    release.set()
    deleted.join()
    assert not held, "deleting chat 1 waited for chat 2's write"
    assert store.size_of(1) == 0
    assert writer.wait_idle(10) and store.size_of(2) > 0
    states.close()
