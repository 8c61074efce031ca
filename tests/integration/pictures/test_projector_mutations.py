"""A stranger's projector never takes the app down (issue 51, item 1): every tensor removed, every hyper-parameter off
by one (or not dividing), every projector type swapped — each mutation of a projector mtmd loads is either refused
by ``check_projector`` before llama.cpp sees it, or run for real in a child process (the model and the projector
loaded, a picture encoded and read) that must end on its own. Before, a file saying "mlp" over Gemma 3's tensors,
heads that do not divide the width or a missing layer tensor killed the process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from PIL import Image

from fara_desktop.models.gguf_checks import check_projector
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.vocabulary.errors import FaraError
from tests.helpers.gguf_factory import write_projector

pytestmark = pytest.mark.real_model

BASE = {"n_embd": 128, "n_ff": 256, "n_layer": 2, "n_head": 4}
KEYS_OFF_BY_ONE = ["clip.vision.embedding_length", "clip.vision.attention.head_count", "clip.vision.block_count",
                   "clip.vision.feed_forward_length", "clip.vision.image_size", "clip.vision.patch_size",
                   "clip.vision.projection_dim"]  # fmt: skip
# Every projector type llama-cpp-python 0.3.36's llama.cpp accepts (``PROJECTOR_TYPE_NAMES`` in its
# vendor/llama.cpp/tools/mtmd/clip-impl.h), and names it does not: each over Gemma 3's tensors
TYPES = [
    "mlp", "ldp", "ldpv2", "resampler", "adapter", "qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "ling3vl",
    "step3vl", "gemma3", "gemma3nv", "gemma3na", "gemma4v", "gemma4a", "gemma4uv", "gemma4ua", "phi4", "idefics3",
    "pixtral", "ultravox", "internvl", "llama4", "qwen2a", "qwen3a", "glma", "qwen2.5o", "voxtral", "meralion",
    "musicflamingo", "lfm2", "kimivl", "paddleocr", "lightonocr", "cogvlm", "janus_pro", "dots_ocr", "dots3note_v",
    "dots3note_a", "deepseekocr", "deepseekocr2", "deepseek4v", "lfm2a", "glm4v", "glm5v", "youtuvl", "yasa2",
    "kimik25", "nemotron_v2_vl", "exaone4_5", "hunyuanvl", "minicpmv4_6", "granite_speech", "mimovl", "minimax_m3",
    "granite4_vision", "mimo_audio", "parakeet", "qwen3tts_spkenc", "qwen3tts_gen", "pockettts_spkenc",
    "pockettts_gen", "qwen25vl_merger", "gemma3n", "unknown-type",
]

CHILD = """
import sys
from pathlib import Path
from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.pictures.store import PictureStore
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.sampling import SamplingParams

model, projector, picture = map(Path, sys.argv[1:4])
backend = LlamaBackend()
backend.load(model, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
if backend.vision is None:
    print("refused by mtmd:", backend.info.vision_problem)
    sys.exit(0)
digest = "a" * 64
question = ChatMessage("user", "What is it?", pictures=(AttachedPicture(digest, picture),))
prompt = backend.prepare(PromptRequest([question], 8))
backend.reply(prompt, ReplyRequest(SamplingParams(temperature=0.0, max_tokens=2), lambda: False, lambda *_: None, 1))
print("read the picture")
"""


def rewrite(source: Path, target: Path, drop: str | None = None, key: str | None = None, value: object = None,
            shrink: tuple[str, int] | None = None) -> Path:  # fmt: skip
    """``source`` written again without the tensor ``drop``, with the metadata ``key`` set to ``value``, or with
    the tensor ``shrink[0]`` half as long along its (numpy) axis ``shrink[1]``."""
    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(target), "clip")
    for field in reader.fields.values():
        name = field.name
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == key:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, [field.parts[i].tolist()[0] for i in field.data])
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(name, bytes(field.parts[field.data[0]]).decode())
        else:
            writer.add_key_value(name, field.parts[field.data[0]][0], kind)
    if key is not None:
        if isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_uint32(key, int(value))  # type: ignore[call-overload]
    for tensor in reader.tensors:
        if tensor.name == drop:
            continue
        data = np.array(tensor.data)
        if shrink is not None and tensor.name == shrink[0]:
            data = np.ascontiguousarray(np.take(data, range(data.shape[shrink[1]] // 2), axis=shrink[1]))
        writer.add_tensor(tensor.name, data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    return write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-original.gguf", **BASE)


@pytest.fixture(scope="module")
def picture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("picture") / ("a" * 64 + ".png")
    Image.new("RGB", (96, 64), (30, 140, 200)).save(path)
    return path


def survives_or_refused(gemma3_path: Path, projector: Path, picture: Path) -> str:
    try:
        check_projector(read_gguf_header(projector))
    except FaraError as exc:
        return f"refused: {exc}"  # before llama.cpp sees it
    child = subprocess.run([sys.executable, "-c", CHILD, str(gemma3_path), str(projector), str(picture)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert child.returncode == 0, f"{projector.name} killed the process ({child.returncode}): {child.stderr[-600:]}"
    return child.stdout


def mutations() -> list[tuple[str, dict[str, object]]]:
    cases: list[tuple[str, dict[str, object]]] = [("unchanged", {})]
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        tensors = read_gguf_header(write_projector(Path(folder) / "p.gguf", **BASE)).tensors
    names = [t.name for t in tensors]
    cases += [(f"without {name}", {"drop": name}) for name in names]
    # issue 62, item 2: a matrix of another shape passed the check and ended the process at the first picture
    cases += [(f"{t.name} half as long on axis {axis}", {"shrink": (t.name, axis)})
              for t in tensors if len(t.shape) == 2 for axis in (0, 1)]  # fmt: skip
    base_values = {"clip.vision.embedding_length": 128, "clip.vision.attention.head_count": 4,
                   "clip.vision.block_count": 2, "clip.vision.feed_forward_length": 256,
                   "clip.vision.image_size": 224, "clip.vision.patch_size": 14,
                   "clip.vision.projection_dim": 640}  # fmt: skip
    for key in KEYS_OFF_BY_ONE:
        for step in (-1, 1):
            cases.append((f"{key} {step:+d}", {"key": key, "value": base_values[key] + step}))
    cases.append(("heads not dividing the width", {"key": "clip.vision.attention.head_count", "value": 3}))
    cases.append(("4096 px pictures (issue 51, item 8)", {"key": "clip.vision.image_size", "value": 4096}))
    cases += [(f"type {kind}", {"key": "clip.projector_type", "value": kind}) for kind in TYPES]
    return cases


@pytest.mark.parametrize(("case", "change"), mutations(), ids=[case for case, _ in mutations()])
def test_a_mutated_projector_is_refused_or_survived(gemma3_path, original, picture, tmp_path, case, change):
    mutated = rewrite(original, tmp_path / "mmproj-mutated.gguf", **change)  # type: ignore[arg-type]
    outcome = survives_or_refused(gemma3_path, mutated, picture)
    if case.startswith("4096 px"):
        assert outcome.startswith("refused"), "a picture of 85,000 patches is minutes of work for one question"
    if case == "unchanged":
        assert "read the picture" in outcome, outcome  # the rewriting itself keeps a projector that works


CRASHING_CHILD = """
import sys
from pathlib import Path
from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.sampling import SamplingParams

model, projector, picture, data = map(Path, sys.argv[1:5])
import fara_desktop.engine.llama_backend as llama_backend
llama_backend.trial_for = lambda *_: (True, "")  # a crash the projector's trial did not foresee
backend = LlamaBackend(LoadRecord(data))  # as the app loads: every load and encoding recorded
backend.load(model, LoadParams(n_ctx=1024, projector=str(projector), prefault=False))
question = ChatMessage("user", "What is it?", pictures=(AttachedPicture("a" * 64, picture),))
prompt = backend.prepare(PromptRequest([question], 8))
backend.reply(prompt, ReplyRequest(SamplingParams(temperature=0.0, max_tokens=2), lambda: False, lambda *_: None, 1))
"""


def test_a_projector_that_took_the_app_down_is_not_loaded_again(gemma3_path, original, picture, tmp_path):
    """A projector that crashes in a way no check foresaw (here one the check would refuse, handed to the engine
    directly): the crash record kept around its first encoding names it at the next start, and the model then
    loads for text with the reason, instead of dying again at every start."""
    from fara_desktop.engine.backend import PromptRequest, ReplyRequest
    from fara_desktop.engine.llama_backend import LlamaBackend
    from fara_desktop.models.load_record import LoadRecord
    from fara_desktop.planning.params import LoadParams
    from fara_desktop.vocabulary.messages import ChatMessage
    from fara_desktop.vocabulary.sampling import SamplingParams

    crasher = rewrite(original, tmp_path / "mmproj-crasher.gguf", key="clip.vision.patch_size", value=15)
    data = tmp_path / "data"
    child = subprocess.run([sys.executable, "-c", CRASHING_CHILD, str(gemma3_path), str(crasher), str(picture),
                            str(data)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert child.returncode < 0, "the projector was meant to take the process down"
    record = LoadRecord(data)
    assert [Path(c.path).name for c in record.collect_crashes()] == ["mmproj-crasher.gguf"]
    backend = LlamaBackend(record)
    try:
        info = backend.load(gemma3_path, LoadParams(n_ctx=1024, projector=str(crasher), prefault=False))
        assert backend.vision is None and not info.vision
        assert "stopped the app" in info.vision_problem
        prompt = backend.prepare(PromptRequest([ChatMessage("user", "Hello")], 8))
        reply = backend.reply(
            prompt, ReplyRequest(SamplingParams(temperature=0.0, max_tokens=3), lambda: False, lambda *_: None)
        )
        assert reply.stats.completion_tokens > 0  # the model itself is in use, for text
    finally:
        backend.unload()
