"""Pictures for the message being written: picked with the attach button, pasted (Ctrl+V) or dropped on the
message box or the chat; each read off the GUI thread (the sandbox child decodes it) into the tray above the message
box, which says what they cost here, or that the model cannot see them and which models here can."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QToolButton, QWidget

from fara_desktop.app.picture_ledger import PictureLedger
from fara_desktop.chats.prompt_wait import wait_words
from fara_desktop.engine.errors import cannot_see
from fara_desktop.engine.types import ModelInfo
from fara_desktop.models.discovery import DiscoveredModel
from fara_desktop.planning.planner import StartupPlan
from fara_desktop.settings import Settings
from fara_desktop.text.format import format_count
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.widgets.composer import PICTURE_SUFFIXES, Composer, pictures_in
from fara_desktop.ui.widgets.file_dialogs import FolderMemory
from fara_desktop.ui.widgets.picture_thumbnails import PictureTray, PictureViewer
from fara_desktop.vocabulary.pictures import AttachedPicture

PICTURE_FILTER = "Pictures (" + " ".join(f"*{s}" for s in PICTURE_SUFFIXES) + ")"


class PicturesScreen(Protocol):
    composer: Composer
    picture_tray: PictureTray
    attach_button: QToolButton
    folders: FolderMemory

    @property
    def settings(self) -> Settings: ...

    def show_notice(self, text: str, role: str = "notice") -> None: ...
    def set_status(self, text: str) -> None: ...


class PicturesController(QObject):
    """Owns the attaching: reading each picture in the background, the tray's cost line, the viewer; the tray's
    pictures are held in the ledger (no chat deleted meanwhile takes them)."""

    changed = Signal()  # the pictures attached changed: the draft is read ahead again

    def __init__(self, screen: PicturesScreen, ledger: PictureLedger, window: QWidget) -> None:
        super().__init__(window)
        self.screen = screen
        self.intake = ledger.intake
        self._ledger = ledger
        self._window = window
        self._info: ModelInfo | None = None
        self._seeing: list[str] = []  # models found here that can see pictures
        # the prompt reading speed here, tokens/s (the window's measure): a picture's tokens are read like text
        self.prompt_speed: Callable[[], float] = lambda: 0.0
        self._reading = 0
        self._calls: set[BackgroundCall] = set()
        screen.attach_button.clicked.connect(self.attach_files)
        screen.composer.picturesOffered.connect(self.offer)
        screen.picture_tray.removed.connect(lambda _digest: self._changed())
        tray = screen.picture_tray
        tray.contentsChanged.connect(lambda: ledger.hold("tray", tray.digests()))
        screen.picture_tray.pictureRequested.connect(self.show_picture)
        window.setAcceptDrops(True)
        window.installEventFilter(self)

    # ------------------------------------------------------------------ what the user does

    def attach_files(self) -> None:
        chosen = self.screen.folders.open_files(self._window, "pictures", "Attach pictures", PICTURE_FILTER)
        self.offer([Path(p) for p in chosen])

    def offer(self, items: list[Path | bytes]) -> None:
        """Read the pictures (files, or an image's encoded bytes) in the background, one after the other so they
        are attached in the order given; each that cannot be read is said with its name."""
        if not items:
            return
        self._reading += 1
        self.screen.set_status("Reading the picture…" if len(items) == 1 else f"Reading {len(items)} pictures…")
        reading = self._ledger.begin_reading()  # kept from any chat's deletion until the tray holds them

        whole = self.screen.settings.prompts.pictures_whole

        def read() -> list[AttachedPicture | tuple[str, Exception]]:
            results: list[AttachedPicture | tuple[str, Exception]] = []
            for item in items:
                try:
                    results.append(
                        self.intake.take_file(item, whole)
                        if isinstance(item, Path)
                        else self.intake.take_bytes(item, whole)
                    )
                except Exception as exc:  # a stranger's file: whatever it does, only it is refused
                    results.append((one_line(item.name, 80) if isinstance(item, Path) else "The pasted picture", exc))
            return results

        call = BackgroundCall(read, self)
        call.done.connect(lambda results: self._read(results, reading))
        call.failed.connect(lambda exc: self._read([("The picture", exc)], reading))
        for signal in (call.done, call.failed):
            signal.connect(lambda _result, c=call: self._calls.discard(c))
        self._calls.add(call)
        call.start()

    def _read(self, results: list[AttachedPicture | tuple[str, Exception]], reading: int) -> None:
        self._reading -= 1
        attached = 0
        already = 0
        for result in results:
            if isinstance(result, AttachedPicture):
                if result.digest in self.screen.picture_tray.digests():
                    already += 1  # the same picture again: one is enough, and the user is told
                    continue
                self.screen.picture_tray.add(result.digest, result.path)
                attached += 1
            else:
                name, exc = result
                self.screen.show_notice(f"{name} was not attached: it {one_line(str(exc), 200)}.", "error")
        self._ledger.end_reading(reading)  # the tray holds them now
        if not self._reading:
            in_tray = len(self.screen.picture_tray.digests())
            same = " (the same picture was dropped again: it is attached once)" if already else ""
            status = f"{format_count(in_tray, 'picture')} attached{same}" if in_tray else "The picture was not attached"
            self.screen.set_status(status)
        if attached:
            self._changed()

    def show_picture(self, path: Path) -> PictureViewer:
        viewer = PictureViewer(path, self._window)
        viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one more each time a picture is viewed, else
        viewer.show()
        return viewer

    def _changed(self) -> None:
        self.show_cost()
        self.changed.emit()

    # ------------------------------------------------------------------ the model

    def use_plan(self, plan: StartupPlan) -> None:
        self._seeing = [m.display_name for m in plan.scan.models if can_see(m)]
        self.show_cost()

    def model_changed(self, info: ModelInfo | None) -> None:
        self._info = info
        self.show_cost()

    def show_cost(self) -> None:
        """The tray's line: what the pictures cost here, or why the model cannot see them."""
        tray, info = self.screen.picture_tray, self._info
        count = len(tray.digests())
        if not count:
            tray.set_cost("")
        elif info is None:
            tray.set_cost("No model is loaded yet.")
        elif not info.vision:
            seeing = [name for name in self._seeing if name != info.name]
            tray.set_cost(cannot_see(info.name, info.vision_problem, seeing))
        else:
            pictures = format_count(count, "picture")
            tokens = f"about {info.picture_tokens * count:,} tokens" if info.picture_tokens else ""
            speed = self.prompt_speed()
            # its encoding, then its tokens read into the context: the whole wait, as the message box counts it
            seconds = count * (info.picture_seconds + (info.picture_tokens / speed if speed > 0 else 0.0))
            wait = f"{wait_words(seconds)} to read here (encoded once per chat)" if seconds else ""
            tray.set_cost(" · ".join(part for part in (pictures, tokens, wait) if part))

    # ------------------------------------------------------------------ drops on the window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._window and isinstance(event, (QDragEnterEvent, QDropEvent)):
            mime = event.mimeData()
            pictures = pictures_in(mime) if mime is not None else []
            if pictures:
                event.acceptProposedAction()
                if isinstance(event, QDropEvent) and event.type() == QEvent.Type.Drop:
                    self.offer(pictures)
                return True
        return False


def can_see(model: DiscoveredModel) -> bool:
    return bool(model.projector) and model.usable and not model.is_projector
