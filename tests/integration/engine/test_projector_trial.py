"""A projector's first picture, encoded in a child process before the app's own (``engine.projector_trial``):
one that takes llama.cpp down there is not loaded here, with the reason; the verdict is kept per file and build,
so a projector is tried once."""

from __future__ import annotations

import json

import pytest

from fara_desktop.engine import projector_trial
from fara_desktop.engine.projector_trial import RECORD_FILE
from fara_desktop.engine.projector_trial import projector_trial as trial
from tests.helpers.gguf_factory import write_projector
from tests.integration.pictures.test_projector_mutations import rewrite

pytestmark = pytest.mark.real_model


def test_a_projector_is_tried_once_and_one_that_ends_llama_cpp_is_refused(gemma3_path, tmp_path, monkeypatch):
    good = write_projector(tmp_path / "mmproj-good.gguf", n_embd=128, n_ff=256, n_layer=2)
    # the attention output's input half as wide: clip.cpp's graph asserts on it at the first picture
    bad = rewrite(good, tmp_path / "mmproj-bad.gguf", shrink=("v.blk.0.attn_out.weight", 1))
    folder = tmp_path / "record"
    assert trial(gemma3_path, good, "plain", 2, folder).usable  # type: ignore[union-attr]
    refused = trial(gemma3_path, bad, "plain", 2, folder)
    assert refused is not None and not refused.usable and "ended llama.cpp (SIG" in refused.reason, refused
    assert len(json.loads((folder / RECORD_FILE).read_text())) == 2

    def no_child(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("tried again")

    monkeypatch.setattr(projector_trial, "run_child", no_child)
    assert trial(gemma3_path, good, "plain", 2, folder).usable  # type: ignore[union-attr]
    assert not trial(gemma3_path, bad, "plain", 2, folder).usable  # type: ignore[union-attr]
