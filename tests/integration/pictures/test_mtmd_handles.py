"""mtmd's native objects are freed by their owner on every path (issue 50, item 10): a picture that cannot be read
leaves no bitmap of the others behind, and a projector whose set-up fails after llama.cpp loaded it frees its
context. Counted through the real library's own functions."""

from __future__ import annotations

import llama_cpp.mtmd_cpp as mtmd
import pytest
from PIL import Image

from fara_desktop.engine import vision
from fara_desktop.engine.errors import PictureReadError
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.vision import VisionModel
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.pictures import AttachedPicture
from tests.helpers.gguf_factory import write_projector

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-gemma-3-270m.gguf", n_embd=128, n_ff=256,
                           n_layer=2)  # fmt: skip


def counting(monkeypatch, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(mtmd, name)

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(mtmd, name, counted)
    return calls


def test_a_picture_that_cannot_be_read_leaves_no_bitmap_behind(gemma3_path, projector, tmp_path, monkeypatch):
    backend = LlamaBackend()
    backend.load(gemma3_path, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
    try:
        good = tmp_path / ("a" * 64 + ".png")
        Image.new("RGB", (64, 64), (10, 20, 30)).save(good)
        broken = tmp_path / ("b" * 64 + ".png")
        broken.write_bytes(b"\x89PNG\r\n\x1a\n not a picture")
        made, freed = counting(monkeypatch, "mtmd_bitmap_init"), counting(monkeypatch, "mtmd_bitmap_free")
        pictures = [AttachedPicture("a" * 64, good), AttachedPicture("b" * 64, broken)]
        with pytest.raises(PictureReadError):
            backend.vision.tokenize(vision.MARKER * 2, pictures, add_special=True)
        assert len(made) == 1 and len(freed) == 1, "the first picture's bitmap leaked when the second failed"
    finally:
        backend.unload()


def test_a_projector_whose_set_up_fails_frees_its_context(gemma3_path, projector, monkeypatch):
    from llama_cpp import Llama

    llm = Llama(str(gemma3_path), n_ctx=256, verbose=False)
    try:
        freed = counting(monkeypatch, "mtmd_free")

        def header_fails(_path):
            raise OSError("the projector went away")

        monkeypatch.setattr(vision, "read_gguf_header", header_fails)
        with pytest.raises(OSError):
            VisionModel(projector, llm, threads=1)
        assert len(freed) == 1, "the projector's context leaked"
    finally:
        llm.close()
