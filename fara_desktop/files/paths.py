"""Where Fara Desktop keeps its files.

``FARA_HOME`` overrides everything (tests, portable installs): data, config, cache and logs then live in
sub-folders of it. Otherwise the platform's conventional per-user folders are used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from platformdirs import PlatformDirs

_APP_DIR_NAME = "fara-desktop"


@dataclass(frozen=True)
class AppPaths:
    """The folders the app writes to; created on demand, readable by the user only."""

    data: Path
    config: Path
    cache: Path
    logs: Path

    @property
    def models(self) -> Path:
        return self.data / "models"

    def ensure(self) -> AppPaths:
        """Create the folders. One that cannot be created (read-only disk or parent) is left to the code that
        writes there, which says so and carries on: the app must start anyway."""
        for folder in (self.data, self.config, self.cache, self.logs):
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError:
                continue
        return self


def app_paths(environ: os._Environ[str] | dict[str, str] | None = None) -> AppPaths:
    env = os.environ if environ is None else environ
    home = env.get("FARA_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        return AppPaths(data=root / "data", config=root / "config", cache=root / "cache", logs=root / "logs")
    dirs = PlatformDirs(_APP_DIR_NAME, appauthor=False)
    return AppPaths(
        data=Path(dirs.user_data_dir),
        config=Path(dirs.user_config_dir),
        cache=Path(dirs.user_cache_dir),
        logs=Path(dirs.user_log_dir),
    )


def private_temp_dir(prefix: str) -> Path:
    """A folder in the system's temporary directory for this user only: ``<tmp>/<prefix>-<uid>``.

    The name is predictable, so another user can create it first (or plant a symlink there): an existing one is
    used only if it is a real folder, owned by us and closed to others; otherwise a fresh, unpredictably named
    folder is made instead."""
    import stat
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else None
    folder = Path(tempfile.gettempdir()) / f"{prefix}-{uid if uid is not None else 'user'}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    try:
        info = folder.lstat()
    except OSError:
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    private = stat.S_ISDIR(info.st_mode) and (uid is None or info.st_uid == uid) and not info.st_mode & 0o077
    return folder if private else Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
