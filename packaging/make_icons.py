"""Render fara_desktop/assets/fara-desktop.svg into the PNG sizes desktops ask for, a Windows .ico and a macOS .icns.

Run after changing the SVG:  .venv/bin/python packaging/make_icons.py   (needs Pillow for .ico/.icns)
The outputs are committed so that neither installing nor freezing the app needs this script.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "fara_desktop" / "assets"
sys.path.insert(0, str(ROOT))

from fara_desktop.files.resources import ICON_SIZES  # noqa: E402


def render_pngs() -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(ASSETS / "fara-desktop.svg"))
    written = []
    for size in ICON_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        target = ASSETS / "icons" / f"fara-desktop-{size}.png"
        target.parent.mkdir(exist_ok=True)
        image.save(str(target))
        written.append(target)
    return written


def write_ico_and_icns() -> None:
    from PIL import Image

    largest = Image.open(ASSETS / "icons" / "fara-desktop-512.png")
    largest.save(ASSETS / "icons" / "fara-desktop.ico", sizes=[(s, s) for s in (16, 24, 32, 48, 64, 128, 256)])
    largest.save(ASSETS / "icons" / "fara-desktop.icns")


if __name__ == "__main__":
    for path in render_pngs():
        print(path.relative_to(ROOT))
    write_ico_and_icns()
    print("fara_desktop/assets/icons/fara-desktop.ico, assets/icons/fara-desktop.icns")
