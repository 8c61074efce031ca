"""Evidence of how a process of ours died: a fatal signal (a crash) or a termination (nobody's fault).

A record left on disk by a dead process (a model load, a first batch) means that process died in between; it
does not say how. A SIGSEGV or SIGABRT inside llama.cpp is the file's or the kernels' fault; a SIGTERM at logout,
a Ctrl+C or ``systemctl stop`` during a load is nobody's. Python's ``faulthandler`` writes to a file on the fatal
signals (SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL) and never on a termination: each process that enables it here
gets ``fatal-<pid>.log``, empty while it lives, and a record names that file. At the next start an empty file
beside a record is a termination; a written one is a crash.

The entry points (the window, ``serve``, ``smoke``) enable it; a process that did not (a test, a library user) has
no file, and its records are read as before: as crashes.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import re
import time
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)
_open: list[tuple[Path, IO[str]]] = []
_NAME = re.compile(r"^fatal-(\d+)\.log$")


def enable_fatal_log(folder: Path) -> Path | None:
    """Start writing this process's fatal-signal log in ``folder`` (once); its path, or None when it cannot be."""
    if _open:
        return _open[0][0]
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"fatal-{os.getpid()}.log"
        handle = path.open("w", encoding="utf-8")
        faulthandler.enable(file=handle, all_threads=True)
    except (OSError, RuntimeError) as exc:
        log.warning("No fatal-signal log (a crash will be told from a stop less well): %s", exc)
        return None
    _open.append((path, handle))
    return path


def fatal_log_in_use() -> str:
    """This process's fatal-signal log ("" when none)."""
    return str(_open[0][0]) if _open else ""


def died_by_fatal_signal(log_file: str) -> bool:
    """For a dead process whose record names ``log_file``: True when it died by a fatal signal, or when that
    cannot be told (no file named, or the file is gone); False when its log is empty (it was terminated)."""
    if not log_file:
        return True
    try:
        return Path(log_file).stat().st_size > 0
    except OSError:
        return True


def sweep_fatal_logs(folder: Path, older_than: float = 86_400.0) -> None:
    """Remove the logs of processes that are gone, once a day has passed (the records that name them are read
    at the next start; a log kept a day longer costs nothing)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            match = _NAME.match(path.name)
            if not match or int(match.group(1)) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > older_than and not process_alive(int(match.group(1))):
                    path.unlink()


def process_alive(pid: int) -> bool:
    """Whether a process of that number runs (somebody else's counts: its number is taken)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
