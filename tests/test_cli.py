"""The command-line surface: --version, and `smoke` through the real window and the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop import __version__
from tests.conftest import without_root_powers


def run_cli(*args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FARA_HOME": str(home)}
    env.pop("DISPLAY", None)
    env.pop("QT_QPA_PLATFORM", None)  # smoke must pick offscreen by itself
    return subprocess.run(
        [sys.executable, "-m", "fara_desktop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


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
