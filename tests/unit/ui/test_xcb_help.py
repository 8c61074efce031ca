"""When Qt's X11 plugin cannot start, the help names the libraries that are really missing (from the plugin's own
dependencies), with the command that installs them — not always the one library Qt's own message guesses."""

from __future__ import annotations

import shutil

import pytest

from fara_desktop.ui import application
from fara_desktop.ui.application import qt_fatal_help
from fara_desktop.ui.xcb_help import install_advice, missing_xcb_libraries, not_found, xcb_plugin

# What ldd printed for libqxcb.so on a fresh Debian 13 with libxcb-cursor0 installed and two others missing.
LDD_OUTPUT = """\
\tlinux-vdso.so.1 (0x00007ffd6b5f2000)
\tlibQt6XcbQpa.so.6 => /venv/lib/python3.13/site-packages/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f1c2b400000)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f1c2b3f0000)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f1c2b3c0000)
\tlibxcb-icccm.so.4 => not found
"""
QT_FATAL = 'Could not load the Qt platform plugin "xcb" in "" even though it was found.'


def test_ldd_lines_that_were_not_found_are_the_missing_libraries():
    assert not_found(LDD_OUTPUT) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]


def test_the_help_names_the_missing_libraries_and_one_command_per_system(monkeypatch):
    monkeypatch.setattr(application, "missing_xcb_libraries", lambda: not_found(LDD_OUTPUT))
    text = qt_fatal_help(QT_FATAL)
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in text
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in text
    assert "sudo dnf install xcb-util-wm xcb-util-keysyms" in text
    assert "libxcb-cursor0" not in text  # installed already: naming it again is what sent the user in circles


def test_a_library_we_do_not_know_is_named_as_it_is():
    text = install_advice(["libxcb-new-thing.so.9"])
    assert "libxcb-new-thing.so.9" in text and "apt install" not in text


@pytest.mark.skipif(shutil.which("ldd") is None or xcb_plugin() is None, reason="needs ldd and PySide6's xcb plugin")
def test_the_real_plugin_is_checked_with_ldd():
    missing = missing_xcb_libraries()
    assert isinstance(missing, list)
    assert all(name.startswith("lib") for name in missing)
