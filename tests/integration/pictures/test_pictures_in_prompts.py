"""Pictures in the engine, with the real llama.cpp and its ``mtmd``: a synthetic projector of Gemma 3's layout beside
the real Gemma 3 270M. A picture is encoded once per chat: a second question about it encodes nothing and reads
only the new words; reading ahead encodes it while the user types; a restart resumes the chat from its saved
state without encoding; a model without a projector refuses a new picture with a message."""

from __future__ import annotations

import pytest
from PIL import Image

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.errors import PicturesUnsupportedError
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.pictures.decode import read_picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.planning.params import LoadParams
from fara_desktop.system.sandbox import Sandbox
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_projector

pytestmark = pytest.mark.real_model
GREEDY = SamplingParams(temperature=0.0, max_tokens=6, stop_loops=False)


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256,
                           n_layer=2)  # fmt: skip


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "photo.png"
    Image.new("RGB", (320, 240), (200, 80, 40)).save(path)
    with Sandbox() as sandbox:
        picture = read_picture(path, sandbox)
    store = PictureStore(tmp_path / "pictures")
    digest = store.put(picture)
    return AttachedPicture(digest, store.path(digest))


def seeing(gemma3_path, projector, store=None) -> LlamaBackend:
    backend = LlamaBackend(state_store=store)
    backend.load(gemma3_path, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
    return backend


def ask(backend, messages, conversation=1):
    prompt = backend.prepare(PromptRequest(messages, 16))
    return backend.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, conversation))


def test_a_second_question_about_a_picture_encodes_nothing_and_reads_only_the_new_words(gemma3_path, projector, photo):
    backend = seeing(gemma3_path, projector)
    try:
        assert backend.info.vision == projector.name and backend.info.picture_tokens == 16
        first = [ChatMessage("user", "What colour is this?", pictures=(photo,))]
        reply = ask(backend, first)
        assert backend.vision.encodes == 1
        assert reply.stats.prompt_tokens > 16  # the picture's tokens are in the prompt
        second = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "And its shape?")]
        again = ask(backend, second)
        assert backend.vision.encodes == 1, "the picture was encoded again"
        assert again.stats.prompt_tokens_evaluated < again.stats.prompt_tokens - 16
        # another chat in between, then back: its state comes back with the picture in it
        ask(backend, [ChatMessage("user", "Hello there, a chat without pictures.")], conversation=2)
        third = [*second, ChatMessage("assistant", again.text), ChatMessage("user", "Thanks!")]
        back = ask(backend, third)
        assert backend.vision.encodes == 1
        assert back.stats.prompt_tokens_evaluated < back.stats.prompt_tokens - 16
    finally:
        backend.unload()


def test_the_same_picture_in_a_new_chat_is_decoded_from_its_kept_embeddings(gemma3_path, projector, photo):
    backend = seeing(gemma3_path, projector)
    try:
        ask(backend, [ChatMessage("user", "Describe it.", pictures=(photo,))], conversation=1)
        backend.forget_context(snapshots=True)  # nothing of the first chat left in the context or in RAM states
        reply = ask(backend, [ChatMessage("user", "Anything odd?", pictures=(photo,))], conversation=3)
        assert backend.vision.encodes == 1
        assert reply.stats.prompt_tokens_evaluated == reply.stats.prompt_tokens  # read again, not encoded again
    finally:
        backend.unload()


def test_reading_ahead_encodes_the_picture_while_the_user_types(gemma3_path, projector, photo):
    backend = seeing(gemma3_path, projector)
    try:
        draft = [ChatMessage("user", "What is in this picture?", pictures=(photo,))]
        cached = backend.read_ahead(backend.prepare(PromptRequest(draft, 16)), 5, lambda: False, lambda *_: None)
        assert backend.vision.encodes == 1 and cached > 16
        reply = ask(backend, draft, conversation=5)
        assert backend.vision.encodes == 1
        assert reply.stats.prompt_tokens_evaluated <= 2
    finally:
        backend.unload()


def test_a_restarted_chat_with_a_picture_resumes_from_its_state_on_disk(gemma3_path, projector, photo, tmp_path):
    store = KVDiskStore(tmp_path / "states")
    backend = seeing(gemma3_path, projector, store)
    first = [ChatMessage("user", "What colour is this? " * 6, pictures=(photo,))]
    reply = ask(backend, first, conversation=7)
    backend.save_to_disk(wait=True)
    backend.unload()
    restarted = seeing(gemma3_path, projector, store)
    try:
        follow_up = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "Why?")]
        resumed = ask(restarted, follow_up, conversation=7)
        assert restarted.vision.encodes == 0, "the restarted chat encoded its picture again"
        assert resumed.stats.prompt_tokens_evaluated < resumed.stats.prompt_tokens - 16
    finally:
        restarted.unload()
    fresh = seeing(gemma3_path, projector)
    try:
        assert ask(fresh, follow_up, conversation=8).text == resumed.text  # restored: the same greedy reply
    finally:
        fresh.unload()


def test_a_half_read_picture_is_read_again_whole(gemma3_path, projector, photo):
    backend = seeing(gemma3_path, projector)
    try:
        prompt = backend.prepare(PromptRequest([ChatMessage("user", "Look.", pictures=(photo,))], 16))
        span = prompt.detail.vision.spans[0]
        assert prompt.detail.vision.resume_point(span.start + 5) == span.start
        assert prompt.detail.vision.resume_point(span.end) == span.end
        assert len(set(prompt.detail.tokens[span.start : span.end])) == 1 and prompt.detail.tokens[span.start] < 0
    finally:
        backend.unload()


def test_a_model_without_a_projector_refuses_a_new_picture_and_words_an_old_one(gemma3_path, photo):
    backend = LlamaBackend()
    backend.load(gemma3_path, LoadParams(n_ctx=1024, prefault=False))
    try:
        assert backend.info.vision == ""
        with pytest.raises(PicturesUnsupportedError, match="cannot see pictures"):
            backend.prepare(PromptRequest([ChatMessage("user", "What is this?", pictures=(photo,))], 16))
        older = [ChatMessage("user", "What is this?", pictures=(photo,)), ChatMessage("assistant", "A photo."),
                 ChatMessage("user", "Fine.")]  # fmt: skip
        prompt = backend.prepare(PromptRequest(older, 16))
        assert "a picture this model cannot see" in prompt.detail.rendered.text
    finally:
        backend.unload()


def test_a_marker_typed_in_a_message_stays_text(gemma3_path, projector, photo):
    backend = seeing(gemma3_path, projector)
    try:
        prompt = backend.prepare(PromptRequest([ChatMessage("user", "Type <__media__> here", pictures=(photo,))], 16))
        assert len(prompt.detail.vision.spans) == 1  # only the real picture became one
    finally:
        backend.unload()


def test_the_model_reads_the_pictures_pixels(gemma3_path, projector, tmp_path):
    """Two pictures that differ only in colour give the first reply token different probabilities."""
    store = PictureStore(tmp_path / "pictures")
    attached = []
    for colour in ((250, 10, 10), (10, 10, 250)):
        path = tmp_path / f"{colour[0]}.png"
        Image.new("RGB", (224, 224), colour).save(path)
        with Sandbox() as sandbox:
            digest = store.put(read_picture(path, sandbox))
        attached.append(AttachedPicture(digest, store.path(digest)))
    backend = seeing(gemma3_path, projector)
    try:
        first_logprobs = []
        for number, picture in enumerate(attached):
            prompt = backend.prepare(PromptRequest([ChatMessage("user", "Colour?", pictures=(picture,))], 16))
            sampling = SamplingParams(temperature=0.0, max_tokens=1, stop_loops=False, logprobs=1)
            reply = backend.reply(prompt, ReplyRequest(sampling, lambda: False, lambda *_: None, 10 + number))
            first_logprobs.append(reply.logprobs[0].logprob)
        assert backend.vision.encodes == 2
        assert first_logprobs[0] != pytest.approx(first_logprobs[1], abs=1e-6)
    finally:
        backend.unload()


def test_a_stop_ends_an_encoding_under_way_and_keeps_nothing_of_it(gemma3_path, tmp_path, photo):
    """mtmd has no abort callback: ggml's evaluation callback pauses the encoder every few nodes and asks. A stop
    there (Esc, or the draft changed while reading ahead) ends the encoding at once; what it computed is thrown
    away (never kept as the picture's embeddings), and the next read encodes it whole."""
    deep = write_projector(tmp_path / "mmproj-deep.gguf", n_embd=128, n_ff=256, n_layer=8)
    backend = seeing(gemma3_path, deep)
    asked: list[int] = []

    def stop_at_the_first_pause() -> bool:  # asked once before the encoding, then at each pause
        asked.append(1)
        return len(asked) >= 2

    try:
        draft = [ChatMessage("user", "What is this?", pictures=(photo,))]
        prompt = backend.prepare(PromptRequest(draft, 16))
        cached = backend.read_ahead(prompt, 5, stop_at_the_first_pause, lambda *_: None)
        assert len(asked) == 2, "the encoder was not asked at a pause"
        assert backend.vision.encodes == 0 and cached <= prompt.detail.vision.spans[0].start
        asked.clear()
        stopped = backend.reply(
            backend.prepare(PromptRequest(draft, 16)), ReplyRequest(GREEDY, stop_at_the_first_pause, lambda *_: None, 5)
        )
        assert stopped.finish_reason == "cancelled" and backend.vision.encodes == 0
        whole = ask(backend, draft, conversation=5)
        assert backend.vision.encodes == 1 and whole.finish_reason in ("stop", "length")
    finally:
        backend.unload()


def test_a_stop_while_a_picture_is_read_into_the_context_is_a_stop_not_a_failure(gemma3_path, projector, photo):
    """Issue 50, item 4: the abort callback stops llama_decode inside mtmd's picture decode (mtmd returns 2): the
    reply ends as stopped, and the next one reads the picture (its embeddings kept, not encoded again)."""
    backend = seeing(gemma3_path, projector)
    try:
        messages = [ChatMessage("user", "What is it?", pictures=(photo,))]
        prompt = backend.prepare(PromptRequest(messages, 16))
        stopped = backend.reply(prompt, ReplyRequest(GREEDY, lambda: backend.vision.encodes >= 1, lambda *_: None, 1))
        assert stopped.finish_reason == "cancelled" and stopped.stats.completion_tokens == 0
        again = ask(backend, messages)
        assert again.finish_reason != "cancelled" and again.stats.completion_tokens > 0
        assert backend.vision.encodes == 1
    finally:
        backend.unload()


def test_a_marker_in_a_replys_reasoning_or_a_tool_calls_arguments_stays_text(gemma3_path, projector, photo):
    """Model output is a stranger's text: a reply whose reasoning or tool call wrote mtmd's marker must not become a
    picture slot (mtmd would find more slots than pictures and refuse the whole prompt)."""
    from fara_desktop.vocabulary.tools import ToolCall

    backend = seeing(gemma3_path, projector)
    try:
        chat = [
            ChatMessage("user", "Look.", pictures=(photo,)),
            ChatMessage("assistant", "Seen.", reasoning="I think <__media__> here",
                        tool_calls=(ToolCall("c1", "look", '{"at": "<__media__>"}'),)),
            ChatMessage("user", "And now?"),
        ]  # fmt: skip
        prompt = backend.prepare(PromptRequest(chat, 16))
        assert len(prompt.detail.vision.spans) == 1
    finally:
        backend.unload()


def test_a_reused_picture_chat_continues_exactly_as_a_fresh_read(gemma3_path, projector, photo):
    """Gemma 3 attends within a sliding window and reads a picture both ways: the follow-up read from the kept
    context (picture included) gives the same greedy reply, token for token, as a new backend reading it all."""
    long = SamplingParams(temperature=0.0, max_tokens=16, stop_loops=False, ignore_eos=True)
    first = [ChatMessage("user", "Describe this picture in detail.", pictures=(photo,))]
    backend = seeing(gemma3_path, projector)
    try:
        reply = backend.reply(
            backend.prepare(PromptRequest(first, 16)), ReplyRequest(long, lambda: False, lambda *_: None, 1)
        )
        follow_up = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "What else?")]
        reused = backend.reply(
            backend.prepare(PromptRequest(follow_up, 16)), ReplyRequest(long, lambda: False, lambda *_: None, 1)
        )
        assert reused.stats.prompt_tokens_evaluated < reused.stats.prompt_tokens - 16
    finally:
        backend.unload()
    fresh_backend = seeing(gemma3_path, projector)
    try:
        fresh = fresh_backend.reply(
            fresh_backend.prepare(PromptRequest(follow_up, 16)), ReplyRequest(long, lambda: False, lambda *_: None, 2)
        )
        assert fresh.stats.prompt_tokens_evaluated == fresh.stats.prompt_tokens
    finally:
        fresh_backend.unload()
    assert reused.text == fresh.text


def test_the_marker_from_any_source_stays_text_and_only_pictures_are_slots(gemma3_path, projector, photo):
    """Issue 51, item 5: mtmd's marker in anything that reaches the prompt — a system prompt, a user's words or
    passages, a reply, its reasoning, a tool call's name and arguments, a tool's result — stays text; only the
    pictures become slots (one more slot than pictures and mtmd refuses every picture turn of the chat)."""
    from fara_desktop.vocabulary.tools import ToolCall

    marker = "<__media__>"
    backend = seeing(gemma3_path, projector)
    try:
        chat = [
            ChatMessage("system", f"Be brief {marker}."),
            ChatMessage("user", f"Look {marker}.", pictures=(photo,)),
            ChatMessage("assistant", f"Seen {marker}.", reasoning=f"hmm {marker}",
                        tool_calls=(ToolCall("c1", marker, f'{{"{marker}": "{marker}"}}'),)),
            ChatMessage("tool", f"result {marker}", tool_call_id="c1", name=marker),
            ChatMessage("user", f"Passage: {marker} And now?"),
        ]  # fmt: skip
        prompt = backend.prepare(PromptRequest(chat, 16))
        assert len(prompt.detail.vision.spans) == 1
        assert prompt.detail.rendered.text.count(marker) == 1  # the picture's, and nothing else's
    finally:
        backend.unload()
