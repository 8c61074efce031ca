"""Pictures in the window: a thumbnail button, the row of a message's pictures, the tray above the message box
(pictures attached, removable, and what they cost here) and a viewer that shows one whole.

Every picture shown here is one of the picture store's own PNGs (decoded from a stranger's file in the sandbox
child and written by this app), so Qt's PNG reader only ever sees files this app made.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.ui.widgets.flow_layout import FlowLayout
from fara_desktop.ui.widgets.plain_text import plain_label

THUMBNAIL_SIDE = 72


def thumbnail_button(path: Path, side: int = THUMBNAIL_SIDE) -> QToolButton:
    """A picture as a button showing it small; its tooltip says what a click does."""
    button = QToolButton()
    button.setObjectName("pictureThumbnail")
    pixmap = QPixmap(str(path))
    if not pixmap.isNull():
        button.setIcon(
            QIcon(
                pixmap.scaled(
                    side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
                )
            )
        )
    else:
        button.setText("picture missing")
    button.setIconSize(QSize(side, side))
    button.setToolTip("Show the picture whole")
    button.setAccessibleName("Picture")
    return button


def empty_layout(layout: FlowLayout) -> None:
    while layout.count():
        item = layout.takeAt(0)
        widget = item.widget() if item is not None else None
        if widget is not None:
            widget.deleteLater()


class PictureRow(QWidget):
    """A message's pictures, wrapped at its width; a click asks to show one whole."""

    pictureRequested = Signal(object)  # the picture's Path

    def __init__(self, paths: tuple[Path, ...] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pictureRow")
        self._layout = FlowLayout(self, spacing=6)
        self.paths: tuple[Path, ...] = ()
        self.set_pictures(paths)

    def set_pictures(self, paths: tuple[Path, ...]) -> None:
        empty_layout(self._layout)
        self.paths = paths
        for path in paths:
            button = thumbnail_button(path)
            button.clicked.connect(lambda _=False, p=path: self.pictureRequested.emit(p))
            self._layout.addWidget(button)
        self.setVisible(bool(paths))


class PictureTray(QWidget):
    """The pictures attached to the message being written: each with a remove button, and a line that says what
    they cost here (or why the model cannot see them). Hidden while nothing is attached."""

    removed = Signal(str)  # a digest
    pictureRequested = Signal(object)  # a Path
    contentsChanged = Signal()  # a picture added or removed, or the tray cleared

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pictureTray")
        self.setAccessibleName("Pictures attached to the message")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        holder = QWidget()
        self._row = FlowLayout(holder, spacing=8)
        layout.addWidget(holder)
        self.cost = plain_label("")
        self.cost.setObjectName("pictureCost")
        self.cost.setWordWrap(True)
        layout.addWidget(self.cost)
        self._pictures: list[tuple[str, Path]] = []
        self.hide()

    def digests(self) -> tuple[str, ...]:
        return tuple(digest for digest, _ in self._pictures)

    def paths(self) -> tuple[Path, ...]:
        return tuple(path for _, path in self._pictures)

    def add(self, digest: str, path: Path) -> None:
        if digest in self.digests():
            return  # the same picture twice in one message says nothing more
        self._pictures.append((digest, path))
        self._rebuild()
        self.contentsChanged.emit()

    def remove(self, digest: str) -> None:
        self._pictures = [(d, p) for d, p in self._pictures if d != digest]
        self._rebuild()
        self.removed.emit(digest)
        self.contentsChanged.emit()

    def clear(self) -> None:
        self._pictures = []
        self._rebuild()
        self.contentsChanged.emit()

    def set_cost(self, text: str) -> None:
        self.cost.setText(text)
        self.cost.setVisible(bool(text))

    def _rebuild(self) -> None:
        empty_layout(self._row)
        for number, (digest, path) in enumerate(self._pictures, 1):
            cell = QWidget()
            cell.setObjectName("trayPicture")
            row = QHBoxLayout(cell)
            row.setContentsMargins(0, 0, 0, 0)
            row.setSpacing(2)
            thumbnail = thumbnail_button(path, 56)
            thumbnail.clicked.connect(lambda _=False, p=path: self.pictureRequested.emit(p))
            remove = QToolButton()
            remove.setObjectName("removePictureButton")
            remove.setText("×")
            remove.setToolTip("Remove this picture from the message")
            remove.setAccessibleName(f"Remove picture {number}")
            remove.clicked.connect(lambda _=False, d=digest: self.remove(d))
            row.addWidget(thumbnail)
            row.addWidget(remove, 0, Qt.AlignmentFlag.AlignTop)
            self._row.addWidget(cell)
        self.setVisible(bool(self._pictures))


class PictureViewer(QDialog):
    """One picture whole, scrolled when it is larger than the screen."""

    def __init__(self, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pictureViewer")
        self.setWindowTitle("Picture")
        layout = QVBoxLayout(self)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        self.image = QLabel()
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        pixmap = QPixmap(str(path))
        if pixmap.isNull():
            self.image.setText("This picture's file is missing or damaged.")
        else:
            self.image.setPixmap(pixmap)
            self.image.setAccessibleName(f"Picture, {pixmap.width()} × {pixmap.height()} pixels")
        scroll.setWidget(self.image)
        layout.addWidget(scroll)
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        if screen is not None and not pixmap.isNull():
            self.resize(
                min(pixmap.width() + 40, screen.width() * 9 // 10), min(pixmap.height() + 40, screen.height() * 9 // 10)
            )
