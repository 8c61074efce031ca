"""The end of the app's process: no child process outlives it, and a quit that ran out of time ends at once.

Children are the document reader's and pictures' sandboxes, the kernel check's measuring children and the MCP
servers; their owners end them while quitting, and this is the last sweep for one an owner could not reach in time
(a sandbox child kept reading for up to 30 s after a `kill -TERM`). multiprocessing's resource tracker is left alone:
it ends by itself when this process does, and killing it first makes the interpreter's own exit complain.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any, NoReturn

import psutil

log = logging.getLogger(__name__)
_ENDING = threading.Event()


def process_ending() -> bool:
    """Whether this process is ending (``end_child_processes`` has begun): no new child process is started, and a
    child that dies now died of the ending, not of what it was doing (a kernel check records no verdict)."""
    return _ENDING.is_set()


def _is_resource_tracker(process: psutil.Process) -> bool:
    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def end_child_processes(grace_s: float = 1.0) -> int:
    """Terminate every child process still running (their children too), kill what is left after ``grace_s``;
    returns how many there were. From here on the process is ending (``process_ending``)."""
    _ENDING.set()
    try:
        children = [c for c in psutil.Process().children(recursive=True) if not _is_resource_tracker(c)]
    except psutil.Error:
        return 0
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _gone, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    if children:
        log.info("%d child process(es) were still running at the end and were ended", len(children))
    return len(children)


def exit_now(code: int) -> NoReturn:
    """End the process without waiting for threads still running (inside llama.cpp, say): the logs and standard
    streams are flushed first. For a quit that ran out of its time only; everything that must be saved is saved."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def stop_process(process: subprocess.Popen[str], grace_s: float, how: int = signal.SIGTERM) -> None:
    """A child this process started (a server a benchmark runs) asked to end with ``how``, killed when it has not
    within ``grace_s``, and its output pipe closed."""
    process.send_signal(how)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
    if process.stdout is not None:
        process.stdout.close()


def release_child(process: Any) -> None:
    """Wait for a ``multiprocessing`` child that was told to end, and release its pipe. Another thread's
    ``Process.start`` reaps every ended child of the process (``multiprocessing``'s ``_cleanup``): when it reaps this
    one first, ``join`` returns with no status recorded and ``close`` refuses; the pipe then closes with the object."""
    process.join()
    with contextlib.suppress(ValueError):
        process.close()
