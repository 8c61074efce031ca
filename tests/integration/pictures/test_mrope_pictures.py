"""Pictures with an M-RoPE projector (Qwen2-VL's layout, as Fara-7B and the Qwen-VL family use): a picture's grid
takes fewer positions than it has tokens. With a synthetic Qwen2-VL text model and projector through the real
``mtmd``: a second question encodes nothing and continues exactly as a fresh read of the whole chat would (a wrong
position would change the greedy reply), a restart resumes from disk, and the context's fill counts the picture's
cells."""

from __future__ import annotations

import pytest
from PIL import Image

from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ignore_text
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.pictures.decode import Picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_qwen2vl_projector, write_tiny_model

GREEDY = SamplingParams(temperature=0.0, max_tokens=12, stop_loops=False, ignore_eos=True)


@pytest.fixture(scope="module")
def qwen2vl(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen2vl")
    model = write_tiny_model(folder / "tiny-qwen2vl.gguf", arch="qwen2vl", n_embd=64, n_head=4, n_head_kv=2,
                             context_length=2048, only_words=False)  # fmt: skip
    projector = write_qwen2vl_projector(folder / "mmproj-tiny-qwen2vl.gguf", text_embd=64)
    return model, projector


def picture(tmp_path, colour, size=(224, 168)) -> AttachedPicture:
    store = PictureStore(tmp_path / "pictures")
    image = Image.new("RGB", size, colour)
    image.paste((255 - colour[0], 40, 90), (20, 20, 120, 90))
    digest = store.put(Picture(size[0], size[1], image.tobytes()))
    return AttachedPicture(digest, store.path(digest))


def seeing(model, projector, store=None) -> LlamaBackend:
    backend = LlamaBackend(state_store=store)
    info = backend.load(model, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
    assert info.vision, info.vision_problem
    return backend


def ask(backend, messages, conversation):
    return backend.reply(
        backend.prepare(PromptRequest(messages, 16)), ReplyRequest(GREEDY, lambda: False, ignore_text, conversation)
    )


def test_an_mrope_picture_takes_fewer_positions_than_cells(qwen2vl, tmp_path):
    backend = seeing(*qwen2vl)
    try:
        prompt = backend.prepare(
            PromptRequest([ChatMessage("user", "What is this?", pictures=(picture(tmp_path, (200, 30, 30)),))], 16)
        )
        vision = prompt.detail.vision
        assert vision.extra_cells > 0 and vision.spans[0].length < vision.spans[0].length + vision.extra_cells
        assert prompt.detail.cells == len(prompt.detail.tokens) + vision.extra_cells
    finally:
        backend.unload()


def test_a_second_question_continues_exactly_as_a_fresh_read(qwen2vl, tmp_path):
    model, projector = qwen2vl
    photo = picture(tmp_path, (30, 160, 60))
    first = [ChatMessage("user", "Describe it.", pictures=(photo,))]
    backend = seeing(model, projector)
    try:
        reply = ask(backend, first, 1)
        second = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "And then?")]
        reused = ask(backend, second, 1)
        assert backend.vision.encodes == 1
        assert reused.stats.prompt_tokens_evaluated < reused.stats.prompt_tokens // 2
    finally:
        backend.unload()
    fresh_backend = seeing(model, projector)
    try:
        fresh = ask(fresh_backend, second, 2)
        assert fresh.stats.prompt_tokens_evaluated == fresh.stats.prompt_tokens
    finally:
        fresh_backend.unload()
    assert reused.text == fresh.text  # the same positions: the same greedy continuation


def test_a_restart_resumes_an_mrope_chat_from_disk_without_encoding(qwen2vl, tmp_path):
    model, projector = qwen2vl
    store = KVDiskStore(tmp_path / "states")
    photo = picture(tmp_path, (90, 90, 200))
    first = [ChatMessage("user", "What colour dominates here? " * 8, pictures=(photo,))]
    backend = seeing(model, projector, store)
    reply = ask(backend, first, 9)
    backend.save_to_disk(wait=True)
    backend.unload()
    follow_up = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "Why?")]
    restarted = seeing(model, projector, store)
    try:
        resumed = ask(restarted, follow_up, 9)
        assert restarted.vision.encodes == 0
        assert resumed.stats.prompt_tokens_evaluated < resumed.stats.prompt_tokens // 2
    finally:
        restarted.unload()
    fresh = seeing(model, projector)
    try:
        assert ask(fresh, follow_up, 10).text == resumed.text
    finally:
        fresh.unload()


def test_the_mrope_model_reads_the_pixels(qwen2vl, tmp_path):
    backend = seeing(*qwen2vl)
    try:
        scores = []
        for number, colour in enumerate(((250, 10, 10), (10, 10, 250))):
            prompt = backend.prepare(
                PromptRequest([ChatMessage("user", "Colour?", pictures=(picture(tmp_path, colour),))], 16)
            )
            sampling = SamplingParams(temperature=0.0, max_tokens=1, stop_loops=False, logprobs=1, ignore_eos=True)
            scores.append(
                backend.reply(prompt, ReplyRequest(sampling, lambda: False, ignore_text, 20 + number))
                .logprobs[0]
                .logprob
            )
        assert scores[0] != pytest.approx(scores[1], abs=1e-6)
    finally:
        backend.unload()
