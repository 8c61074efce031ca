"""The user's settings: their values (``values``), the one description of each (``fields``: label, help,
range) and the file they are kept in (``file``)."""

from fara_desktop.settings.fields import THEMES, SettingField
from fara_desktop.settings.file import LoadedSettings, load_settings, save_settings, settings_file
from fara_desktop.settings.values import (
    InferenceOverrides,
    LocalApiSettings,
    PromptSettings,
    RemoteChoice,
    SamplingSettings,
    ServerEntry,
    Settings,
    ToolSettings,
)

__all__ = [
    "THEMES",
    "InferenceOverrides",
    "LoadedSettings",
    "LocalApiSettings",
    "PromptSettings",
    "RemoteChoice",
    "SamplingSettings",
    "ServerEntry",
    "SettingField",
    "Settings",
    "ToolSettings",
    "load_settings",
    "save_settings",
    "settings_file",
]
