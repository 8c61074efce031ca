"""The settings file: hostile or broken content falls back to defaults, a FIFO never blocks, a corrupt file is
kept aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.files.paths import app_paths
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


def test_every_setting_is_described_once_and_the_readme_shows_the_description():
    from fara_desktop.settings.fields import FIELDS
    from fara_desktop.settings.table import settings_table
    from fara_desktop.settings.values import default_of

    assert len({f.key for f in FIELDS}) == len(FIELDS)
    for item in FIELDS:
        default = default_of(item.key)  # every described key is a real setting
        if isinstance(default, (int, float)) and not isinstance(default, bool) and item.low is not None:
            assert item.within(default), item.key
        assert item.help.endswith(".") and len(item.help) < 260, item.key
    guide = (Path(__file__).parents[3] / "docs" / "guide.md").read_text(encoding="utf-8")
    assert settings_table() in guide, "the guide's table differs: paste fara_desktop.settings.table.settings_table()"


def test_the_loader_keeps_values_within_their_described_ranges():
    from fara_desktop.settings.fields import described

    top = described("sampling.seed").high
    kept = Settings.from_json({"sampling": {"seed": top, "temperature": 5.0}, "prompts": {"chat_states_gb": 10_000}})
    assert kept.sampling.seed == top and kept.sampling.temperature == 5.0 and kept.prompts.chat_states_gb == 10_000
    dropped = Settings.from_json({"sampling": {"seed": top + 1, "temperature": 5.01}, "font_size": 25})
    assert dropped.sampling.seed is None and dropped.sampling.temperature == 0.7 and dropped.font_size == 10
    small = Settings.from_json({"inference": {"n_ctx": 100, "n_threads": 0, "n_batch": 100_000}}).inference
    assert (small.n_ctx, small.n_threads, small.n_batch) == (256, None, 8192)
