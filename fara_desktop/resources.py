"""Find shipped assets (icons, stylesheet) from a source checkout, an installed wheel or a frozen build."""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def assets_dir() -> Path:
    candidates = []
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        candidates.append(Path(frozen_root) / "fara_desktop" / "assets")
    candidates += [_PACKAGE_DIR / "assets", _PACKAGE_DIR.parent / "assets"]
    for candidate in candidates:
        if (candidate / "style.qss").is_file():
            return candidate
    raise FileNotFoundError("Fara Desktop's assets folder is missing; reinstall the application.")


def asset_path(name: str) -> Path:
    return assets_dir() / name
