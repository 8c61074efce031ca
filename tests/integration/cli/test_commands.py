"""The command line as a person runs it, in child processes: --version, smoke through the real window and
model, export, clean names, read-only data folders, the launcher entry, a broken Qt plugin."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from PySide6.QtGui import QImage

from fara_desktop import APP_ID, __version__
from fara_desktop.cli.desktop_entry import install_desktop_entry, uninstall_desktop_entry
from fara_desktop.files import resources
from tests.conftest import without_root_powers
from tests.helpers.chatting import ask
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.paths import REPO_ROOT

ROOT = REPO_ROOT


def cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fara_desktop", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def run_cli(*args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """As a person in a terminal without a display runs it (``smoke`` must pick offscreen by itself)."""
    env = {**os.environ, "FARA_HOME": str(home)}
    env.pop("DISPLAY", None)
    env.pop("QT_QPA_PLATFORM", None)
    return cli(*args, env=env, timeout=timeout)


def test_version(fara_home):
    result = run_cli("--version", home=fara_home)
    assert result.returncode == 0
    assert result.stdout.strip() == f"fara-desktop {__version__}"


def test_gui_without_display_explains_itself(fara_home):
    result = run_cli(home=fara_home, timeout=60)
    assert result.returncode == 2
    assert "no display" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.real_model
def test_smoke_answers_through_the_real_window(fara_home, tmp_path, smollm2_path):
    shot = tmp_path / "window.png"
    result = run_cli("smoke", "--prompt", "Which planet do we live on?", "--screenshot", str(shot), home=fara_home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    payload = json.loads(lines[0])
    assert payload["prompt"] == "Which planet do we live on?"
    assert "Earth" in payload["reply"]
    assert payload["completion_tokens"] > 0
    assert payload["ttft_s"] > 0 and payload["gen_tok_per_s"] > 0
    assert payload["model_path"] == str(smollm2_path)
    assert shot.stat().st_size > 10_000
    assert (fara_home / "logs" / "fara-desktop.log").exists()


def test_smoke_with_a_bad_model_fails_with_one_clear_line(fara_home, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_text("not a model")
    result = run_cli("smoke", "--model", str(bogus), home=fara_home, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("fara-desktop smoke:")]
    assert len(error_lines) == 1 and "not a GGUF" in error_lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.real_model
def test_read_only_data_folder_still_chats_and_says_why(tmp_path, smollm2_path):
    """A data folder the user cannot write (a read-only mount, wrong owner): the app starts, answers, keeps the
    chat in a temporary database and says so; logs go to a temporary folder instead."""
    home = tmp_path / "read-only-home"
    for name in ("data", "config", "cache", "logs"):
        (home / name).mkdir(parents=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    for folder in [*home.iterdir(), home]:
        folder.chmod(0o500)
    env = {**os.environ, "FARA_HOME": str(home), "TMPDIR": str(scratch)}
    env.pop("DISPLAY", None)
    env.pop("QT_QPA_PLATFORM", None)
    command = [sys.executable, "-m", "fara_desktop", "smoke", "--prompt", "Which planet do we live on?"]
    try:
        result = subprocess.run(without_root_powers(command), capture_output=True, text=True, timeout=300, env=env)
    finally:
        for folder in [home, *home.iterdir()]:
            folder.chmod(0o700)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert "earth" in outcome["reply"].lower()
    assert any("cannot be created" in n and "temporary database" in n for n in outcome["notices"])
    assert not any(home.rglob("*.sqlite3"))  # nothing was written into the read-only folder
    assert list(scratch.glob("fara-desktop-logs-*/fara-desktop.log"))


def test_export_command(window, qtbot, tmp_path, fara_home):
    import subprocess
    import sys

    win = window()
    ask(qtbot, win, "Export me")
    win.close()
    out = tmp_path / "exported"
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "export", "--format", "json", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    files = list(out.glob("*.json"))
    assert len(files) == 1
    assert json.loads(files[0].read_text())["messages"][0]["content"] == "Export me"


def test_names_with_terminal_escapes_are_printed_clean(tmp_path: Path):
    home = tmp_path / "home"
    models = home / "data" / "models"
    models.mkdir(parents=True)
    write_tiny_model(models / "evil\x1b[2J\x1b]0;pwned\x07.gguf", name="Name\x1b[31mRED\x1b[0m\rOverwritten")
    env = {**os.environ, "FARA_HOME": str(home), "HOME": str(tmp_path), "HF_HUB_CACHE": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-m", "fara_desktop", "models"], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\r" not in done.stdout
    assert "evil [2J ]0;pwned" in done.stdout  # the display name (the file's, as named) with its controls made spaces


def test_the_wheel_ships_every_asset():
    """Every file under fara_desktop/assets matches the package-data patterns that put it into the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["fara_desktop.assets"]
    assets = ROOT / "fara_desktop" / "assets"
    files = [p.relative_to(assets).as_posix() for p in assets.rglob("*") if p.is_file()]
    assert len(files) >= 14
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert missing == []


def test_install_desktop_entry_from_the_command_line(tmp_path):
    data_home = tmp_path / "share"
    env = {**os.environ, "XDG_DATA_HOME": str(data_home), "FARA_HOME": str(tmp_path / "fara")}
    result = cli("install-desktop-entry", env=env)
    assert result.returncode == 0, result.stderr
    entry = data_home / "applications" / f"{APP_ID}.desktop"
    text = entry.read_text(encoding="utf-8")
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    program = exec_line.removeprefix("Exec=").split(" ")[0]
    assert os.access(program, os.X_OK), exec_line
    assert f"Icon={APP_ID}\n" in text and f"StartupWMClass={APP_ID}\n" in text
    for size in resources.ICON_SIZES:
        icon = data_home / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        assert QImage(str(icon)).width() == size
    assert (data_home / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").is_file()

    result = cli("install-desktop-entry", "--uninstall", env=env)
    assert result.returncode == 0, result.stderr
    assert not entry.exists()
    assert not list((data_home / "icons").rglob(f"{APP_ID}.*"))


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils is not installed")
@pytest.mark.parametrize(
    "command",
    [None, ["/opt/Fara Desktop/FaraDesktop"], ["/usr/bin/python3", "-m", "fara_desktop"]],
    ids=["this-install", "path-with-space", "python-module"],
)
def test_desktop_entry_passes_desktop_file_validate(tmp_path, command):
    result = install_desktop_entry(tmp_path, command)
    check = subprocess.run(["desktop-file-validate", str(result.entry)], capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.strip() == "", check.stdout
    uninstall_desktop_entry(tmp_path)
    assert not result.entry.exists()


def test_broken_qt_platform_plugin_gives_a_clear_message(fara_home):
    env = {**os.environ, "FARA_HOME": str(fara_home), "QT_QPA_PLATFORM": "no-such-platform"}
    result = cli(env=env)
    assert result.returncode == 2
    assert "display plugin failed to start" in result.stderr
    assert "libxcb-cursor0" in result.stderr
    assert "Traceback" not in result.stderr and "Aborted" not in result.stderr


def test_the_command_line_says_what_it_will_not_do(tmp_path: Path):
    """Issue 29, item 12: help names what to type (no SMOKE_MODEL), a --model that a command ignores is an error,
    and an unknown benchmark section is named."""
    import subprocess
    import sys

    env = {**os.environ, "FARA_HOME": str(tmp_path / "home")}
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "fara_desktop", *args], capture_output=True, text=True, timeout=120, env=env
    )
    for command in ("smoke", "serve", "bench"):
        shown = run(command, "--help").stdout
        assert "SMOKE_MODEL" not in shown and "SERVE_MODEL" not in shown and "BENCH_MODEL" not in shown
        assert "SERVE_API_KEY" not in shown
    ignored = run("--model", "/nonexistent.gguf", "models")
    assert ignored.returncode == 2 and "`models` does not use it" in ignored.stderr
    unknown = run("bench", "--section", "nonsense")
    assert unknown.returncode == 2 and "there is no section nonsense" in unknown.stderr


def test_a_backup_with_tool_calls_is_restored_into_a_fresh_folder(tmp_path):
    """Issue 51, item 4: ``export`` then ``import`` into another folder refused the chat that called a tool (the
    reader's answer held records the import did not allow). Its tool round comes back whole — a round named like
    mtmd's marker too (it stays text in every prompt: tests/integration/pictures)."""
    from fara_desktop.chats.storage import ConversationStore, database_path
    from fara_desktop.chats.tool_rounds import ToolRound, ToolUse
    from fara_desktop.files.paths import app_paths
    from fara_desktop.vocabulary.tools import ToolCall

    first, second = tmp_path / "first", tmp_path / "second"
    paths = app_paths({"FARA_HOME": str(first)}).ensure()
    store = ConversationStore(database_path(paths.data))
    chat = store.create_conversation("Weather")
    store.add_message(chat, "user", "What is the weather?")
    reply = store.add_message(chat, "assistant", "")
    used = ToolUse(ToolCall("c1", "<__media__>", '{"city": "Porto"}'), "weather", "ran", "Sunny, 24 °C")
    store.update_message(reply.id, "It is sunny.", tool_rounds=(ToolRound("Let me look.", "", (used,)),))
    store.close()
    backup = tmp_path / "backup"
    exported = run_cli("export", "--format", "json", "--out", str(backup), home=first)
    assert exported.returncode == 0, exported.stderr
    (written,) = backup.glob("*.json")
    imported = run_cli("import", str(written), home=second)
    assert imported.returncode == 0, imported.stderr
    restored = ConversationStore(database_path(app_paths({"FARA_HOME": str(second)}).data))
    (summary,) = restored.conversations("")
    messages = restored.messages(summary.id)
    restored.close()
    assert [m.content for m in messages] == ["What is the weather?", "It is sunny."]
    assert messages[1].tool_rounds == (ToolRound("Let me look.", "", (used,)),)
