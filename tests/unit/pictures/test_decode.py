"""Pictures from outside, decoded in the sandbox child within a budget (issue 44: untrusted pixels): ordinary
pictures in every mode come back upright RGB at the model's size; hostile ones are refused within budget."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from fara_desktop.pictures.decode import PREFERRED_SIDE, Picture, UnreadablePicture, read_picture
from fara_desktop.system.sandbox import Sandbox


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox() as box:
        yield box


def _save(path: Path, image: Image.Image, **kwargs) -> Path:
    image.save(path, **kwargs)
    return path


def test_every_mode_comes_back_rgb_upright_and_scaled(sandbox, tmp_path):
    cmyk = read_picture(_save(tmp_path / "cmyk.jpg", Image.new("CMYK", (40, 30), (0, 255, 255, 0))), sandbox)
    assert (cmyk.width, cmyk.height) == (40, 30) and cmyk.rgb[:3][0] > 200  # red
    deep = read_picture(_save(tmp_path / "deep.png", Image.new("I;16", (20, 10), 40_000)), sandbox)
    assert (deep.width, deep.height) == (20, 10) and len(deep.rgb) == 600
    palette = read_picture(_save(tmp_path / "p.gif", Image.new("P", (8, 8), 3)), sandbox)
    assert len(palette.rgb) == 8 * 8 * 3
    rotated = Image.new("RGB", (60, 20), (0, 0, 255))
    exif = rotated.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to show"
    upright = read_picture(_save(tmp_path / "phone.jpg", rotated, exif=exif), sandbox)
    assert (upright.width, upright.height) == (20, 60)
    big = read_picture(_save(tmp_path / "big.png", Image.new("RGB", (3000, 1500), (9, 9, 9))), sandbox)
    assert (big.width, big.height) == (PREFERRED_SIDE, PREFERRED_SIDE // 2)
    whole = read_picture(tmp_path / "big.png", sandbox, keep_whole=True)
    assert (whole.width, whole.height) == (3000, 1500) and isinstance(whole, Picture)


def test_a_decompression_bomb_is_refused_before_it_is_decoded(sandbox, tmp_path):
    bomb = tmp_path / "bomb.png"
    Image.new("1", (30_000, 30_000)).save(bomb)  # 900 million pixels in a small file
    assert bomb.stat().st_size < 2_000_000
    with pytest.raises(UnreadablePicture, match="30,000 × 30,000 pixels"):  # refused from its header, not decoded
        read_picture(bomb, sandbox)


def test_a_truncated_file_and_a_stranger_are_refused(sandbox, tmp_path):
    good = _save(tmp_path / "good.jpg", Image.new("RGB", (400, 300), (200, 10, 10)))
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(UnreadablePicture, match="damaged or cut short"):
        read_picture(cut, sandbox)
    fake = tmp_path / "fake.png"
    fake.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really" * 100)
    with pytest.raises(UnreadablePicture):
        read_picture(fake, sandbox)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(UnreadablePicture, match="not a picture"):
        read_picture(text, sandbox)
    link = tmp_path / "link.png"
    link.symlink_to(good)
    with pytest.raises(UnreadablePicture, match="cannot be opened"):
        read_picture(link, sandbox)
    assert read_picture(good, sandbox).width == 400  # the child lives on


def test_an_animation_of_ten_thousand_frames_costs_its_first_frame(sandbox, tmp_path):
    frames = [Image.new("P", (16, 16), i % 200) for i in range(10_000)]
    gif = tmp_path / "long.gif"
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=10)
    gif.write_bytes(buffer.getvalue())
    picture = read_picture(gif, sandbox)  # within the job's processor budget (20 s), or it would be refused
    assert (picture.width, picture.height) == (16, 16)
