"""Issue 66: the window ends as Ctrl+Q ends it when the session does. On the real X11 screen, with real key events:
SIGTERM or SIGHUP while a reply streams ends the app within the quit's limit, the reply kept as stopped with its
text, and no process of the app left; after a SIGKILL mid-reply, the next start shows the reply as interrupted, in
its chat, and Regenerate writes it again."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import wait_until
from tests.helpers.x11_app import launch, rows, screenshot, x11_app_env, xdotool

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("xdotool") is None, reason="xdotool is not installed (.ci/run installs it)"),
]

PROMPT = "Write a very long story about a dragon who learns to cook."
REPLIES = "SELECT id, content, status, stats FROM messages WHERE role = 'assistant' ORDER BY id"
QUIT_LIMIT_S = 30.0  # the quit's one limit (``app.jobs``), which a signal's quit keeps as Ctrl+Q's does


@pytest.fixture
def session_env(tmp_path: Path, smollm2_path: Path) -> dict[str, str]:
    env = x11_app_env(tmp_path)
    if "FARA_KERNEL_CACHE" in os.environ:  # the kernel check the session already made (tests/conftest.py)
        env["FARA_KERNEL_CACHE"] = os.environ["FARA_KERNEL_CACHE"]
    return env


def group_alive(pgid: int) -> list[int]:
    """The processes of group ``pgid`` still running (a zombie waiting for its parent is not)."""
    alive = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def ask_and_catch_mid_reply(database: Path) -> tuple[int, str]:
    """Type the prompt, press Enter, and wait until the reply, still streaming, has been saved in part."""
    xdotool("type", "--delay", "10", PROMPT)
    xdotool("key", "Return")

    def streaming_and_saved() -> tuple[int, str] | None:
        found = [r for r in rows(database, REPLIES) if r[2] == "streaming" and len(str(r[1])) >= 80]
        return (int(found[0][0]), str(found[0][1])) if found else None  # type: ignore[call-overload]

    return wait_until(streaming_and_saved, 240, "the streaming reply to be saved in part")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_session_ending_mid_reply_quits_as_ctrl_q_does(session_env, tmp_path, sig):
    database = Path(session_env["FARA_HOME"]) / "data" / "conversations.sqlite3"
    log = tmp_path / "stderr.txt"
    process, _window = launch(session_env, log, own_group=True)
    try:
        reply_id, partial = ask_and_catch_mid_reply(database)
        sent = time.monotonic()
        process.send_signal(sig)
        assert process.wait(QUIT_LIMIT_S + 10) == 0, log.read_text()[-3000:]
        waited = time.monotonic() - sent
        assert waited <= QUIT_LIMIT_S + 5, waited
        # nothing of the app left: no sandbox, no measuring child, no tool server
        wait_until(lambda: not group_alive(process.pid), 15, "every process of the app to end")
    finally:
        kill_group(process.pid)
        if process.poll() is None:
            process.kill()
    (saved,) = [r for r in rows(database, REPLIES) if r[0] == reply_id]
    assert saved[2] == "stopped"  # as Ctrl+Q keeps it, not "streaming" (the next start's "interrupted")
    assert str(saved[1]).startswith(partial) and len(str(saved[1])) >= len(partial)
    assert "interrupted" not in (json.loads(str(saved[3])) if saved[3] else {}).values()
    assert "Traceback" not in log.read_text()


def test_a_reply_killed_mid_way_is_shown_interrupted_and_regenerated(session_env, tmp_path):
    database = Path(session_env["FARA_HOME"]) / "data" / "conversations.sqlite3"
    log = tmp_path / "stderr.txt"
    process, _window = launch(session_env, log, own_group=True)
    try:
        reply_id, partial = ask_and_catch_mid_reply(database)
        process.send_signal(signal.SIGKILL)  # a power cut, the OOM killer: no handler runs
        process.wait(30)
    finally:
        kill_group(process.pid)  # what SIGKILL left behind is the test's to end, not the next start's
    assert [r[2] for r in rows(database, REPLIES) if r[0] == reply_id] == ["streaming"]

    again, _window = launch(session_env, log, own_group=True)
    try:
        # the chat is open at start, its reply interrupted with what was saved; Regenerate works at once
        def interrupted() -> bool:
            found = [r for r in rows(database, REPLIES) if r[0] == reply_id]
            return bool(found) and found[0][2] == "stopped" and "interrupted" in str(found[0][3])

        wait_until(interrupted, 60, "the interrupted reply to be marked at start")
        (kept,) = [r for r in rows(database, REPLIES) if r[0] == reply_id]
        assert str(kept[1]).startswith(partial)
        screenshot(tmp_path / "interrupted-at-start.png", session_env)
        keep_artefact(tmp_path / "interrupted-at-start.png")
        regenerated = wait_until(lambda: regenerate_until_complete(database, reply_id), 300, "a new version")
        assert str(regenerated[1]).strip()
        xdotool("key", "ctrl+q")
        assert again.wait(60) == 0, log.read_text()[-3000:]
    finally:
        kill_group(again.pid)
    assert [r[2] for r in rows(database, REPLIES) if r[0] == reply_id] == ["stopped"]  # the earlier version kept


def regenerate_until_complete(database: Path, reply_id: int) -> tuple[object, ...] | None:
    """Ctrl+Shift+R once the model has loaded (before, the window says no model is loaded yet), then the new
    version of the reply, once complete."""
    newer = [r for r in rows(database, REPLIES) if int(r[0]) > reply_id]  # type: ignore[call-overload]
    if not newer:
        xdotool("key", "ctrl+shift+r")
        return None
    return newer[-1] if newer[-1][2] == "complete" else None


def keep_artefact(shot: Path) -> None:
    folder = os.environ.get("FARA_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(folder) / shot.name)


def test_quit_signals_reach_the_event_loop_and_a_second_one_is_not_waited_for():
    """The notifier's part alone, in a child process waiting in ``app.exec`` with no timer (a Python handler alone
    would not run there): SIGTERM reaches ``received`` on the loop; the slot then stands for a quit that takes its
    time, and a second SIGTERM ends the process at once."""
    code = (
        "import signal, sys; from PySide6.QtWidgets import QApplication; app = QApplication([]); "
        "from fara_desktop.ui.quit_signals import QuitSignals; q = QuitSignals()\n"
        "def quit_slowly(name):\n"
        "    print(name, flush=True)\n"
        "    while True: signal.pause()  # a quit that takes its time\n"
        "q.received.connect(quit_slowly); print('ready', flush=True); sys.exit(app.exec() + 3)"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            child.send_signal(signal.SIGTERM)
            assert child.stdout.readline().strip() == "SIGTERM"  # the loop woke, though no event was due
            child.send_signal(signal.SIGTERM)
            assert child.wait(20) == 0  # not the 3 a finished loop gives: ended where the slow quit stood
        finally:
            if child.poll() is None:
                child.kill()
