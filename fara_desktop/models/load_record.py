"""A model load that never finished: the file that took the app down, remembered so it never does it twice.

llama.cpp can abort the whole process on a file it cannot handle (``GGML_ASSERT``): no exception reaches Python,
and a model chosen once is loaded at every start. So before llama.cpp opens a file, the file is recorded on disk
(``loading.json``), and the record is removed when llama.cpp returns, whether it loaded the model or refused it.
A start that finds a record left by a process that is gone, and that died by a fatal signal (its fatal-signal log,
``files/fatal_log``, is written; a process stopped by SIGTERM or Ctrl+C leaves it empty and is nobody's fault),
knows that file stopped the app: it moves it to the list of crashed models (``crashed-models.json``), which
discovery shows as unusable with the reason, and the planner never loads. A file that changes (re-downloaded:
another size or time) is tried again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fara_desktop.files.atomic import write_text_atomically
from fara_desktop.files.fatal_log import died_by_fatal_signal, fatal_log_in_use, process_alive
from fara_desktop.text.untrusted import one_line

log = logging.getLogger(__name__)

LOADING_FILE = "loading.json"
CRASHED_FILE = "crashed-models.json"
_MAX_RECORD_BYTES = 1 << 20
_MAX_CRASHED = 100


@dataclass(frozen=True)
class CrashedLoad:
    """A model file whose load stopped the app, as it was then (size and time identify that version of it)."""

    path: str
    size: int
    mtime_ns: int
    when: float  # when the load began (seconds since the epoch)

    def matches(self, path: Path) -> bool:
        try:
            stat = path.stat()
        except OSError:
            return False
        return str(path) == self.path and (stat.st_size, stat.st_mtime_ns) == (self.size, self.mtime_ns)

    @property
    def reason(self) -> str:
        day = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.when))
        return (
            f"llama.cpp stopped the app while loading this file ({day}), so it is not loaded again; "
            "the file may be damaged or need a newer llama.cpp: replace or delete it"
        )


class LoadRecord:
    """The two files in the data folder that make loading crash-safe (see the module's docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._loading = folder / LOADING_FILE
        self._crashed = folder / CRASHED_FILE

    @contextlib.contextmanager
    def loading(self, path: Path) -> Iterator[None]:
        """Wrap llama.cpp's open of ``path``: recorded (and flushed to disk) before, removed after, unless the
        process dies in between. A record that cannot be written does not stop the load."""
        self._begin(path)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                self._loading.unlink()

    def _begin(self, path: Path) -> None:
        try:
            stat = path.stat()
            entry = {
                "path": str(path),
                "size": stat.st_size,
                "mtime_ns": stat.st_mtime_ns,
                "when": time.time(),
                "pid": os.getpid(),
                "fatal_log": fatal_log_in_use(),
            }
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_text_atomically(self._loading, json.dumps(entry))
        except OSError as exc:
            log.warning("Could not record the model load (crash protection is off for it): %s", exc)

    def collect_crashes(self) -> list[CrashedLoad]:
        """At start: a record left by a process that is gone is a load that stopped the app. Returns those found
        now (to tell the user once); they join the crashed list."""
        entry = _read_json(self._loading)
        if entry is None:
            return []
        pid = entry.get("pid") if isinstance(entry, dict) else None
        if isinstance(pid, int) and pid != os.getpid() and process_alive(pid):
            return []  # another process of ours (a `serve` beside the window) is loading right now
        with contextlib.suppress(OSError):
            self._loading.unlink()
        crash = _crash_from(entry)
        if crash is None:
            return []
        fatal_log = entry.get("fatal_log") if isinstance(entry, dict) else None
        if not died_by_fatal_signal(fatal_log if isinstance(fatal_log, str) else ""):
            # SIGTERM at logout, a Ctrl+C, `systemctl stop`: the load was interrupted, the file did nothing wrong
            log.info("The last load of %s was interrupted (the app was stopped)", one_line(Path(crash.path).name))
            return []
        log.warning("The last load of %s never finished: llama.cpp stopped the app", one_line(Path(crash.path).name))
        earlier = [c for c in self.crashed() if c.path != crash.path][-(_MAX_CRASHED - 1) :]
        crashed = [*earlier, crash]
        try:
            write_text_atomically(self._crashed, json.dumps([asdict(c) for c in crashed]))
        except OSError as exc:
            log.warning("Could not save the list of models that crashed the app: %s", exc)
        return [crash]

    def crashed(self) -> list[CrashedLoad]:
        entries = _read_json(self._crashed)
        if not isinstance(entries, list):
            return []
        return [c for c in (_crash_from(e) for e in entries) if c is not None]

    def crash_of(self, path: Path, crashed: list[CrashedLoad] | None = None) -> CrashedLoad | None:
        """The crash this very file (same size and time) caused, if any."""
        return next((c for c in (self.crashed() if crashed is None else crashed) if c.matches(path)), None)


def _read_json(file: Path) -> Any:
    try:
        with file.open("rb") as handle:
            return json.loads(handle.read(_MAX_RECORD_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("Ignoring the unreadable %s: %s", file.name, exc)
        return None


def _crash_from(entry: Any) -> CrashedLoad | None:
    if not isinstance(entry, dict):
        return None
    path, size, mtime, when = (entry.get(k) for k in ("path", "size", "mtime_ns", "when"))
    if not isinstance(path, str) or not isinstance(size, int) or not isinstance(mtime, int):
        return None
    return CrashedLoad(path, size, mtime, float(when) if isinstance(when, (int, float)) else 0.0)
