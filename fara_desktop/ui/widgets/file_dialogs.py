"""File dialogs that open where the user last went for the same purpose (models, documents, exports, imports),
across restarts, instead of always in the home folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from fara_desktop.files.atomic import write_json_atomically
from fara_desktop.files.regular import read_regular_text

log = logging.getLogger(__name__)
FILE_NAME = "last-folders.json"
PURPOSES = ("models", "documents", "exports", "imports", "pictures")


class FolderMemory:
    """The last folder used for each purpose, kept in the config folder (a missing or damaged file: none)."""

    def __init__(self, config: Path | None = None) -> None:
        self._file = config / FILE_NAME if config is not None else None
        self._last: dict[str, str] = {}
        if self._file is not None:
            try:
                data = json.loads(read_regular_text(self._file, 64 * 1024))
            except (OSError, ValueError):
                data = {}
            if isinstance(data, dict):
                self._last = {k: v for k, v in data.items() if k in PURPOSES and isinstance(v, str)}

    def start(self, purpose: str) -> str:
        """Where a dialog for ``purpose`` opens: the folder last used, while it exists; else the home folder."""
        folder = self._last.get(purpose)
        return folder if folder and Path(folder).is_dir() else str(Path.home())

    def used(self, purpose: str, chosen: str) -> None:
        """``chosen``: a file or a folder the user picked for ``purpose``."""
        if not chosen:
            return
        path = Path(chosen)
        self._last[purpose] = str(path if path.is_dir() else path.parent)
        if self._file is not None:
            try:
                write_json_atomically(self._file, self._last)
            except OSError:  # only a convenience
                log.info("The last folders could not be kept", exc_info=True)

    def open_file(self, parent: QWidget, purpose: str, caption: str, filters: str = "") -> str:
        path, _ = QFileDialog.getOpenFileName(parent, caption, self.start(purpose), filters)
        self.used(purpose, path)
        return str(path)

    def open_files(self, parent: QWidget, purpose: str, caption: str, filters: str = "") -> list[str]:
        paths, _ = QFileDialog.getOpenFileNames(parent, caption, self.start(purpose), filters)
        if paths:
            self.used(purpose, paths[0])
        return list(paths)

    def folder(self, parent: QWidget, purpose: str, caption: str) -> str:
        folder = QFileDialog.getExistingDirectory(parent, caption, self.start(purpose))
        self.used(purpose, folder)
        return str(folder)
