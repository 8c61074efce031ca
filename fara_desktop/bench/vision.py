"""``bench --section vision``: pictures on this CPU, for each vision projector beside the model (``mmproj*.gguf``).

Per projector: the encode time of one picture (median of three different pictures) against the forecast the
window shows before anything was measured (the encoder's work at the CPU's default rate); the encodings a second
question about the same picture costs (none); a chat with a picture resumed after a restart from its state on disk
against reading it again (encode included); the memory the projector adds (RSS of a child that loads the model and
the projector and encodes, minus one that loads the model alone) against the estimate the fit uses. Then hostile
pictures through the sandbox reader: refused, and how long the refusal took.

``python -m fara_desktop.bench.vision MODEL PROJECTOR|- N_CTX`` is the memory probe's child.
"""

from __future__ import annotations

import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ignore_text
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.machine.hardware import this_cpu_features
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.pictures.decode import UnreadablePicture, read_picture
from fara_desktop.pictures.store import PictureStore
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.vision_cost import default_operations_per_s, projector_shape
from fara_desktop.system.sandbox import Sandbox
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.sampling import SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, stop_loops=False)
CHAT_WORDS = "Tell me what you see and how it relates to the harbour, the weather and the boats. " * 12


def projectors_beside(model: Path) -> list[Path]:
    return sorted(p for p in model.parent.glob("*.gguf") if p.name.lower().startswith("mmproj") and p != model)


def vision(model: Path, n_ctx: int, threads: int | None, quick: bool) -> dict[str, Any]:
    """The section's figures (see the module's notes)."""
    projectors = projectors_beside(model)
    if not projectors:
        return {"vision": {"skipped": f"no mmproj*.gguf beside {model.name}"}}
    with tempfile.TemporaryDirectory(prefix="fara-vision-") as scratch:
        folder = Path(scratch)
        pictures = _pictures(PictureStore(folder / "pictures"), folder, 2 if quick else 3)
        per_projector = {p.name: _projector(model, p, n_ctx, threads, pictures, folder, quick) for p in projectors}
    out: dict[str, Any] = {"vision_encode_s": per_projector, "vision_hostile": hostile_pictures()}
    out["vision_second_turn_encodes"] = max(v["second_turn_encodes"] for v in per_projector.values())
    out["vision_resume_restore_ratio"] = max(v["resume_restore_ratio"] for v in per_projector.values())
    out["vision_forecast_over_measured"] = [v["forecast_over_measured"] for v in per_projector.values()]
    out["vision_estimate_over_rss"] = [v["estimate_over_rss"] for v in per_projector.values()]
    return out


def _pictures(store: PictureStore, folder: Path, count: int) -> list[AttachedPicture]:
    """Photos of a common size (1280 × 960, noise and colour): the sandbox reads and scales them as the app does."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    taken = []
    with Sandbox() as sandbox:
        for number in range(count):
            pixels = rng.integers(0, 255, (960, 1280, 3), dtype=np.uint8)
            path = folder / f"photo-{number}.jpg"
            Image.fromarray(pixels).save(path, quality=90)
            digest = store.put(read_picture(path, sandbox))
            taken.append(AttachedPicture(digest, store.path(digest)))
    return taken


def _projector(
    model: Path,
    projector: Path,
    n_ctx: int,
    threads: int | None,
    pictures: list[AttachedPicture],
    folder: Path,
    quick: bool,
) -> dict[str, Any]:
    params = LoadParams(
        n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, projector=str(projector), prefault=False
    )
    shape = projector_shape(read_gguf_header(projector))
    backend = LlamaBackend()
    info = backend.load(model, params)
    vision_model = backend.vision
    assert vision_model is not None, info.vision_problem
    default_rate = default_operations_per_s(info.n_threads_batch, this_cpu_features())
    width, height = _size_of(pictures[0])
    forecast = shape.seconds_at(default_rate, width, height) if shape is not None else 0.0
    try:
        encodes = []
        for picture in pictures:
            prompt = backend.prepare(PromptRequest([ChatMessage("user", "What is this?", pictures=(picture,))], 16))
            assert prompt.detail.vision is not None
            started = time.perf_counter()
            vision_model.encode_ahead(prompt.detail.vision)
            encodes.append(time.perf_counter() - started)
        measured = statistics.median(encodes)
        first = [ChatMessage("user", "Describe this picture.", pictures=(pictures[0],))]
        reply = backend.reply(
            backend.prepare(PromptRequest(first, 16)),
            ReplyRequest(GREEDY, lambda: False, ignore_text, "second-turn"),
        )
        before = vision_model.encodes
        second = [*first, ChatMessage("assistant", reply.text), ChatMessage("user", "And the colours?")]
        backend.reply(
            backend.prepare(PromptRequest(second, 16)),
            ReplyRequest(GREEDY, lambda: False, ignore_text, "second-turn"),
        )
        second_turn_encodes = vision_model.encodes - before
    finally:
        backend.unload()
    resume = _resume(model, params, pictures[-1], folder)
    memory = _memory(model, projector, n_ctx)
    return {
        "picture_tokens": info.picture_tokens,
        "picture_px": [width, height],
        "patches": shape.patches_for(width, height) if shape else None,
        "operations_g": round(shape.operations_for(width, height) / 1e9, 1) if shape else None,
        "encode_runs_s": [round(s, 3) for s in encodes],
        "encode_s": round(measured, 3),
        "forecast_s": round(forecast, 3),
        "forecast_over_measured": round(forecast / measured, 3) if measured else None,
        "measured_operations_per_s_g": round(shape.operations_for(width, height) / measured / 1e9, 1)
        if shape and measured
        else None,
        "second_turn_encodes": second_turn_encodes,
        **resume,
        **memory,
    }


def _size_of(picture: AttachedPicture) -> tuple[int, int]:
    from PIL import Image

    with Image.open(picture.path) as image:
        return image.width, image.height


def _resume(model: Path, params: LoadParams, picture: AttachedPicture, folder: Path) -> dict[str, Any]:
    """A chat with a picture and a few hundred words: its follow-up after a restart, from the state on disk, vs a
    fresh process reading (and encoding) everything."""
    store = KVDiskStore(folder / f"states-{Path(params.projector or '').stem}")
    chat = [ChatMessage("user", CHAT_WORDS, pictures=(picture,))]
    writer = LlamaBackend(state_store=store)
    writer.load(model, params)
    reply = writer.reply(
        writer.prepare(PromptRequest(chat, 16)),
        ReplyRequest(GREEDY, lambda: False, ignore_text, 1),
    )
    writer.save_to_disk(wait=True)
    writer.unload()
    follow_up = [*chat, ChatMessage("assistant", reply.text), ChatMessage("user", "Say that again, shorter.")]
    times: dict[str, float] = {}
    encodes: dict[str, int] = {}
    for name, state_store in (("restored", store), ("reread", None)):
        backend = LlamaBackend(state_store=state_store)
        backend.load(model, params)
        try:
            started = time.perf_counter()
            backend.reply(
                backend.prepare(PromptRequest(follow_up, 16)),
                ReplyRequest(replace_max(GREEDY, 1), lambda: False, ignore_text, 1),
            )
            times[name] = time.perf_counter() - started
            encodes[name] = backend.vision.encodes if backend.vision else -1
        finally:
            backend.unload()
    return {
        "resume_restored_s": round(times["restored"], 3),
        "resume_reread_s": round(times["reread"], 3),
        "resume_restore_ratio": round(times["restored"] / times["reread"], 4),
        "resume_encodes": encodes["restored"],
    }


def replace_max(sampling: SamplingParams, tokens: int) -> SamplingParams:
    from dataclasses import replace

    return replace(sampling, max_tokens=tokens)


def _memory(model: Path, projector: Path, n_ctx: int) -> dict[str, Any]:
    """RSS of a child with the model and projector (one picture encoded) minus one with the model alone."""
    rss: dict[str, int] = {}
    estimate = 0
    for name, with_projector in (("model", "-"), ("with_projector", str(projector))):
        child = subprocess.run(
            [sys.executable, "-m", "fara_desktop.bench.vision", str(model), with_projector, str(n_ctx)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        rss[name] = figures["rss"]
        estimate = figures["estimate"] or estimate
    added = rss["with_projector"] - rss["model"]
    return {
        "estimate_bytes": estimate,
        "rss_added_bytes": added,
        "estimate_over_rss": round(estimate / added, 3) if added > 0 else None,
    }


def hostile_pictures() -> dict[str, Any]:
    """A decompression bomb, a truncated file and a 10,000-frame GIF through the sandbox reader."""
    from PIL import Image

    files: dict[str, bytes] = {}
    bomb = io.BytesIO()
    Image.new("1", (30000, 30000)).save(bomb, format="PNG")
    files["bomb_900M_pixels"] = bomb.getvalue()
    whole = io.BytesIO()
    Image.new("RGB", (1200, 900), (90, 60, 30)).save(whole, format="PNG", compress_level=0)
    files["truncated_png"] = whole.getvalue()[: len(whole.getvalue()) // 2]
    frames = io.BytesIO()
    moving = []
    for number in range(10_000):  # each frame differs (Pillow merges identical ones)
        frame = Image.new("L", (64, 64), 0)
        frame.putpixel((number % 64, number // 64 % 64), 255)
        moving.append(frame)
    moving[0].save(frames, format="GIF", save_all=True, append_images=moving[1:])
    files["gif_10000_frames"] = frames.getvalue()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fara-hostile-") as folder, Sandbox() as sandbox:
        for name, data in files.items():
            path = Path(folder) / name
            path.write_bytes(data)
            started = time.perf_counter()
            try:
                picture = read_picture(path, sandbox)
                outcome = f"read: {picture.width} × {picture.height} (first frame)"
            except UnreadablePicture as exc:
                outcome = f"refused: {exc}"
            out[name] = {"bytes": len(data), "outcome": outcome, "seconds": round(time.perf_counter() - started, 3)}
    return out


def _child(argv: list[str]) -> None:
    """The memory probe: load, encode one picture, print RSS and the estimate."""
    from fara_desktop.bench.memory_probe import _rss

    model, projector, n_ctx = Path(argv[0]), argv[1], int(argv[2])
    before = _rss()["VmRSS"]
    backend = LlamaBackend()
    backend.load(model, LoadParams(n_ctx=n_ctx, projector=None if projector == "-" else projector, prefault=False))
    estimate = 0
    if projector != "-":
        shape = projector_shape(read_gguf_header(Path(projector)))
        estimate = shape.memory_bytes if shape else 0
        with tempfile.TemporaryDirectory() as folder:
            store = PictureStore(Path(folder))
            from fara_desktop.pictures.decode import Picture

            digest = store.put(Picture(896, 896, bytes(896 * 896 * 3)))
            picture = AttachedPicture(digest, store.path(digest))
            prompt = backend.prepare(PromptRequest([ChatMessage("user", "x", pictures=(picture,))], 8))
            assert backend.vision is not None and prompt.detail.vision is not None
            backend.vision.encode_ahead(prompt.detail.vision)
    print(json.dumps({"rss": _rss()["VmRSS"] - before, "estimate": estimate}))


if __name__ == "__main__":
    _child(sys.argv[1:])
