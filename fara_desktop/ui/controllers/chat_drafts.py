"""What each chat's message box held when the user left it — the words typed and the pictures attached — given back
when they return, for as long as the app runs, so that nothing typed for one chat is sent to another by mistake.
The pictures waiting in drafts are held in the picture ledger, so nothing deletes them meanwhile."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QTextCursor

from fara_desktop.app.picture_ledger import PictureLedger
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.picture_thumbnails import PictureTray

HOLDER = "drafts"  # the ledger's name for the pictures that wait in other chats' drafts


class ChatDrafts:
    """The unsent words and pictures of each chat left, by conversation (None: a new chat not yet saved)."""

    def __init__(self, composer: Composer, tray: PictureTray, ledger: PictureLedger | None) -> None:
        self._composer = composer
        self._tray = tray
        self._ledger = ledger
        self._drafts: dict[int | None, tuple[str, tuple[tuple[str, Path], ...]]] = {}

    def leave(self, conversation: int | None) -> None:
        """The user leaves ``conversation``: what its box holds is kept for it, and the box emptied."""
        text = self._composer.toPlainText()
        pictures = tuple(zip(self._tray.digests(), self._tray.paths(), strict=True))
        if text.strip() or pictures:
            self._drafts[conversation] = (text, pictures)
        else:
            self._drafts.pop(conversation, None)
        self._hold()  # before the tray lets them go
        self._composer.clear()
        self._tray.clear()

    def enter(self, conversation: int | None) -> None:
        """The user opens ``conversation``: its draft, if it has one, is back in the box."""
        text, pictures = self._drafts.pop(conversation, ("", ()))
        if text:
            self._composer.setPlainText(text)
            self._composer.moveCursor(QTextCursor.MoveOperation.End)  # to go on where the user left off
        for digest, path in pictures:
            if path.is_file():
                self._tray.add(digest, path)
        self._hold()

    def _hold(self) -> None:
        if self._ledger is not None:
            self._ledger.hold(HOLDER, [digest for _, pictures in self._drafts.values() for digest, _path in pictures])
