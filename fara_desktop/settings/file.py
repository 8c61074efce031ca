"""The settings file: one JSON file, read within a size limit, written atomically; a corrupt file is kept aside."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from fara_desktop.files.atomic import write_json_atomically
from fara_desktop.files.regular import read_regular_text
from fara_desktop.settings.values import SCHEMA_VERSION, Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    notice: str | None  # set when the file was unusable and defaults are in use


def settings_file(config_dir: Path) -> Path:
    return config_dir / "settings.json"


MAX_SETTINGS_BYTES = 1 << 20


def load_settings(config_dir: Path) -> LoadedSettings:
    path = settings_file(config_dir)
    if not os.path.lexists(path):
        return LoadedSettings(Settings(), None)
    try:
        data = json.loads(read_regular_text(path, MAX_SETTINGS_BYTES))
        if not isinstance(data, dict):
            raise ValueError("the file does not hold a settings object")
        if int(data.get("schema_version", SCHEMA_VERSION)) > SCHEMA_VERSION:
            raise ValueError(f"it was written by a newer Fara Desktop (schema {data['schema_version']})")
        return LoadedSettings(Settings.from_json(data), None)
    except (OSError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        exc = exc if not isinstance(exc, RecursionError) else ValueError("it is nested too deeply")
        kept = path.with_name(f"settings.corrupt-{time.strftime('%Y%m%d-%H%M%S')}.json")
        try:
            os.replace(path, kept)
        except OSError:
            kept = path
        log.warning("Settings file %s is unusable (%s); kept as %s", path, exc, kept)
        return LoadedSettings(
            Settings(),
            f"Your settings could not be read ({exc}); defaults are in use. The old file was kept as {kept}.",
        )


def save_settings(config_dir: Path, settings: Settings) -> None:
    write_json_atomically(settings_file(config_dir), settings.to_json())
