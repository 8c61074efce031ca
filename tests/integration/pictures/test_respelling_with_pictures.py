"""Issue 62, item 1: a kept state that holds a picture meets the prompt's respelling in the model's own tokens
(``engine.own_tokens``). Its picture's pseudo tokens are negative; spelled with ``llama_token_to_piece``, llama.cpp
threw ``std::out_of_range`` and the process aborted — the window at every start, when the state was on disk.

Each case runs the real llama.cpp, the real Gemma 3 270M and a projector of Gemma 3's layout (a token opens each
picture) or of LLaVA's (none does), in a child process of its own: an abort ends that child, not the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[3]


def run_case(case: str, *args: Path) -> str:
    """``case`` in a child process; its last line of output (a signal's death fails with what it printed)."""
    code = f"import sys; from {__name__} import {case}; {case}(*sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, f"{case} ended with {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def projectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.helpers.gguf_factory import write_llava_projector, write_projector

    folder = tmp_path_factory.mktemp("respelling")
    return {
        "gemma3": write_projector(folder / "mmproj-gemma3.gguf", n_embd=128, n_ff=256, n_layer=2),
        "llava": write_llava_projector(folder / "mmproj-llava.gguf"),
    }


@pytest.mark.parametrize("style", ["gemma3", "llava"])
def test_a_new_chat_after_a_picture_chat_is_answered(gemma3_path, projectors, tmp_path, style):
    """(a) a new chat's message typed to begin with ``<start_of_image>`` (Gemma 3: a user-defined token, which typed
    text became) and (c) with LLaVA's projector, any new chat and its read-ahead, after a chat with a picture."""
    assert run_case("new_chat_after_a_picture", gemma3_path, projectors[style], tmp_path) == "answered"


@pytest.mark.parametrize("style", ["gemma3", "llava"])
def test_a_picture_chat_continued_without_its_projector_is_answered(gemma3_path, projectors, tmp_path, style):
    """(d) the chat's state with its picture saved on disk; the model loaded again without its projector (switched
    off, removed, refused after a crash): every follow-up aborted, at every start."""
    assert run_case("picture_chat_without_projector", gemma3_path, projectors[style], tmp_path) == "answered"


def test_a_models_marker_tokens_typed_in_a_message_stay_text(gemma3_path):
    """Gemma 3's ``<start_of_image>`` typed by a user, pasted or imported, is text to the model, as mtmd's own
    marker is; markup tokens (``<table>``) are read as the model's own tokens, as before."""
    from fara_desktop.engine.llama_backend import LlamaBackend
    from fara_desktop.planning.params import LoadParams
    from fara_desktop.vocabulary.messages import ChatMessage

    backend = LlamaBackend()
    backend.load(gemma3_path, LoadParams(n_ctx=1024, prefault=False))
    try:
        llm = backend._require()[0]
        opener = llm.tokenize(b"<start_of_image>", add_bos=False, special=True)
        table = llm.tokenize(b"<table>", add_bos=False, special=True)
        assert len(opener) == 1 and len(table) == 1  # each one token of the vocabulary
        prompt = backend.prepare(PromptRequest([ChatMessage("user", "<start_of_image> and <table>")], 16))
        assert opener[0] not in prompt.detail.tokens
        assert table[0] in prompt.detail.tokens
    finally:
        backend.unload()


# ---------------------------------------------------------------------------------------------- the child's cases


def _photo(folder: Path):  # type: ignore[no-untyped-def]
    from PIL import Image

    from fara_desktop.pictures.decode import read_picture
    from fara_desktop.pictures.store import PictureStore
    from fara_desktop.system.sandbox import Sandbox
    from fara_desktop.vocabulary.pictures import AttachedPicture

    path = folder / "photo.png"
    Image.new("RGB", (320, 240), (200, 80, 40)).save(path)
    with Sandbox() as sandbox:
        picture = read_picture(path, sandbox)
    store = PictureStore(folder / "pictures")
    digest = store.put(picture)
    return AttachedPicture(digest, store.path(digest))


def _backend(model: str, projector: str | None, states: Path | None = None):  # type: ignore[no-untyped-def]
    from fara_desktop.engine.kv_disk import KVDiskStore
    from fara_desktop.engine.llama_backend import LlamaBackend
    from fara_desktop.planning.params import LoadParams

    backend = LlamaBackend(state_store=KVDiskStore(states) if states else None)
    backend.load(Path(model), LoadParams(n_ctx=1024, projector=projector, prefault=False))
    return backend


def _ask(backend, messages, conversation):  # type: ignore[no-untyped-def]
    from fara_desktop.vocabulary.sampling import SamplingParams

    prompt = backend.prepare(PromptRequest(messages, 16))
    greedy = SamplingParams(temperature=0.0, max_tokens=4, stop_loops=False)
    return backend.reply(prompt, ReplyRequest(greedy, lambda: False, lambda *_: None, conversation))


def new_chat_after_a_picture(model: str, projector: str, folder: str) -> None:
    from fara_desktop.vocabulary.messages import ChatMessage

    backend = _backend(model, projector)
    try:
        picture = _photo(Path(folder))
        _ask(backend, [ChatMessage("user", "What is this?", pictures=(picture,))], 1)
        typed = [ChatMessage("user", "<start_of_image> what was that?")]
        backend.read_ahead(backend.prepare(PromptRequest(typed, 16)), 2, lambda: False, lambda *_: None)
        _ask(backend, typed, 2)
        _ask(backend, [ChatMessage("user", "What is this?", pictures=(picture,))], 3)
        _ask(backend, [ChatMessage("user", "Hello, how are you?")], 4)
    finally:
        backend.unload()
    print("answered")


def picture_chat_without_projector(model: str, projector: str, folder: str) -> None:
    from fara_desktop.vocabulary.messages import ChatMessage

    states = Path(folder) / "states"
    backend = _backend(model, projector, states)
    first = [ChatMessage("user", "What colour is this? " * 4, pictures=(_photo(Path(folder)),))]
    try:
        reply = _ask(backend, first, 7)
        backend.save_to_disk(wait=True)
    finally:
        backend.unload()
    blind = _backend(model, None, states)  # the same model, its projector left out
    try:
        follow_up = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "Why?")]
        backend_reply = _ask(blind, follow_up, 7)
        again = [*follow_up, ChatMessage("assistant", backend_reply.text), ChatMessage("user", "And then?")]
        blind.read_ahead(blind.prepare(PromptRequest(again, 16)), 7, lambda: False, lambda *_: None)
        _ask(blind, again, 7)
    finally:
        blind.unload()
    print("answered")
