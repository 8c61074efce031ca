"""Logging to a rotating file in the app's log folder (and stderr for warnings)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from collections.abc import Callable
from pathlib import Path

from fara_desktop.files.paths import private_temp_dir

LOG_FILE_NAME = "fara-desktop.log"


def _rotating_handler(log_dir: Path) -> logging.Handler:
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return logging.handlers.RotatingFileHandler(
        log_dir / LOG_FILE_NAME, maxBytes=2_000_000, backupCount=3, encoding="utf-8"
    )


def fallback_log_dir() -> Path:
    """Ours alone: a folder someone else created (or a symlink) at the usual name is not used (``private_temp_dir``)."""
    return private_temp_dir("fara-desktop-logs")


def configure_logging(log_dir: Path, level: int = logging.INFO) -> Path:
    """Log to ``log_dir``; when it cannot be written (read-only data folder, full disk) log to a per-user folder in
    the temporary directory instead, and as a last resort to stderr. Returns the log file in use."""
    root = logging.getLogger()
    root.setLevel(level)
    existing = next((h for h in root.handlers if isinstance(h, logging.handlers.RotatingFileHandler)), None)
    if existing is not None:
        return Path(existing.baseFilename)
    handler: logging.Handler
    folders: tuple[Callable[[], Path], ...] = (lambda: log_dir, fallback_log_dir)
    for make_folder in folders:
        try:
            handler = _rotating_handler(make_folder())
            break
        except OSError:
            continue
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root.addHandler(handler)
    if isinstance(handler, logging.FileHandler):
        used = Path(handler.baseFilename)
        if used.parent != log_dir:
            logging.getLogger(__name__).warning("cannot write logs to %s; logging to %s", log_dir, used)
        return used
    return log_dir / LOG_FILE_NAME
