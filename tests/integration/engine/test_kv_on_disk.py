"""Chats resume where they were across restarts, and are read ahead while the user types (real SmolLM2)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.kv_states import common_prefix
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.types import Finished, ModelLoaded, ModelLoadFailed, ReadAheadProgress
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import EventLog

pytestmark = pytest.mark.real_model

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
PARAMS = LoadParams(n_ctx=4096, prefault=False)


def history(topic: str, turns: int) -> list[ChatMessage]:
    messages = [ChatMessage("system", "You are a helpful assistant.")]
    for i in range(turns):
        messages.append(ChatMessage("user", f"Question {i} about {topic}: " + "please explain it in detail. " * 8))
        messages.append(ChatMessage("assistant", f"Answer {i} about {topic}: " + "here are the details. " * 10))
    return messages


def started_worker(log: EventLog, store: KVDiskStore | None, model: Path) -> InferenceWorker:
    worker = InferenceWorker(log, state_store=store).start()
    worker.load_model(model, PARAMS)
    assert isinstance(log.next_of(ModelLoaded, ModelLoadFailed), ModelLoaded)
    return worker


def ask(worker: InferenceWorker, log: EventLog, messages: list[ChatMessage], conversation: int) -> Finished:
    worker.generate(messages, GREEDY, conversation)
    finished = log.next_of(Finished)
    assert isinstance(finished, Finished)
    return finished


def test_a_restart_resumes_a_long_chat_from_disk(tmp_path, smollm2_path):
    store = KVDiskStore(tmp_path / "kv")
    chat = history("gardening", 12)
    first_log = EventLog()
    worker = started_worker(first_log, store, smollm2_path)
    first = ask(worker, first_log, [*chat, ChatMessage("user", "Thanks!")], 7)
    assert first.stats.prompt_tokens > 1400
    assert worker.shutdown(timeout=60)  # the app closes: the chat's state is on disk
    (saved,) = (tmp_path / "kv").glob("*.kvstate")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600

    second_log = EventLog()
    worker = started_worker(second_log, store, smollm2_path)  # the next start: a new llama.cpp context
    try:
        follow_up = [*chat, ChatMessage("user", "Thanks!"), ChatMessage("assistant", first.text),
                     ChatMessage("user", "And roses?")]  # fmt: skip
        resumed = ask(worker, second_log, follow_up, 7)
    finally:
        assert worker.shutdown(timeout=60)
    print(f"\nresumed {resumed.stats.prompt_tokens} tokens, read {resumed.stats.prompt_tokens_evaluated}")
    assert resumed.stats.prompt_tokens_evaluated < 60  # the new question and the reply's re-rendered end only


@pytest.fixture
def backend_and_store(tmp_path, smollm2_path):
    store = KVDiskStore(tmp_path / "kv")
    backend = LlamaBackend(state_store=store)
    backend.load(smollm2_path, PARAMS)
    yield backend, store
    backend.unload()


def reply(backend: LlamaBackend, messages: list[ChatMessage], conversation: int):
    prompt = backend.prepare(PromptRequest(messages, 64))
    return prompt.detail.tokens, backend.reply(
        prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, conversation)
    )


def save_and_forget(backend: LlamaBackend) -> Path:
    """The chat's state goes to disk, and the context is emptied as a restart would."""
    backend.save_to_disk(wait=True)
    backend.forget_context(snapshots=True)
    files = list(backend._states.store.folder.glob("*.kvstate"))  # type: ignore[union-attr]
    assert len(files) == 1
    return files[0]


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


@pytest.mark.parametrize("damage", [flip_a_byte, truncate])
def test_a_corrupt_or_truncated_state_file_is_read_again_with_the_same_answer(backend_and_store, damage):
    backend, _ = backend_and_store
    chat = [*history("sailing", 6), ChatMessage("user", "What wind is best?")]
    _, reference = reply(backend, chat, 3)  # read whole, as after a restart with no state
    state_file = save_and_forget(backend)
    damage(state_file)
    tokens, again = reply(backend, chat, 3)
    assert again.stats.prompt_tokens_evaluated == len(tokens)  # nothing was restored from the damaged file
    assert again.text == reference.text  # and the answer is the one a full read gives
    assert not state_file.exists() or state_file.stat().st_size > 0  # deleted, or written anew after this reply


def test_an_edited_message_restores_only_what_precedes_the_edit(backend_and_store):
    backend, _ = backend_and_store
    chat = [*history("cooking", 8), ChatMessage("user", "And dessert?")]
    stored_tokens, _ = reply(backend, chat, 4)
    save_and_forget(backend)
    edited = list(chat)
    edited[9] = ChatMessage("user", "Question 4 about baking instead: what flour?")  # in the middle of the chat
    tokens, after_edit = reply(backend, edited, 4)
    shared = common_prefix(stored_tokens, tokens)
    assert 200 < shared < len(tokens) - 200
    assert after_edit.stats.prompt_tokens_evaluated == len(tokens) - shared  # the tail after the edit is read again


def progress_until_finished(log: EventLog) -> list[ReadAheadProgress]:
    seen = []
    while True:
        event = log.next_of(ReadAheadProgress)
        seen.append(event)
        if event.finished:
            return seen


def test_read_ahead_leaves_only_the_last_token_for_enter(smollm2_path):
    log = EventLog()
    worker = started_worker(log, None, smollm2_path)
    try:
        messages = [*history("birds", 10), ChatMessage("user", "Which bird sings at night?")]
        worker.read_ahead(messages, GREEDY, 9)
        progress = progress_until_finished(log)
        assert progress[0].cached == 0 and progress[-1].cached == progress[-1].tokens - 1
        sent = ask(worker, log, messages, 9)
        assert sent.stats.prompt_tokens == progress[-1].tokens
        assert sent.stats.prompt_tokens_evaluated <= 1
    finally:
        assert worker.shutdown(timeout=60)


def test_read_ahead_is_preempted_by_a_key_press_and_by_send(smollm2_path):
    log = EventLog()
    worker = started_worker(log, None, smollm2_path)
    try:
        messages = [*history("trains", 14), ChatMessage("user", "Which train is fastest?")]
        worker.read_ahead(messages, GREEDY, 2)
        first = log.next_of(ReadAheadProgress)
        worker.cancel_read_ahead()  # a key press
        stopped = progress_until_finished(log)[-1]
        assert first.cached == 0 and stopped.cached < stopped.tokens - 1

        more = [*messages[:-1], ChatMessage("user", "Which train is fastest in Japan?")]
        worker.read_ahead(more, GREEDY, 2)
        log.next_of(ReadAheadProgress)
        sent = ask(worker, log, more, 2)  # Enter, while it reads ahead: the reply starts at once
        assert sent.stats.prompt_tokens_evaluated > 1  # it had not finished: the reply read the rest
        events = [e for _, e in log.of(ReadAheadProgress)]
        assert events[-1].finished and events[-1].cached < events[-1].tokens - 1
    finally:
        assert worker.shutdown(timeout=60)


def claim_tokens(path: Path, tokens: list[int], store: KVDiskStore) -> None:
    """Rewrite a state file's token record (``tokens``, longer than the cells its data holds), with a header, size,
    checksum and seal that all agree (as a file of this app's that llama.cpp changed its mind about): it passes every
    check and restores, and llama.cpp then cannot decode on it (the next position is not the one after the last
    cell)."""
    import json
    import struct
    import zlib

    raw = path.read_bytes()
    magic, length = struct.unpack_from("<8sI", raw)
    header = json.loads(raw[12 : 12 + length])
    data = raw[12 + length + 4 * header["tokens"] :]
    packed_tokens = struct.pack(f"<{len(tokens)}i", *tokens)
    header.update(tokens=len(tokens), crc32=zlib.crc32(data, zlib.crc32(packed_tokens)))
    header["seal"] = store.seal(header, packed_tokens)
    packed = json.dumps(header).encode()
    path.write_bytes(struct.pack("<8sI", magic, len(packed)) + packed + packed_tokens + data)


def test_a_state_that_restores_but_cannot_be_decoded_is_discarded_and_the_chat_read_again(backend_and_store):
    """Such a state bricked its chat: every reply failed ("llama_decode returned -1"), after restarts too, and
    every chat sharing its first 64 tokens picked the same file."""
    backend, store = backend_and_store
    short = [*history("rowing", 4), ChatMessage("user", "How long is a race?")]
    longer = [*history("rowing", 6), ChatMessage("user", "How long is a race?")]
    shown, _ = reply(backend, short, 5)
    state_file = save_and_forget(backend)
    tokens = backend.prepare(PromptRequest(longer, 64)).detail.tokens
    held = store.header(state_file, backend._states.identity).tokens  # type: ignore[arg-type, union-attr]
    shared = common_prefix(held, tokens)
    claim_tokens(state_file, tokens[: shared + 40], store)  # 40 tokens more than its cells hold
    assert store.header(state_file, backend._states.identity) is not None  # it passes every check # type: ignore[arg-type]
    backend.forget_context(snapshots=True)
    backend_reference = LlamaBackend()
    backend_reference.load(backend._info.path, PARAMS)  # type: ignore[union-attr]
    try:
        _, reference = reply(backend_reference, longer, 5)
    finally:
        backend_reference.unload()
    tokens, again = reply(backend, longer, 5)
    assert again.text == reference.text and again.stats.prompt_tokens_evaluated == len(tokens)
    backend.forget_context(snapshots=True)
    sibling = [*history("rowing", 6), ChatMessage("user", "Who rows fastest?")]  # another chat, same history
    reply(backend, sibling, 6)  # works too: the bad file is gone, not picked again
    del shown


def test_a_model_replaced_at_the_same_path_size_and_time_does_not_get_the_old_models_state(tmp_path, smollm2_path):
    """``cp -p``, rsync and tar keep size and modification time: a state bound to them was restored into another
    model (a silently different answer). States are bound to a sample of the file's content."""
    import os
    import shutil

    first, second = tmp_path / "model.gguf", tmp_path / "other.gguf"
    shutil.copyfile(smollm2_path, first)
    shutil.copyfile(smollm2_path, second)
    with open(second, "r+b") as handle:  # other weights: 8 MB of the tensor data zeroed (zeros are valid values)
        handle.seek(second.stat().st_size // 2)
        handle.write(bytes(8 << 20))
    store = KVDiskStore(tmp_path / "kv")
    backend = LlamaBackend(state_store=store)
    chat = [*history("kites", 6), ChatMessage("user", "How high do they fly?")]
    backend.load(first, PARAMS)
    reply(backend, chat, 9)
    backend.save_to_disk(wait=True)
    backend.unload()
    stamp = first.stat()
    shutil.copyfile(second, first)  # the other model, put where the first was, with its size and times
    os.utime(first, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    backend.load(first, PARAMS)
    try:
        tokens, again = reply(backend, chat, 9)
    finally:
        backend.unload()
    assert again.stats.prompt_tokens_evaluated == len(tokens)  # read whole: the old model's state was not used
