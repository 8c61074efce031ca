"""A model's eyes: a vision projector (``mmproj``) loaded beside the text model through llama.cpp's ``mtmd``, and the
prompts that carry pictures.

llama-cpp-python's own multimodal chat handlers clear the KV cache on every call, so every turn would encode every
picture again and read the whole chat again. Here a picture is part of the prompt's token record like text: its
positions hold a pseudo token (negative, never a vocabulary id) derived from the projector and the picture's
digest, so the app's prefix reuse, RAM snapshots and states on disk keep it like any other tokens, and a second
question about the same picture encodes nothing. Its embeddings are also kept in memory by digest, for each
principal apart (read-ahead encodes a picture while the user types; a chat read again after a switch decodes them
without encoding; an API client never learns by the clock whether the user's chats sent the same picture).

The record holds one entry per position. Most projectors place a picture's tokens one per position (Gemma 3 and
4, LLaVA-style); M-RoPE ones (Qwen2-VL, Qwen2.5-VL, Qwen3-VL and 3.5) place a picture's grid on fewer positions
than it has tokens (rows and columns are positions of their own), so its KV cells outnumber its record: the
difference is counted apart (``VisionPrompt.extra_cells``) wherever the context's fill matters. A picture is cut
back whole or not at all (its cells all sit at its first position). Runs on the inference thread only.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fara_desktop.engine.errors import (
    ModelLoadError,
    PictureReadError,
    PicturesUnsupportedError,
    cannot_see,
)
from fara_desktop.engine.types import WINDOW, ModelInfo
from fara_desktop.machine.hardware import this_cpu_features
from fara_desktop.machine.llama_internals import hold_tokens_from
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.planning.vision_cost import default_operations_per_s, projector_shape
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

EMBEDDINGS_KEPT_BYTES = 256 * 1024 * 1024  # the pictures' embeddings kept in memory, newest first
MARKER = "<__media__>"  # where mtmd puts a picture in the rendered prompt (``mtmd_default_marker``)
MARKER_IN_TEXT = "<\u200b__media__>"  # the same characters from anywhere else stay text
# Where a picture goes while the prompt is rendered: no stranger's text can hold it (a secret of this process), so
# after rendering every marker is text and each slot becomes a marker (``marked``).
PICTURE_SLOT = f"<fara-picture-{secrets.token_hex(12)}>"
PROBE_SIDE = 896  # a picture of this side tells how many tokens the projector makes of a scaled picture
STOP_CHECK_NODES = 16  # the encoder pauses after every this many nodes to ask whether to stop (a few a layer)


class PictureDecodeError(RuntimeError):
    """llama.cpp did not read a picture's embeddings into the context: stopped by the abort callback (mtmd returns
    2) or failed. A RuntimeError like ``llama_decode``'s own, so each caller tells a stop, a restored state that
    fails in use and a failure apart as it does for text."""


class EncodingStopped(Exception):
    """A stop (Esc, or the draft changed) came while a picture was being encoded: nothing of it was kept."""


@dataclass(frozen=True)
class PictureSpan:
    """Where one picture sits in a prompt's token record: ``length`` positions from ``start``."""

    start: int
    length: int
    digest: str
    chunk: int  # its index among the prompt's mtmd chunks

    @property
    def end(self) -> int:
        return self.start + self.length


class VisionPrompt:
    """A prompt split by mtmd into text and pictures: the token record (pseudo tokens where pictures are) and the
    chunks llama.cpp reads. Owns the chunks (freed with it)."""

    def __init__(self, tokens: list[int], spans: tuple[PictureSpan, ...], chunks: Any, extra_cells: int = 0) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        self.tokens = tokens
        self.spans = spans
        self.extra_cells = extra_cells  # KV cells its pictures take beyond their positions (M-RoPE)
        self._chunks = chunks
        self._free = mtmd.mtmd_input_chunks_free  # held: at interpreter exit nothing can be imported any more

    def chunk(self, span: PictureSpan) -> Any:
        import llama_cpp.mtmd_cpp as mtmd

        return mtmd.mtmd_input_chunks_get(self._chunks, span.chunk)

    def resume_point(self, position: int) -> int:
        """Where reading can go on from, given ``position`` tokens are held: never inside a picture (a picture is
        decoded whole), so a position within one goes back to its start."""
        for span in self.spans:
            if span.start < position < span.end:
                return span.start
        return position

    def picture_at(self, position: int) -> PictureSpan | None:
        """The picture that starts at ``position``, if one does."""
        return next((s for s in self.spans if s.start == position), None)

    def next_picture(self, position: int) -> int:
        """Where the next picture after ``position`` begins (text is read up to it); past the end when none."""
        return min((s.start for s in self.spans if s.start > position), default=1 << 62)

    def segments(self, start: int, end: int) -> Iterator[tuple[int, int] | PictureSpan]:
        """What reading ``start``..``end`` decodes, in order: text runs as (from, to), pictures whole."""
        at = start
        for span in self.spans:
            if span.end <= at or span.start >= end:
                continue
            if span.start > at:
                yield (at, span.start)
            yield span
            at = span.end
        if at < end:
            yield (at, end)

    def __del__(self) -> None:
        chunks, self._chunks = self._chunks, None
        if chunks is not None:
            self._free(chunks)


class VisionModel:
    """A projector loaded beside a text model: tokenizes prompts with pictures, encodes each picture once (its
    embeddings kept by digest) and decodes pictures into the context. ``encodes`` counts the encodings done."""

    def __init__(self, projector: Path, llm: Llama, threads: int) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        params = mtmd.mtmd_context_params_default()
        params.use_gpu, params.n_threads, params.print_timings, params.warmup = False, threads, False, False
        # mtmd has no abort callback; ggml's evaluation callback is asked before each node whether to pause there,
        # and after a pause whether to go on: a stop ends the encoding within a few layers, not 20 s later (what
        # it computed is then thrown away).
        self.should_stop: Callable[[], bool] = lambda: False
        # Around each encoding: the crash record (``models.load_record``), so a projector that takes the process
        # down on a picture is never paired again (its load is recorded the same way)
        self.guard: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
        self._stopped = False
        self._nodes = 0
        self._eval_callback = llama_cpp_eval_callback(self._at_node)  # held: llama.cpp keeps the pointer
        params.cb_eval = self._eval_callback
        context = mtmd.mtmd_init_from_file(str(projector).encode(), llm.model, params)
        if not context:
            raise ModelLoadError(f"llama.cpp could not load the vision projector {projector.name}.")
        if not mtmd.mtmd_support_vision(context):
            mtmd.mtmd_free(context)
            raise ModelLoadError(f"The vision projector {projector.name} reads no pictures (a projector for sound).")
        self._context = context
        # Kept by principal and digest: an API client's time to the first token must not say whether the user's chats
        # (or another client) sent the same picture; ``principal`` is whose prompt is being read (``engine.types``).
        self.principal = WINDOW
        self._embeddings: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._embeddings_bytes = 0
        self.encodes = 0
        self.encode_seconds: list[tuple[int, float]] = []  # (tokens, seconds) of each encoding done
        try:  # whatever fails from here on, the projector's context is freed (it holds the projector's weights)
            self.path = projector
            stat = projector.stat()
            self._identity = f"{projector.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()
            self._n_embd = llama_cpp_n_embd(llm)
            self.tokens_per_picture = self._probe_tokens()
            header = read_gguf_header(projector)
            self.shape = projector_shape(header)
            self._default_rate = default_operations_per_s(threads, this_cpu_features())
        except BaseException:
            self.close()
            raise

    @property
    def operations_per_s(self) -> float:
        """The encoder's speed here: measured by the pictures encoded in this session, else the CPU's default."""
        if self.shape is None or not self.encode_seconds:
            return self._default_rate
        rates = sorted(self._patches_work(tokens) / max(seconds, 1e-6) for tokens, seconds in self.encode_seconds)
        return rates[len(rates) // 2]

    def _patches_work(self, tokens: int) -> float:
        """The work an encoding of ``tokens`` image tokens did (a dynamic projector merges 2 × 2 patches a token)."""
        assert self.shape is not None
        return self.shape.operations_of(tokens * 4) if self.shape.dynamic else self.shape.operations

    @property
    def seconds_per_picture(self) -> float:
        """The forecast for one picture of the preferred size (0: the projector's shape is not known)."""
        if self.shape is None:
            return 0.0
        return self.shape.seconds_at(self.operations_per_s, PROBE_SIDE, PROBE_SIDE)

    def _at_node(self, _tensor: Any, ask: bool, _user_data: Any) -> bool:
        """ggml's evaluation callback (on this thread, inside an encoding): pause every few nodes; go on unless
        asked to stop. It must never raise into C."""
        if ask:
            self._nodes += 1
            return self._nodes % STOP_CHECK_NODES == 0
        try:
            self._stopped = self._stopped or bool(self.should_stop())
        except Exception:  # a callback must never raise into C: a broken check stops nothing
            log.exception("The stop check failed while a picture was encoded")
        return not self._stopped

    def close(self) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        context, self._context = self._context, None
        self._embeddings.clear()
        if context is not None:
            mtmd.mtmd_free(context)

    # ------------------------------------------------------------------ prompts

    def pseudo_token(self, digest: str) -> int:
        """The token a picture's positions hold in the record: this projector's, this picture's, never a real id."""
        hashed = hashlib.sha256(self._identity + b"|" + digest.encode()).digest()
        return -1 - (int.from_bytes(hashed[:4], "little") & 0x3FFFFFFF)

    def tokenize(self, text: str, pictures: Sequence[AttachedPicture], add_special: bool) -> VisionPrompt:
        """``text`` holds one ``MARKER`` per picture, in order."""
        import llama_cpp.mtmd_cpp as mtmd

        with Bitmaps() as bitmaps:  # each freed whatever happens, a picture that cannot be read included
            for picture in pictures:
                bitmaps.add(self._bitmap(picture))
            chunks = mtmd.mtmd_input_chunks_init()
            prompt = VisionPrompt([], (), chunks)  # frees the chunks whatever happens next
            encoded = text.encode("utf-8")
            source = mtmd.mtmd_input_text()
            source.text, source.text_len, source.add_special, source.parse_special = (
                encoded,
                len(encoded),
                add_special,
                True,
            )
            failed = mtmd.mtmd_tokenize(self._context, chunks, ctypes.byref(source), bitmaps.array(), len(bitmaps))
        if failed:
            raise PictureReadError(f"llama.cpp could not place the pictures in the prompt (mtmd_tokenize: {failed}).")
        tokens: list[int] = []
        spans: list[PictureSpan] = []
        extra = 0
        pictures_left = iter(pictures)
        for index in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, index)
            kind = mtmd.mtmd_input_chunk_get_type(chunk)
            if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                count = ctypes.c_size_t(0)
                pointer = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
                tokens += [pointer[i] for i in range(count.value)]
            elif kind == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                picture = next(pictures_left)
                length = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
                extra += int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)) - length
                spans.append(PictureSpan(len(tokens), length, picture.digest, index))
                tokens += [self.pseudo_token(picture.digest)] * length
            else:
                raise PictureReadError("The prompt holds a kind of input this app does not read (sound).")
        prompt.tokens, prompt.spans, prompt.extra_cells = tokens, tuple(spans), extra
        return prompt

    def _bitmap(self, picture: AttachedPicture) -> Any:
        """The picture's pixels for mtmd, from the store's PNG (our own file, written from pixels the sandbox
        decoded)."""
        from PIL import Image

        try:
            with Image.open(picture.path) as image:
                rgb = image.convert("RGB")
        except (OSError, ValueError) as exc:
            raise PictureReadError(f"A picture of this chat could not be read ({one_line(str(exc), 120)}).") from exc
        return self._bitmap_of(rgb.width, rgb.height, rgb.tobytes(), picture.digest)

    @staticmethod
    def _bitmap_of(width: int, height: int, rgb: bytes, digest: str) -> Any:
        import llama_cpp.mtmd_cpp as mtmd

        pixels = (ctypes.c_ubyte * len(rgb)).from_buffer_copy(rgb)
        bitmap = mtmd.mtmd_bitmap_init(width, height, pixels)
        if not bitmap:
            raise PictureReadError("llama.cpp refused a picture's pixels.")
        mtmd.mtmd_bitmap_set_id(bitmap, digest.encode())
        return bitmap

    @contextlib.contextmanager
    def _probe_chunks(self) -> Iterator[list[Any]]:
        """A grey picture of the preferred size, tokenized: its image chunks (none when mtmd refuses it)."""
        import llama_cpp.mtmd_cpp as mtmd

        grey = bytes([128]) * (PROBE_SIDE * PROBE_SIDE * 3)
        with Bitmaps() as bitmaps:
            bitmaps.add(self._bitmap_of(PROBE_SIDE, PROBE_SIDE, grey, "probe"))
            chunks = mtmd.mtmd_input_chunks_init()
            try:
                marker = MARKER.encode()
                source = mtmd.mtmd_input_text()
                source.text, source.text_len, source.add_special, source.parse_special = (
                    marker,
                    len(marker),
                    False,
                    True,
                )
                if mtmd.mtmd_tokenize(self._context, chunks, ctypes.byref(source), bitmaps.array(), 1):
                    yield []
                    return
                every = (mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks)))
                yield [c for c in every if mtmd.mtmd_input_chunk_get_type(c) == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE]
            finally:
                mtmd.mtmd_input_chunks_free(chunks)

    def _probe_tokens(self) -> int:
        """How many tokens a picture scaled to the preferred size makes with this projector."""
        import llama_cpp.mtmd_cpp as mtmd

        with self._probe_chunks() as images:
            return sum(int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)) for chunk in images)

    def encode_probe(self) -> None:
        """Encode the grey picture (``engine.projector_trial``'s child: where a projector that cannot encode ends
        a process that is not the app); ``PictureReadError`` when llama.cpp refuses it without ending."""
        import llama_cpp.mtmd_cpp as mtmd

        with self._probe_chunks() as images:
            if not images:
                raise PictureReadError("llama.cpp could not read a picture with this projector.")
            for chunk in images:
                if mtmd.mtmd_encode_chunk(self._context, chunk) != 0:
                    raise PictureReadError("llama.cpp could not encode a picture with this projector.")

    # ------------------------------------------------------------------ reading

    def embeddings(self, prompt: VisionPrompt, span: PictureSpan) -> Any:
        """The picture's embeddings: kept from an earlier encoding, else encoded now (and kept)."""
        import llama_cpp.mtmd_cpp as mtmd
        import numpy as np

        key = (self.principal, span.digest)
        kept = self._embeddings.get(key)
        if kept is not None:
            self._embeddings.move_to_end(key)
            return kept
        chunk = prompt.chunk(span)
        n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        started = time.perf_counter()
        self._stopped = False
        if self.should_stop():
            raise EncodingStopped("stopped before the picture was encoded")
        with self.guard():
            failed = mtmd.mtmd_encode_chunk(self._context, chunk)
        if self._stopped:
            raise EncodingStopped("stopped while the picture was encoded")
        if failed != 0:
            raise PictureReadError("llama.cpp could not encode a picture.")
        self.encode_seconds.append((n_tokens, time.perf_counter() - started))
        self.encodes += 1
        output = mtmd.mtmd_get_output_embd(self._context)
        values = np.ctypeslib.as_array(output, shape=(n_tokens * self._n_embd,)).copy()
        self._embeddings[key] = values
        self._embeddings_bytes += values.nbytes
        while self._embeddings_bytes > EMBEDDINGS_KEPT_BYTES and len(self._embeddings) > 1:
            _, dropped = self._embeddings.popitem(last=False)
            self._embeddings_bytes -= dropped.nbytes
        return values

    def encode_ahead(self, prompt: VisionPrompt) -> int:
        """Encode the prompt's pictures not encoded yet (read-ahead, while the user types); how many were."""
        before = self.encodes
        for span in prompt.spans:
            self.embeddings(prompt, span)
        return self.encodes - before

    def decode(self, llm: Llama, prompt: VisionPrompt, span: PictureSpan) -> None:
        """Put the picture into the context at ``span.start`` (the context holds exactly that many tokens)."""
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        values = self.embeddings(prompt, span)
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), -1, span.start, -1)
        new_end = llama_cpp.llama_pos(0)
        pointer = values.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        failed = mtmd.mtmd_helper_decode_image_chunk(
            self._context,
            llm.ctx,
            prompt.chunk(span),
            pointer,
            span.start,
            0,
            llm.n_batch,
            ctypes.byref(new_end),
            mtmd.mtmd_helper_post_decode_callback(),
            None,  # no callback (a NULL function pointer)
        )
        if failed or new_end.value != span.end:
            raise PictureDecodeError(f"llama.cpp could not read a picture into the context ({failed}).")
        hold_tokens_from(llm, span.start, prompt.tokens[span.start : span.end])

    def evaluate(
        self, llm: Llama, prompt: VisionPrompt, start: int, end: int, read_text: Callable[[int, int], None]
    ) -> None:
        """Read ``start``..``end`` of the prompt: text through ``read_text(from, to)``, pictures whole."""
        for segment in prompt.segments(start, end):
            if isinstance(segment, PictureSpan):
                self.decode(llm, prompt, segment)
            else:
                read_text(*segment)


class Bitmaps:
    """mtmd bitmaps made for one call, freed together when the block ends (on every path)."""

    def __init__(self) -> None:
        self._held: list[Any] = []

    def add(self, bitmap: Any) -> None:
        self._held.append(bitmap)

    def array(self) -> Any:
        import llama_cpp.mtmd_cpp as mtmd

        return (mtmd.mtmd_bitmap_p_ctypes * max(1, len(self._held)))(*self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __enter__(self) -> Bitmaps:
        return self

    def __exit__(self, *_exc: object) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        held, self._held = self._held, []
        for bitmap in held:
            mtmd.mtmd_bitmap_free(bitmap)


def llama_cpp_eval_callback(function: Callable[[Any, bool, Any], bool]) -> Any:
    import llama_cpp

    return llama_cpp.ggml_backend_sched_eval_callback(function)


def llama_cpp_n_embd(llm: Llama) -> int:
    import llama_cpp

    return int(llama_cpp.llama_model_n_embd_inp(llm.model))  # the width mtmd writes embeddings in


def marked(rendered: str) -> str:
    """The one place a prompt's text gets mtmd's markers, once the template has rendered it: every marker already
    in it — from a message, a reply or its reasoning, a tool call's name or arguments, a tool's result, a tool's
    description or schema, a document passage, an imported chat — stays text, and each picture's slot becomes one."""
    return rendered.replace(MARKER, MARKER_IN_TEXT).replace(PICTURE_SLOT, MARKER)


def with_slots(content: str, count: int) -> str:
    """A message's text with its ``count`` pictures' slots before it."""
    return PICTURE_SLOT * count + ("\n" if count else "") + content


# A projector tried on a picture in a child process first (``engine.projector_trial``): (usable, why not), or None
# when the trial was stopped
Trial = Callable[[], "tuple[bool, str] | None"]


def open_vision(
    llm: Llama,
    info: ModelInfo,
    projector: Path,
    should_stop: Callable[[], bool],
    record: LoadRecord | None = None,
    trial: Trial = lambda: (True, ""),
) -> tuple[VisionModel | None, ModelInfo]:
    """The model's projector beside it (``should_stop``: asked while a picture is encoded); one that fails leaves
    the model usable for text, and says why. Its load and every encoding are kept in the crash ``record``: one that
    took the app down once is not loaded again (until the file changes), and the model is used for text."""
    crash = record.crash_of(projector) if record is not None else None
    if crash is not None:
        log.warning("The vision projector %s is not loaded: %s", one_line(projector.name), crash.reason)
        return None, replace(info, vision_problem=f"{one_line(projector.name, 120)}: {crash.reason}")
    tried = trial()
    if tried is None or not tried[0]:
        why = tried[1] if tried is not None else "its trial was stopped"
        log.warning("The vision projector %s is not loaded: %s", one_line(projector.name), why)
        return None, replace(info, vision_problem=f"{one_line(projector.name, 120)}: {one_line(why, 300)}")
    guard: Callable[[], AbstractContextManager[None]] = (
        (lambda: record.loading(projector)) if record is not None else contextlib.nullcontext
    )
    try:
        with guard():
            vision = VisionModel(projector, llm, info.n_threads_batch)
        vision.should_stop = should_stop
        vision.guard = guard
    except (FaraError, OSError) as exc:
        log.warning("The vision projector %s was not loaded: %s", one_line(projector.name), exc)
        return None, replace(info, vision_problem=one_line(str(exc), 300))
    return vision, replace(
        info,
        vision=one_line(projector.name, 200),
        picture_tokens=vision.tokens_per_picture,
        picture_seconds=vision.seconds_per_picture,
    )


def placed_pictures(
    messages: Sequence[ChatMessage], can_see: bool, info: ModelInfo
) -> tuple[list[ChatMessage], list[AttachedPicture]]:
    """The messages with their pictures' markers before their text, and the pictures in order. A model that cannot
    see refuses a new message's pictures (``PicturesUnsupportedError``) and is told of older ones in words."""
    pictures = [p for m in messages for p in m.pictures]
    if pictures and not can_see:
        if messages[-1].pictures:
            raise PicturesUnsupportedError(cannot_see(info.name, info.vision_problem))
        unseen = "(a picture this model cannot see)\n"
        return [
            replace(m, content=unseen * len(m.pictures) + m.content, pictures=()) if m.pictures else m for m in messages
        ], []
    if not pictures:
        return list(messages), []
    return [replace(m, content=with_slots(m.content, len(m.pictures))) if m.pictures else m for m in messages], pictures
