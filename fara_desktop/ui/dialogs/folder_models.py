"""The models of folders added on Settings ▸ Model, listed as soon as they are found (they were shown only after
OK and reopening the dialog): each folder read off the GUI thread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QWidget

from fara_desktop.models.discovery import DiscoveredModel
from fara_desktop.ui.background import BackgroundCall


class FolderModels:
    """``scan`` finds a folder's models; ``found(folder, models)`` is called on the GUI thread for a folder still
    wanted then (``wanted``: the dialog's folders as they are now)."""

    def __init__(
        self,
        owner: QWidget,
        scan: Callable[[Path], list[DiscoveredModel]] | None,
        wanted: Callable[[], list[str]],
        found: Callable[[Path, list[DiscoveredModel]], None],
    ) -> None:
        self._owner = owner
        self._scan = scan
        self._wanted = wanted
        self._found = found
        self.models: list[DiscoveredModel] = []  # of every folder added, in the order found
        self._calls: set[BackgroundCall] = set()

    def add(self, folder: Path) -> None:
        scan = self._scan
        if scan is None:
            return
        call = BackgroundCall(lambda: scan(folder), self._owner)
        self._calls.add(call)

        def done(models: list[DiscoveredModel]) -> None:
            self._calls.discard(call)
            if str(folder) in self._wanted():  # removed meanwhile: nothing is added
                self.models.extend(models)
                self._found(folder, models)

        call.done.connect(done)
        call.failed.connect(lambda _error: self._calls.discard(call))
        call.start()
