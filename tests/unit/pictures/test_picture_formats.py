"""Only the formats a chat needs are opened (issue 51, items 2 and 11): a stranger's PostScript never reaches
Ghostscript, whatever it is called, and formats nobody sends in a chat are refused; the sandbox's child ends with
whatever it started (its process group)."""

from __future__ import annotations

import contextlib
import io
import os
import stat
from pathlib import Path

import psutil
import pytest
from PIL import Image

from fara_desktop.pictures.decode import UnreadablePicture, read_picture
from fara_desktop.system.sandbox import Budget, Sandbox, SandboxStoppedError

EPS = (
    b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 32 32\n%%EndComments\n"
    b"0 0 moveto 32 32 lineto stroke\nshowpage\n%%EOF\n"
)


@pytest.fixture
def watched_gs(tmp_path, monkeypatch):
    """A ``gs`` first on PATH that only says it was started (the sandbox's child inherits the environment)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    started = tmp_path / "gs-started"
    script = folder / "gs"
    script.write_text(f"#!/bin/sh\ntouch '{started}'\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return started


@pytest.mark.parametrize("name", ["drawing.eps", "photo.png", "file-Abc123.png", "picture.ps", "scan.pdf"])
def test_postscript_offered_as_a_picture_never_starts_ghostscript(tmp_path, watched_gs, name):
    path = tmp_path / name
    path.write_bytes(EPS)
    with Sandbox() as sandbox, pytest.raises(UnreadablePicture, match="not a picture this app reads"):
        read_picture(path, sandbox)
    assert not watched_gs.exists(), "Ghostscript was started for a stranger's picture"


@pytest.mark.parametrize("format_name", ["TGA", "SGI", "PCX", "DDS", "XBM", "ICNS", "QOI", "PPM"])
def test_formats_nobody_sends_in_a_chat_are_refused(tmp_path, format_name):
    buffer = io.BytesIO()
    mode = "1" if format_name == "XBM" else "RGB"
    Image.new(mode, (16, 16)).save(buffer, format=format_name)
    path = tmp_path / f"picture.{format_name.lower()}"
    path.write_bytes(buffer.getvalue())
    with Sandbox() as sandbox, pytest.raises(UnreadablePicture, match="not a picture this app reads"):
        read_picture(path, sandbox)


@pytest.mark.parametrize("format_name", ["PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF"])
def test_the_formats_a_chat_needs_are_read(tmp_path, format_name):
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), (200, 30, 30)).save(buffer, format=format_name)
    path = tmp_path / f"picture.{format_name.lower()}"
    path.write_bytes(buffer.getvalue())
    with Sandbox() as sandbox:
        picture = read_picture(path, sandbox)
    assert (picture.width, picture.height) == (16, 12)


def start_a_grandchild(fd, marker: str, *, emit):
    """A sandbox job that starts a program of its own which would outlive it, then waits to be stopped."""
    import subprocess
    import threading

    child = subprocess.Popen(["sleep", "300"])
    Path(marker).write_text(str(child.pid))
    threading.Event().wait(300)  # until the sandbox ends it


def test_a_stopped_sandbox_ends_what_its_child_started(tmp_path):
    marker = tmp_path / "grandchild"
    budget = Budget(cpu_seconds=5, memory_bytes=512 << 20, output_bytes=1 << 20)
    with Sandbox() as sandbox, pytest.raises(SandboxStoppedError):
        sandbox.run(start_a_grandchild, None, (str(marker),), budget, should_stop=marker.exists)
    grandchild = int(marker.read_text())
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(grandchild).wait(10)  # killed with its group: gone at once (a survivor sleeps 300 s)
