"""When Qt's X11 plugin (xcb) cannot start: which system libraries are missing, and the one command that installs them.

Qt names one library in its message (``libxcb-cursor0``) whatever is really missing; the plugin's own dependencies
tell the truth. ``ldd`` lists every shared library the plugin needs, transitively, with ``=> not found`` for the
ones the dynamic linker cannot find. Qt-free, so it can run inside Qt's fatal-message handler.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

# soname → (Debian/Ubuntu package, Fedora package) for what Qt 6's xcb plugin links to.
PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libSM.so.6": ("libsm6", "libSM"),
    "libICE.so.6": ("libice6", "libICE"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libGLX.so.0": ("libglx0", "libglvnd-glx"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
}


def xcb_plugin() -> Path | None:
    """PySide6's ``libqxcb.so``, found without importing Qt."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def not_found(ldd_output: str) -> list[str]:
    """The sonames ``ldd`` could not resolve, in its order, once each."""
    missing: list[str] = []
    for line in ldd_output.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where.strip() == "not found" and name and name not in missing:
            missing.append(name)
    return missing


def missing_xcb_libraries(plugin: Path | None = None) -> list[str] | None:
    """What the xcb plugin needs and this system lacks; None when that cannot be told (no plugin, no ``ldd``)."""
    plugin = plugin or xcb_plugin()
    if plugin is None:
        return None
    try:
        result = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return not_found(result.stdout + result.stderr)


def install_advice(missing: list[str]) -> str:
    """One line per system: the command that installs the packages holding ``missing``."""
    debian = list(dict.fromkeys(PACKAGES[name][0] for name in missing if name in PACKAGES))
    fedora = list(dict.fromkeys(PACKAGES[name][1] for name in missing if name in PACKAGES))
    unknown = [name for name in missing if name not in PACKAGES]
    lines = [f"  Missing: {', '.join(missing)}."]
    if debian:
        lines.append(f"  Debian/Ubuntu:  sudo apt install {' '.join(debian)}")
        lines.append(f"  Fedora:         sudo dnf install {' '.join(fedora)}")
    if unknown:
        lines.append(f"  Install the package that provides {', '.join(unknown)} with your system's package manager.")
    return "\n".join(lines)
