"""Issue 44's ground, with the real llama.cpp: a synthetic projector of llama.cpp's Gemma 3 layout (a SigLIP
encoder, random weights) loads in ``mtmd`` beside the real Gemma 3 270M and encodes a picture that the sandbox
child decoded — the path pictures will take. Measured at real shape here (SigLIP-So400m, 896 px, f16): 256 image
tokens in about 23 s on 2 cores (not in the suite: it writes 836 MB)."""

from __future__ import annotations

import ctypes

import pytest
from PIL import Image

from fara_desktop.pictures.decode import read_picture
from fara_desktop.system.sandbox import Sandbox
from tests.helpers.gguf_factory import write_projector

pytestmark = pytest.mark.real_model
# Load a projector beside a model and encode one grey picture, in a child process of its own.
CHILD = """
import ctypes, sys
import llama_cpp.mtmd_cpp as m
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=512, verbose=False)
p = m.mtmd_context_params_default(); p.use_gpu = False; p.n_threads = 1
ctx = m.mtmd_init_from_file(sys.argv[2].encode(), llm.model, p)
pixels = (ctypes.c_ubyte * (224 * 224 * 3))(*([128] * (224 * 224 * 3)))
bitmap = m.mtmd_bitmap_init(224, 224, pixels)
chunks = m.mtmd_input_chunks_init()
prompt = m.mtmd_default_marker()
text = m.mtmd_input_text(); text.text, text.text_len, text.add_special, text.parse_special = prompt, len(prompt), 1, 1
m.mtmd_tokenize(ctx, chunks, ctypes.byref(text), (m.mtmd_bitmap_p_ctypes * 1)(bitmap), 1)
for i in range(m.mtmd_input_chunks_size(chunks)):
    chunk = m.mtmd_input_chunks_get(chunks, i)
    if m.mtmd_input_chunk_get_type(chunk) == m.MTMD_INPUT_CHUNK_TYPE_IMAGE:
        m.mtmd_encode_chunk(ctx, chunk)
print("encoded")
"""


def test_a_projector_of_gemma3s_layout_encodes_a_picture_decoded_in_the_sandbox(gemma3_path, tmp_path):
    import llama_cpp.mtmd_cpp as mtmd
    from llama_cpp import Llama

    projector = write_projector(tmp_path / "mmproj-gemma-3-270m-f32.gguf", n_embd=128, n_ff=256, n_layer=2)
    photo = tmp_path / "photo.jpg"
    Image.new("RGB", (640, 480), (30, 120, 200)).save(photo)
    with Sandbox() as sandbox:
        picture = read_picture(photo, sandbox)
    llm = Llama(model_path=str(gemma3_path), n_ctx=1024, verbose=False)
    params = mtmd.mtmd_context_params_default()
    params.use_gpu, params.n_threads, params.print_timings, params.warmup = False, 1, False, False
    context = mtmd.mtmd_init_from_file(str(projector).encode(), llm.model, params)
    assert context, "mtmd refused the projector"
    try:
        assert mtmd.mtmd_support_vision(context)
        pixels = (ctypes.c_ubyte * len(picture.rgb)).from_buffer_copy(picture.rgb)
        bitmap = mtmd.mtmd_bitmap_init(picture.width, picture.height, pixels)
        chunks = mtmd.mtmd_input_chunks_init()
        prompt = b"What is in " + mtmd.mtmd_default_marker() + b"?"
        text = mtmd.mtmd_input_text()
        text.text, text.text_len, text.add_special, text.parse_special = prompt, len(prompt), True, True
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        assert mtmd.mtmd_tokenize(context, chunks, ctypes.byref(text), bitmaps, 1) == 0
        kinds = [mtmd.mtmd_input_chunk_get_type(mtmd.mtmd_input_chunks_get(chunks, i))
                 for i in range(mtmd.mtmd_input_chunks_size(chunks))]  # fmt: skip
        image = next(i for i, kind in enumerate(kinds) if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE)
        chunk = mtmd.mtmd_input_chunks_get(chunks, image)
        assert mtmd.mtmd_input_chunk_get_n_tokens(chunk) == 16  # (224 / 14 / 4)²: Gemma 3's pooled patches
        assert mtmd.mtmd_encode_chunk(context, chunk) == 0
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
    finally:
        mtmd.mtmd_free(context)
        llm.close()


def test_the_projector_the_header_check_refuses_would_have_aborted_the_app(gemma3_path, tmp_path):
    """The check is not guesswork: loading such a projector in a child process ends it with SIGABRT (ggml's
    ``binary_op: unsupported types``), where the check refuses the file from its header."""
    import signal
    import subprocess
    import sys

    from fara_desktop.models.gguf_checks import UnloadableModelError, check_projector
    from fara_desktop.models.gguf_file import read_gguf_header

    projector = write_projector(tmp_path / "mmproj-f16-positions.gguf", half_position_embedding=True)
    with pytest.raises(UnloadableModelError, match=r"position_embd\.weight is not stored as f32"):
        check_projector(read_gguf_header(projector))
    sound = write_projector(tmp_path / "mmproj-good.gguf")
    check_projector(read_gguf_header(sound))  # a sound one passes
    child_script = tmp_path / "load_and_encode.py"
    child_script.write_text(CHILD)
    child = subprocess.run([sys.executable, str(child_script), str(gemma3_path), str(projector)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert child.returncode == -signal.SIGABRT, (child.returncode, child.stderr[-500:])
    assert "unsupported types" in child.stderr
    control = subprocess.run([sys.executable, str(child_script), str(gemma3_path), str(sound)],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert control.returncode == 0 and "encoded" in control.stdout, control.stderr[-500:]
