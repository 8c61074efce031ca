"""As a person launches it: the installed command, started the way the launcher entry starts it, in a fresh home,
on the real X11 platform (Xvfb at 1366×768), typed into with real key events (xdotool), quit with Ctrl+Q, and
started again with the chat still there."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fara_desktop.cli.desktop_entry import launch_command
from tests.conftest import wait_until

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("xdotool") is None, reason="xdotool is not installed (.ci/run installs it)"),
]

QUESTION = "What is the capital of France?"


@pytest.fixture
def x11_env(tmp_path: Path, smollm2_path: Path) -> dict[str, str]:
    if os.environ.get("QT_QPA_PLATFORM") != "xcb" or not os.environ.get("DISPLAY"):
        pytest.skip("needs the Xvfb screen pytest-xvfb starts (.ci/run installs Xvfb)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QT_", "FARA_"))}  # as the launcher starts it
    return {**env, "HOME": str(tmp_path / "home"), "FARA_HOME": str(tmp_path / "fara")}


def xdotool(*args: str, timeout: float = 60) -> str:
    result = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def launch(env: dict[str, str], log: Path, command: list[str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start the app as its launcher entry does (or with ``command``) and wait for its main window; returns the
    process and window id."""
    with open(log, "ab") as stderr:
        process = subprocess.Popen(command or launch_command(), env=env, stderr=stderr)
    window = xdotool("search", "--sync", "--onlyvisible", "--name", "^Fara Desktop$").splitlines()[0]
    xdotool("windowfocus", "--sync", window)
    return process, window


def screenshot(path: Path, env: dict[str, str]) -> None:
    """The whole X screen, grabbed by a Qt client of its own."""
    code = (
        "import sys; from PySide6.QtGui import QGuiApplication; app = QGuiApplication([]); "
        "sys.exit(0 if QGuiApplication.primaryScreen().grabWindow(0).save(sys.argv[1]) else 1)"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], env={**env, "QT_QPA_PLATFORM": "xcb"}, check=True,
                   timeout=60)  # fmt: skip


def run_once(
    env: dict[str, str], log: Path, act: Callable[[], None], shot: Path, command: list[str] | None = None
) -> None:
    """Launch, do ``act``, screenshot, quit with Ctrl+Q (exit status 0); the process never outlives the test."""
    process, _window = launch(env, log, command)
    try:
        act()
        screenshot(shot, env)
        xdotool("key", "ctrl+q")
        assert process.wait(timeout=60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()


def rows(database: Path, query: str) -> list[tuple[object, ...]]:
    if not database.exists():
        return []
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def ask_and_wait(database: Path) -> None:
    """Type the question with real key events, press Enter, and wait until the reply is saved complete."""
    xdotool("type", "--delay", "15", QUESTION)
    xdotool("key", "Return")
    query = "SELECT role, content, status FROM messages ORDER BY position"
    finished = wait_until(
        lambda: [r for r in rows(database, query) if r[0] == "assistant" and r[2] == "complete"],
        timeout=240,
        what="the reply to be written",
    )
    assert finished[0][1].strip()


def test_launch_type_quit_and_find_the_chat_again(x11_env: dict[str, str], tmp_path: Path):
    database = Path(x11_env["FARA_HOME"]) / "data" / "conversations.sqlite3"
    messages = "SELECT role, content, status, created_at FROM messages ORDER BY position"
    log = tmp_path / "stderr.txt"

    run_once(x11_env, log, lambda: ask_and_wait(database), tmp_path / "x11-reply.png")
    before = rows(database, messages)
    assert before[0][:2] == ("user", QUESTION)
    run_once(x11_env, log, lambda: None, tmp_path / "x11-relaunched.png")
    after = rows(database, messages)
    assert after == before  # the same chat, with the times it was written, not rewritten by the second start
    from PySide6.QtGui import QImage

    shot = QImage(str(tmp_path / "x11-reply.png"))
    assert (shot.width(), shot.height()) == (1366, 768)
