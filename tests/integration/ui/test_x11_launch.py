"""As a person launches it: the installed command, started the way the launcher entry starts it, in a fresh home,
on the real X11 platform (Xvfb at 1366×768), typed into with real key events (xdotool), quit with Ctrl+Q, and
started again with the chat still there."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.helpers.x11_app import launch, rows, screenshot, x11_app_env, xdotool

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("xdotool") is None, reason="xdotool is not installed (.ci/run installs it)"),
]

QUESTION = "What is the capital of France?"


@pytest.fixture
def x11_env(tmp_path: Path, smollm2_path: Path) -> dict[str, str]:
    return x11_app_env(tmp_path)


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
