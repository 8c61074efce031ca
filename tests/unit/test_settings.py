"""The settings file: hostile or broken content falls back to defaults, a FIFO never blocks, a corrupt file is
kept aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.paths import app_paths
from fara_desktop.settings import Settings, load_settings, settings_file
from tests.helpers.fifo_watch import watched_fifo


@pytest.mark.parametrize(
    "content",
    ['{"schema_version": 1e400}', '{"sampling": {"seed": 1e400, "temperature": 1e400}}', "[" * 50_000 + "]" * 50_000],
)
def test_settings_with_huge_numbers_or_deep_nesting_fall_back_to_defaults(tmp_path: Path, content: str):
    settings_file(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    settings_file(tmp_path).write_text(content)
    loaded = load_settings(tmp_path)
    assert loaded.settings.sampling == Settings().sampling


def test_a_fifo_as_settings_file_does_not_block_start_up(tmp_path: Path):
    settings_file(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    with watched_fifo(settings_file(tmp_path)) as fifo:
        loaded = load_settings(tmp_path)
    assert fifo.opened == 0
    assert loaded.settings == Settings() and loaded.notice


def test_corrupt_settings_file_is_kept_aside(tmp_path):
    config = app_paths().config
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.json").write_text("{ not json")
    loaded = load_settings(config)
    assert loaded.notice and "defaults are in use" in loaded.notice
    kept = list(config.glob("settings.corrupt-*.json"))
    assert len(kept) == 1 and kept[0].read_text() == "{ not json"
