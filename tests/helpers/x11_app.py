"""The app as a person runs it on a real X11 screen (Xvfb, started by pytest-xvfb): launched as its launcher entry
launches it, typed into with real key events (xdotool), its chats read from the database it writes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop.cli.desktop_entry import launch_command


def x11_app_env(home: Path) -> dict[str, str]:
    """The environment the launcher gives the app, with a fresh home; skips without the Xvfb screen."""
    if os.environ.get("QT_QPA_PLATFORM") != "xcb" or not os.environ.get("DISPLAY"):
        pytest.skip("needs the Xvfb screen pytest-xvfb starts (.ci/run installs Xvfb)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QT_", "FARA_"))}  # as the launcher starts it
    return {**env, "HOME": str(home / "home"), "FARA_HOME": str(home / "fara")}


def xdotool(*args: str, timeout: float = 60) -> str:
    result = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def launch(
    env: dict[str, str], log: Path, command: list[str] | None = None, own_group: bool = False
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the app as its launcher entry does (or with ``command``; ``own_group``: in a process group of its own,
    whose id is its pid) and wait for its main window; returns the process and window id."""
    with open(log, "ab") as stderr:
        process = subprocess.Popen(command or launch_command(), env=env, stderr=stderr, start_new_session=own_group)
    window = xdotool("search", "--sync", "--onlyvisible", "--name", "^Fara Desktop$").splitlines()[0]
    xdotool("windowfocus", "--sync", window)
    return process, window


def rows(database: Path, query: str) -> list[tuple[object, ...]]:
    if not database.exists():
        return []
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def screenshot(path: Path, env: dict[str, str]) -> None:
    """The whole X screen, grabbed by a Qt client of its own."""
    code = (
        "import sys; from PySide6.QtGui import QGuiApplication; app = QGuiApplication([]); "
        "sys.exit(0 if QGuiApplication.primaryScreen().grabWindow(0).save(sys.argv[1]) else 1)"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], env={**env, "QT_QPA_PLATFORM": "xcb"}, check=True,
                   timeout=60)  # fmt: skip
