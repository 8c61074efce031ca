"""A picture from outside, decoded by Pillow in the sandbox child (``system.sandbox``) with a pixel, memory and
time budget, and handed back as plain RGB: llama.cpp's own image decoder never sees a stranger's bytes.

What the child does: read at most the file's listed size; refuse more pixels than ``MAX_PIXELS`` before decoding
(a decompression bomb is a small file that says it is 100,000 × 100,000); take the first frame only (a GIF of
10,000 frames costs one); decode fully (a truncated file is refused, not half shown); turn it upright as its EXIF
says; convert any mode (CMYK, 16-bit, palette, alpha) to RGB; scale it down to the model's preferred size unless
asked to keep it whole.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fara_desktop.files.regular import open_regular
from fara_desktop.system.sandbox import Budget, BudgetExceededError, Sandbox, SandboxFailedError, allowed_classes
from fara_desktop.vocabulary.errors import FaraError

MB = 1024 * 1024
MAX_FILE_BYTES = 64 * MB
MAX_PIXELS = 50_000_000  # a 7,000 x 7,000 photo; more is a bomb or not a picture for a chat
PREFERRED_SIDE = 896  # what the small vision encoders of 2025-26 read (SigLIP 896, Qwen-VL ~1,000): more is slower


class UnreadablePicture(FaraError):
    """The file is not a picture this app can read, or asks for more than its budget (the message says which)."""


@dataclass(frozen=True)
class Picture:
    """A decoded picture: ``width`` × ``height`` pixels of 8-bit RGB, row after row."""

    width: int
    height: int
    rgb: bytes

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0 or len(self.rgb) != self.width * self.height * 3:
            raise UnreadablePicture("the reader sent back a picture of the wrong shape")


def decode_picture(fd: int, limit: int, max_pixels: int, side: int | None, *, emit: Callable[[Any], None]) -> Picture:
    """The sandbox job (runs in the child): see the module's notes. ``side``: the longest side to scale down to
    (None: keep the picture whole)."""
    from PIL import Image, ImageFile, ImageOps

    ImageFile.LOAD_TRUNCATED_IMAGES = False
    Image.MAX_IMAGE_PIXELS = None  # the check below refuses instead of Pillow's warning at 1x and error at 2x
    with os.fdopen(os.dup(fd), "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnreadablePicture(f"is larger than {limit // MB} MB")
    try:
        opened = Image.open(io.BytesIO(data), formats=chat_formats())
    except (OSError, ValueError, SyntaxError) as exc:
        raise UnreadablePicture("is not a picture this app reads (PNG, JPEG, GIF, WebP, BMP, TIFF)") from exc
    width, height = opened.size
    if width <= 0 or height <= 0 or width * height > max_pixels:
        raise UnreadablePicture(f"says it is {width:,} × {height:,} pixels: more than a picture for a chat")
    try:
        opened.seek(0)  # the first frame of an animation, never the others
        opened.load()
        upright = ImageOps.exif_transpose(opened) or opened
        image = upright.convert("RGB")
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise UnreadablePicture("is damaged or cut short") from exc
    if side is not None and max(image.size) > side:
        image.thumbnail((side, side), Image.Resampling.LANCZOS)
    return Picture(image.width, image.height, image.tobytes())


# The formats a chat's pictures come in, each read by Pillow's own code: never EPS or PostScript (Pillow hands those
# to Ghostscript, a program of its own), nor formats nobody sends in a chat (TGA, SGI, PCX, DDS, IM, XBM, ICNS, QOI).
CHAT_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF", "AVIF")


def chat_formats() -> list[str]:
    """The formats of ``CHAT_FORMATS`` this Pillow reads itself (AVIF only where its wheel carries the codec)."""
    from PIL import Image

    Image.init()
    return [name for name in CHAT_FORMATS if name in Image.OPEN]


PICTURE_CLASSES = allowed_classes(Picture)


def read_picture(
    path: Path,
    sandbox: Sandbox,
    keep_whole: bool = False,
    max_pixels: int = MAX_PIXELS,
    should_stop: Callable[[], bool] | None = None,
) -> Picture:
    """``path`` decoded in ``sandbox`` within the budget a picture needs; ``UnreadablePicture`` says why not,
    ``SandboxStoppedError`` that ``should_stop`` said so while it was read (the child is ended)."""
    try:
        fd = open_regular(path, follow_links=False)
    except OSError as exc:
        raise UnreadablePicture(f"cannot be opened ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        size = os.fstat(fd).st_size
        if size > MAX_FILE_BYTES:
            raise UnreadablePicture(f"is larger than {MAX_FILE_BYTES // MB} MB")
        # Memory: the file, the decoded frame at 4 bytes a pixel, a converted copy, and Python's own.
        budget = Budget(
            cpu_seconds=20.0, memory_bytes=256 * MB + size * 2 + max_pixels * 8, output_bytes=max_pixels * 3 + MB
        )
        side = None if keep_whole else PREFERRED_SIDE
        result = sandbox.run(
            decode_picture,
            fd,
            (size, max_pixels, side),
            budget,
            allowed=PICTURE_CLASSES,
            should_stop=should_stop,
            refusal=UnreadablePicture,
        )
    except (BudgetExceededError, SandboxFailedError) as exc:
        raise UnreadablePicture(str(exc)) from exc
    finally:
        os.close(fd)
    if not isinstance(result, Picture):
        raise UnreadablePicture("the reader sent back something that is not a picture")
    return result
