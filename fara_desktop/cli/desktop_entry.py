"""Put Fara Desktop into the Linux desktop's launcher (freedesktop .desktop file + hicolor icons), or take it out.

The entry's file name is the reverse-DNS application id; Qt's ``setDesktopFileName`` uses the same id, so the
taskbar shows the right icon for the running window.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fara_desktop import APP_ID
from fara_desktop.files.resources import ICON_SIZES, asset_path, icon_png


class DesktopEntryError(Exception):
    """The launcher entry could not be written or removed (message says why)."""


@dataclass
class DesktopEntryResult:
    """What was written or removed."""

    entry: Path
    files: list[Path] = field(default_factory=list)


def data_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else Path.home() / ".local" / "share"


def launch_command() -> list[str]:
    """How the launcher starts this installation: the frozen executable, the ``fara-desktop`` script next to this
    Python, or ``python -m fara_desktop``."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).resolve())]
    script = Path(sys.executable).parent / ("fara-desktop.exe" if os.name == "nt" else "fara-desktop")
    if script.is_file():
        return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "fara_desktop"]


def _exec_quote(arg: str) -> str:
    # Desktop Entry spec: reserved characters need double quotes; inside them, escape " ` $ and \.
    if all(c.isalnum() or c in "/._-+:=@," for c in arg):
        return arg
    escaped = "".join("\\" + c if c in '"`$\\' else c for c in arg)
    return f'"{escaped}"'


def render_entry(command: list[str]) -> str:
    template = asset_path("fara-desktop.desktop.in").read_text(encoding="utf-8")
    exec_line = " ".join(_exec_quote(arg) for arg in command).replace("%", "%%")
    return (
        template.replace("@EXEC@", exec_line)
        .replace("@TRYEXEC@", command[0])
        .replace("@ICON@", APP_ID)
        .replace("@APP_ID@", APP_ID)
    )


def _icon_targets(base: Path) -> list[tuple[Path, Path]]:
    icons = base / "icons" / "hicolor"
    pairs = [(icon_png(size), icons / f"{size}x{size}" / "apps" / f"{APP_ID}.png") for size in ICON_SIZES]
    pairs.append((asset_path("fara-desktop.svg"), icons / "scalable" / "apps" / f"{APP_ID}.svg"))
    return pairs


def _refresh_caches(base: Path) -> None:
    """Tell the desktop about the change; both tools are optional and their absence is not an error."""
    for tool, target in (
        ("update-desktop-database", base / "applications"),
        ("gtk-update-icon-cache", base / "icons" / "hicolor"),
    ):
        if shutil.which(tool) and target.is_dir():
            subprocess.run([tool, "-q", str(target)], check=False, capture_output=True, timeout=30)


def install_desktop_entry(base: Path | None = None, command: list[str] | None = None) -> DesktopEntryResult:
    base = base or data_home()
    entry = base / "applications" / f"{APP_ID}.desktop"
    result = DesktopEntryResult(entry)
    try:
        for source, target in _icon_targets(base):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            result.files.append(target)
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial = entry.with_suffix(".desktop.partial")
        partial.write_text(render_entry(command or launch_command()), encoding="utf-8")
        partial.chmod(0o755)  # some desktops only launch entries marked executable
        partial.replace(entry)
        result.files.append(entry)
    except OSError as exc:
        raise DesktopEntryError(f"cannot write the launcher entry under {base}: {exc.strerror or exc}") from exc
    _refresh_caches(base)
    return result


def uninstall_desktop_entry(base: Path | None = None) -> DesktopEntryResult:
    base = base or data_home()
    entry = base / "applications" / f"{APP_ID}.desktop"
    result = DesktopEntryResult(entry)
    try:
        for target in [entry, *(target for _, target in _icon_targets(base))]:
            if target.exists():
                target.unlink()
                result.files.append(target)
    except OSError as exc:
        raise DesktopEntryError(f"cannot remove the launcher entry under {base}: {exc.strerror or exc}") from exc
    _refresh_caches(base)
    return result
