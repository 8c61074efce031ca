"""Pictures through the local API with the official ``openai`` client: ``image_url`` parts with ``data:`` URIs,
streamed and not, read by the real llama.cpp through a synthetic projector beside Gemma 3 270M; a hostile picture
gets a 400 that says why; a request's pictures are not kept after it; a picture's encoding is never shared
between the user's chats and a client, and a client's follow-up encodes its picture no more."""

from __future__ import annotations

import base64
import io

import openai
import pytest
from PIL import Image

from fara_desktop.app.picture_intake import ApiPictureFiles, PictureIntake
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.types import Finished
from fara_desktop.pictures.store import PictureStore
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import wait_until
from tests.helpers.gguf_factory import write_projector
from tests.helpers.local_api_server import serve_model

pytestmark = pytest.mark.real_model


def data_uri(data: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


def png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 240), colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def seeing_server(gemma3_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("api-pictures")
    projector = write_projector(folder / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256, n_layer=2)
    passing = ApiPictureFiles(folder / "passing")
    params = LoadParams(n_ctx=1024, projector=str(projector), prefault=False)
    server, worker, info = serve_model(gemma3_path, params, pictures=passing)
    yield server, info, passing.store
    server.stop()
    assert worker.shutdown(timeout=30)


def test_the_openai_clients_image_parts_are_read_streamed_or_not(seeing_server):
    server, info, store = seeing_server
    api = openai.OpenAI(base_url=server.address, api_key="unused", max_retries=0)
    message = [{"role": "user", "content": [{"type": "text", "text": "What colour is this?"},
                                            {"type": "image_url", "image_url": {"url": data_uri(png((200, 30, 30)))}}]}]
    whole = api.chat.completions.create(model=info.name, messages=message, temperature=0, max_tokens=8)
    assert whole.usage.prompt_tokens > info.picture_tokens > 0  # the picture's tokens were read
    stream = api.chat.completions.create(model=info.name, messages=message, temperature=0, max_tokens=8, stream=True,
                                         stream_options={"include_usage": True})  # fmt: skip
    pieces, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    assert "".join(pieces) == whole.choices[0].message.content
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    # the stream's end reaches the client just before the server's generator closes
    wait_until(lambda: store.digests() == set(), 10, "the request's picture to go")


def test_a_hostile_picture_gets_a_400_that_says_why(seeing_server):
    server, info, store = seeing_server
    api = openai.OpenAI(base_url=server.address, api_key="unused", max_retries=0)
    truncated = png((1, 2, 3))[:60]
    with pytest.raises(openai.BadRequestError, match="A picture could not be read"):
        api.chat.completions.create(model=info.name, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_uri(truncated)}}]}])  # fmt: skip
    bomb = io.BytesIO()
    Image.new("1", (20000, 20000)).save(bomb, format="PNG")
    with pytest.raises(openai.BadRequestError, match="pixels"):
        api.chat.completions.create(model=info.name, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_uri(bomb.getvalue())}}]}])  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="not valid base64"):
        api.chat.completions.create(model=info.name, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}]}])  # fmt: skip
    assert store.digests() == set()
    reply = api.chat.completions.create(model=info.name, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    assert reply.choices[0].message.content is not None  # the server goes on


def test_a_picture_a_chat_sent_is_encoded_again_for_a_client_whose_follow_up_encodes_nothing(gemma3_path, tmp_path):
    """Issue 52: the embeddings were kept by the picture's digest alone and shared with the chats — a client could
    tell by the clock (~20 s on a real projector) whether the user had that picture."""
    projector = write_projector(tmp_path / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256, n_layer=2)
    passing = ApiPictureFiles(tmp_path / "passing")
    backend = LlamaBackend()
    params = LoadParams(n_ctx=1024, projector=str(projector), prefault=False)
    server, worker, info = serve_model(gemma3_path, params, pictures=passing, backend=backend)
    api = openai.OpenAI(base_url=server.address, api_key="unused", max_retries=0)
    try:
        data = png((30, 160, 60))
        in_chat = PictureIntake(PictureStore(tmp_path / "chat-pictures")).take_bytes(data)
        assert PictureIntake(PictureStore(tmp_path / "probe")).take_bytes(data).digest == in_chat.digest
        finished: list[Finished] = []
        chat = [ChatMessage("user", "What colour is this?", pictures=(in_chat,))]
        worker.generate(chat, SamplingParams(temperature=0, max_tokens=4), 3, on_event=lambda e: (
            finished.append(e) if isinstance(e, Finished) else None))  # fmt: skip
        wait_until(lambda: finished, 120, "the chat's reply")
        assert backend.vision.encodes == 1
        asked = [{"role": "user", "content": [{"type": "text", "text": "What colour is this?"},
                                              {"type": "image_url", "image_url": {"url": data_uri(data)}}]}]
        first = api.chat.completions.create(model=info.name, messages=asked, temperature=0, max_tokens=4)
        assert backend.vision.encodes == 2, "the client was given the chat's encoding of the picture"
        assert first.usage.prompt_tokens_details.cached_tokens == 0
        follow_up = [*asked, {"role": "assistant", "content": first.choices[0].message.content or ""},
                     {"role": "user", "content": "And its shape?"}]
        again = api.chat.completions.create(model=info.name, messages=follow_up, temperature=0, max_tokens=4)
        assert backend.vision.encodes == 2, "the client's follow-up encoded its picture again"
        assert again.usage.prompt_tokens_details.cached_tokens > info.picture_tokens  # nor decoded it again
    finally:
        api.close()
        server.stop()
        assert worker.shutdown(timeout=30)
