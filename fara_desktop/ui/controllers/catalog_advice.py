"""Advice from the catalog judged for this computer, worked out off the window's thread: the models that call
tools (when the model in use cannot), and a download worth suggesting on the welcome (once per start, until the
user says *Not now*)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from fara_desktop.app.download_advice import download_suggestion
from fara_desktop.app.tool_advice import cannot_call_tools, models_that_call_tools
from fara_desktop.engine.types import ModelInfo
from fara_desktop.files.paths import AppPaths
from fara_desktop.planning.catalog_fit import assess_catalog_here
from fara_desktop.planning.planner import StartupPlan
from fara_desktop.settings import Settings
from fara_desktop.ui.background import BackgroundCall

NOT_NOW_FILE = "download-suggestion-dismissed"  # in the config folder: the welcome stops suggesting


class CatalogAdvice(QObject):
    """Emits ``toolModels(lines)`` and ``downloadSuggested(text)`` on the window's thread."""

    toolModels = Signal(list)
    downloadSuggested = Signal(str)

    def __init__(self, paths: AppPaths, settings: Callable[[], Settings]) -> None:
        super().__init__()
        self._paths = paths
        self._settings = settings
        self._tool_models: BackgroundCall | None = None
        self._download: BackgroundCall | None = None

    def _folders(self) -> list[Path]:
        return [Path(f) for f in self._settings().extra_model_folders]

    def models_that_call_tools(self, info: ModelInfo) -> None:
        """A model that cannot call tools is loaded while tool servers are on: which catalog models can (once)."""
        if not cannot_call_tools(info) or self._tool_models is not None or not self._settings().tools.enabled:
            return
        paths, folders = self._paths, self._folders()
        self._tool_models = BackgroundCall(
            lambda: models_that_call_tools(assess_catalog_here(paths.models, paths.cache, folders)), self
        )
        self._tool_models.done.connect(self.toolModels.emit)
        self._tool_models.start()

    def download(self, plan: StartupPlan) -> None:
        """The catalog's pick, when far more capable than the best model here (once per start)."""
        if self._download is not None or (self._paths.config / NOT_NOW_FILE).exists():
            return
        paths, folders = self._paths, self._folders()
        installed = [m.metadata for m in plan.scan.usable if m.metadata]
        self._download = BackgroundCall(
            lambda: download_suggestion(assess_catalog_here(paths.models, paths.cache, folders), installed), self
        )
        self._download.done.connect(lambda text: self.downloadSuggested.emit(text) if text else None)
        self._download.start()

    def download_dismissed(self) -> None:
        with contextlib.suppress(OSError):  # said again next time: nothing worse
            (self._paths.config / NOT_NOW_FILE).touch()
