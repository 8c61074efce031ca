"""Write small JSON files so that a crash leaves the old or the new file, never half of one."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_json_atomically(path: Path, data: Any, indent: int | None = 2) -> None:
    """Write to a temporary file, flush it to disk, then rename it over the old file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=indent)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def save_cache_file(path: Path, data: Any) -> bool:
    """For caches, which are only a speed-up: a read-only or full disk is logged, not raised."""
    try:
        write_json_atomically(path, data, indent=None)
    except OSError as exc:
        log.warning("cache %s not saved: %s", path, exc)
        return False
    return True
