"""Screenshots of the screens a test checked, for CI's artefacts (``FARA_SCREENSHOTS``, set by ``.ci/run``): the
geometry and contrast checks say a screen is right; a person looks at these to see it."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QWidget


def keep_screenshot(widget: QWidget, name: str) -> None:
    """``widget`` as drawn now, as ``<FARA_SCREENSHOTS>/<name>.png`` (nothing when the variable is not set)."""
    folder = os.environ.get("FARA_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    widget.grab().save(str(Path(folder) / f"{name}.png"))
