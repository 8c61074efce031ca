"""Remember the main window's size, position and splitter sizes between runs (config/window.json)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMainWindow, QSplitter

from fara_desktop.atomic_files import write_json_atomically
from fara_desktop.regular_files import read_regular_text

log = logging.getLogger(__name__)


MAX_STATE_BYTES = 64 * 1024
MAX_PANE_PX = 20_000  # wider than any screen; a larger saved size is damage, not a preference


def window_state_file(config_dir: Path) -> Path:
    return config_dir / "window.json"


def save_window_state(config_dir: Path, window: QMainWindow, splitter: QSplitter) -> None:
    state = {
        "geometry": bytes(window.saveGeometry().toBase64().data()).decode("ascii"),
        "splitter": splitter.sizes(),
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
