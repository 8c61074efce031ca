"""Write files so that a crash leaves the old or the new file, never half of one.

The temporary file gets a unique name made with ``O_EXCL`` (``tempfile.mkstemp``) in the target's folder: two
writers never share it, and a symlink planted at a predictable temporary name is never followed. It is created
readable by the user only (0600), flushed to disk, then renamed over the target.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_text_atomically(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a private temporary file in the same folder."""
    write_bytes_atomically(path, text.encode("utf-8"), mode)


def write_bytes_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` through a private temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode != 0o600:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_json_atomically(path: Path, data: Any, indent: int | None = 2) -> None:
    """``data`` as JSON, written atomically."""
    write_text_atomically(path, json.dumps(data, indent=indent))


def save_cache_file(path: Path, data: Any) -> bool:
    """For caches, which are only a speed-up: a read-only or full disk is logged, not raised."""
    try:
        write_json_atomically(path, data, indent=None)
    except OSError as exc:
        log.warning("cache %s not saved: %s", path, exc)
        return False
    return True


def read_cache_file(path: Path, max_bytes: int, what: str) -> dict[str, Any]:
    """A cache's JSON object; anything else (missing, unreadable, too large, not an object) reads as empty: a
    cache is only a speed-up, and a file on disk is untrusted like any other."""
    from fara_desktop.files.regular import read_regular_text

    try:
        data = json.loads(read_regular_text(path, max_bytes)) if path.is_file() else {}
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("Ignoring the unreadable %s %s: %s", what, path, type(exc).__name__)
        return {}
    return data if isinstance(data, dict) else {}
