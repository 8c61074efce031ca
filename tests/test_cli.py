"""The command-line surface: --version, and `smoke` through the real window and the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop import __version__


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
