"""Remember the main window's size, position and splitter sizes between runs (config/window.json)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QRect, QSize
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QMainWindow, QSplitter, QWidget

from fara_desktop.files.atomic import write_json_atomically
from fara_desktop.files.regular import read_regular_text

log = logging.getLogger(__name__)


MAX_STATE_BYTES = 64 * 1024
MAX_PANE_PX = 20_000  # wider than any screen; a larger saved size is damage, not a preference


DEFAULT_PANES = (230, 730, 320)  # the main splitter: the chat list, the chat, the machine panel
MIN_SIDE_PANE = 120  # a side pane narrower than this is shut, not a width to keep


def sizes_giving_room(sizes: list[int], index: int) -> list[int] | None:
    """The splitter's sizes when the side pane ``index`` is shown with (almost) no width — dragged shut, or restored
    so from an earlier version's ``window.json``: its default width, taken from the chat (a toggle that shows a
    0-px pane did nothing). None: it has room."""
    if sizes[index] >= MIN_SIDE_PANE:
        return None
    wanted = DEFAULT_PANES[index]
    return [
        wanted if i == index else max(size - wanted, MIN_SIDE_PANE) if i == 1 else size for i, size in enumerate(sizes)
    ]


def sizes_to_keep(sizes: list[int], hidden: set[int]) -> list[int]:
    """What is remembered of the splitter: a side pane hidden (by the user, or by the app for a small window) or
    shut keeps its default width, never 0 — a collapse made for a small screen is not a choice to keep."""
    return [
        DEFAULT_PANES[i] if i != 1 and (i in hidden or size < MIN_SIDE_PANE) else size for i, size in enumerate(sizes)
    ]


PREFERRED_SIZE = QSize(1280, 800)
# Room for the window manager's title bar and borders before they are known (the window is not shown yet).
FRAME_ALLOWANCE = QSize(16, 48)


def first_geometry(available: QRect, preferred: QSize = PREFERRED_SIZE) -> QRect:
    """The first window: the preferred size, or what the screen's free area (without panels and docks) allows
    with room for the frame, centred in it."""
    width = min(preferred.width(), available.width() - FRAME_ALLOWANCE.width())
    height = min(preferred.height(), available.height() - FRAME_ALLOWANCE.height())
    rect = QRect(0, 0, max(width, 1), max(height, 1))
    rect.moveCenter(available.center())
    return rect


def fit_to_screen(window: QWidget, preferred: QSize) -> None:
    """Size a window or dialog before it is shown: ``preferred``, or what the free area of its screen allows (a
    1366×768 laptop at 150 % scaling has 911×512 logical pixels)."""
    screen = window.screen()
    available = screen.availableGeometry()
    window.resize(first_geometry(available, preferred).size())


def keep_on_screen(window: QWidget) -> None:
    """Bring the window, frame included, inside the free area of the screen it is (mostly) on — or of the primary
    screen when it is on none, as after the monitor it was remembered on went away. Too large: shrunk to fit."""
    frame = window.frameGeometry()
    screen: QScreen | None = QGuiApplication.screenAt(frame.center()) or QGuiApplication.primaryScreen()
    if screen is None:
        return
    available = screen.availableGeometry()
    if available.contains(frame):
        return
    extra_w = frame.width() - window.width()
    extra_h = frame.height() - window.height()
    width = min(window.width(), available.width() - extra_w)
    height = min(window.height(), available.height() - extra_h)
    window.resize(max(width, window.minimumWidth()), max(height, window.minimumHeight()))
    frame = window.frameGeometry()
    x = min(max(frame.x(), available.x()), available.right() + 1 - frame.width())
    y = min(max(frame.y(), available.y()), available.bottom() + 1 - frame.height())
    window.move(max(x, available.x()), max(y, available.y()))


def window_state_file(config_dir: Path) -> Path:
    return config_dir / "window.json"


def save_window_state(
    config_dir: Path, window: QMainWindow, splitter: QSplitter, sizes: list[int] | None = None
) -> None:
    """``sizes``: the splitter's sizes to remember (default: as they are)."""
    state = {
        "geometry": bytes(window.saveGeometry().toBase64().data()).decode("ascii"),
        "splitter": sizes if sizes is not None else splitter.sizes(),
    }
    try:
        write_json_atomically(window_state_file(config_dir), state)
    except OSError as exc:  # a read-only config folder must not stop the window from closing
        log.warning("window state not saved: %s", exc)


def restore_window_state(config_dir: Path, window: QMainWindow, splitter: QSplitter) -> bool:
    """Apply the saved state; False (and the defaults stay) when there is none or it is unusable."""
    try:
        state = json.loads(read_regular_text(window_state_file(config_dir), MAX_STATE_BYTES))
        geometry = QByteArray.fromBase64(str(state["geometry"]).encode("ascii"))
        sizes = [int(size) for size in state["splitter"]]
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        log.warning("window state ignored: %s", type(exc).__name__)
        return False
    restored = window.restoreGeometry(geometry)
    if len(sizes) == splitter.count() and all(0 <= size <= MAX_PANE_PX for size in sizes) and sum(sizes) > 0:
        splitter.setSizes(sizes)
    return restored
