"""Find shipped assets (icons, stylesheet) from a source checkout, an installed wheel or a frozen build."""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # fara_desktop/

ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def assets_dir() -> Path:
    candidates = []
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        candidates.append(Path(frozen_root) / "fara_desktop" / "assets")
    candidates.append(_PACKAGE_DIR / "assets")
    for candidate in candidates:
        if (candidate / "style.qss").is_file():
            return candidate
    raise FileNotFoundError("Fara Desktop's assets folder is missing; reinstall the application.")


def asset_path(name: str) -> Path:
    return assets_dir() / name


def icon_png(size: int) -> Path:
    """The app icon rendered at ``size`` pixels (one of ICON_SIZES)."""
    return assets_dir() / "icons" / f"fara-desktop-{size}.png"


def bundled_models_dir() -> Path | None:
    """Models shipped inside a frozen build (``packaging/build.sh``); None when running from Python."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    return Path(frozen_root) / "models" if frozen_root else None
